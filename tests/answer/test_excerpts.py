"""Passages that answer: sentence splitting over Markdown, the terms a sentence is matched on, and
the sentences each passage shows, against hand-computed scores."""
from __future__ import annotations

import math

import pytest

from oracle.answer.excerpts import (
    Sentence,
    choose_excerpts,
    content_terms,
    idf,
    query_terms,
    split_sentences,
)
from oracle.types import Chunk

NOTE = """# Session 4 — The Night Market

Mr. Voss sold Vex a lantern for three silver. It was cold
to the touch. J. Pell said "Put it down. Now." Vex did not.

- Teodric paid the toll.
- Sefa counted e.g. the boats!
> The peddler was blind.

| Item | Who |
|---|---|
| Lantern | Vex |
---
**Role:** peddler
**Also called:** the Blind Man
Tags: #arc/lantern #npc/voss
"""


def test_sentences_follow_markdown_lines_lists_and_abbreviations():
    assert [
        Sentence("Mr. Voss sold Vex a lantern for three silver.", 12, 12),
        Sentence("It was cold to the touch.", 12, 13),  # a sentence across two lines of a paragraph
        Sentence('J. Pell said "Put it down. Now."', 13, 13),  # an initial; no cut inside a quotation
        Sentence("Vex did not.", 13, 13),
        Sentence("Teodric paid the toll.", 15, 15),  # each list item is its own block
        Sentence("Sefa counted e.g. the boats!", 16, 16),
        Sentence("The peddler was blind.", 17, 17),  # a blockquote, its marker dropped
        Sentence("Item | Who", 19, 19),  # table rows, not the separator row
        Sentence("Lantern | Vex", 21, 21),
        Sentence("**Role:** peddler", 23, 23),  # a bold label opens a block; the rule is dropped
        Sentence("**Also called:** the Blind Man", 24, 24),
    ] == split_sentences(NOTE, first_line=10)  # the heading, the blank lines and the tags are never shown


@pytest.mark.parametrize(
    "text, expected",
    [
        ("He left. then he came back.", ["He left. then he came back."]),  # no capital: no cut
        ("It rang at 3 p.m. Nobody came.", ["It rang at 3 p.m. Nobody came."]),  # an abbreviation
        ("Stop! Who goes there? Nobody…", ["Stop!", "Who goes there?", "Nobody…"]),
        ("She said “Wait. Listen.” Then she sang.", ["She said “Wait. Listen.”", "Then she sang."]),
        ('An odd " quote. It still splits.', ['An odd " quote.', "It still splits."]),  # unpaired: ignored
    ],
)
def test_sentence_ends(text, expected):
    assert expected == [s.text for s in split_sentences(text)]


def test_terms_are_stemmed_content_words_and_entity_names():
    assert ["vex", "lantern", "cost", "night", "market"] == content_terms(
        "What did Vex's lanterns cost us at the Night Market?"
    )
    assert frozenset({"peddler", "go", "old", "voss"}) == query_terms("Where did the peddler go?", ["Old Voss"])
    assert frozenset({"sesion", "aldou"}) == query_terms("¿Qué pasó en la Sesión con Aldous?")  # "pasó": "happened"


def test_idf_over_the_sentences():
    held = [frozenset({"vex", "lantern"}), frozenset({"lantern"}), frozenset({"rain"})]
    assert {"vex": pytest.approx(math.log(4)), "lantern": pytest.approx(math.log(2.5))} == idf(
        held, ["vex", "lantern", "sold"]
    )


def chunk(label: str, text: str, start: int) -> Chunk:
    lines = text.count("\n") + 1
    return Chunk(label, f"{label}.md", label, "session", 1, 1, label, start, start + lines - 1, text, "h")


MARKET = chunk(
    "Session 4",
    "The party reached the Night Market at dusk.\n"
    "Vex bought a brass lantern from a blind peddler.\n"
    "It cost three silver, paid in bent copper coins.\n"
    "Idris sang for coins.\n"
    "Teodric paid for supper.",
    1,
)
STUDY = chunk("Session 8", "Pell studied the lantern's maker.\nNobody else cared.", 10)
QUESTION = query_terms("Who sold Vex the lantern?")  # {sold, vex, lantern}; "sold" is in no sentence


def test_each_passage_shows_its_best_sentence_and_the_next_in_note_order():
    calls: list[list[str]] = []

    def similarity(texts):
        calls.append(list(texts))
        return [0.0] * len(texts)

    market, study = choose_excerpts([MARKET, STUDY], QUESTION, similarity)

    # Over the 7 sentences: idf(vex) = ln 8, idf(lantern) = ln 4.5; one sentence of each passage scores.
    assert [["Vex bought a brass lantern from a blind peddler.", "Pell studied the lantern's maker."]] == calls
    assert "… Vex bought a brass lantern from a blind peddler. It cost three silver, paid in bent copper coins. …" == (
        market.text
    )
    assert (2, 3) == (market.start_line, market.end_line)
    assert {"label": "Session 4", "lines": [[2, 2], [3, 3]]} == market.to_json()
    assert "Pell studied the lantern's maker. Nobody else cared." == study.text  # the whole passage: no ellipsis
    assert (10, 11) == (study.start_line, study.end_line)


def test_the_budget_skips_a_sentence_that_does_not_fit_and_the_gap_shows():
    [market] = choose_excerpts([MARKET], query_terms("Vex lantern supper"), budget=13)
    # Scores: "Vex bought … peddler." (vex, lantern: 2 ln 6) then "Teodric paid for supper." (ln 6);
    # the one after the best (9 words) would make 8 + 9 = 17 > 13 words, the third fits: 8 + 4 = 12.
    assert "… Vex bought a brass lantern from a blind peddler. … Teodric paid for supper." == market.text
    assert [[2, 2], [5, 5]] == market.to_json()["lines"]


def test_the_query_embedding_decides_among_the_shortlist():
    text = "The lantern hummed all night.\nVex kept the lantern under his bed.\nIt whispered a lullaby."
    kept = chunk("Session 8", text, 1)
    terms = query_terms("What did Vex do with the lantern?")  # {vex, lantern}
    sims = {"The lantern hummed all night.": 0.9, "Vex kept the lantern under his bed.": 0.1}
    # Keyword: "Vex kept …" scores ln 4 + ln 2.5 (best), "The lantern hummed …" ln 2.5: normalised 1.0
    # and 0.398; with the cosines, 1.1 against 1.298: the embedding turns the order round.
    [excerpt] = choose_excerpts([kept], terms, lambda texts: [sims[t] for t in texts], budget=12)
    assert "The lantern hummed all night. Vex kept the lantern under his bed. …" == excerpt.text
    [excerpt] = choose_excerpts([kept], terms, lambda texts: [sims[t] for t in texts], budget=10)
    assert "The lantern hummed all night. …" == excerpt.text  # the next one (7 words) does not fit
    [excerpt] = choose_excerpts([kept], terms, None, budget=12)
    assert "… Vex kept the lantern under his bed. It whispered a lullaby." == excerpt.text


def test_a_passage_no_term_reaches_shows_its_opening():
    rain = chunk("Session 9", "Rain fell. The roads flooded. The party waited a week at the inn.", 3)
    [excerpt] = choose_excerpts([rain], QUESTION, budget=5)
    assert "Rain fell. The roads flooded. …" == excerpt.text
    assert (3, 3) == (excerpt.start_line, excerpt.end_line)


def test_a_sentence_longer_than_the_budget_is_cut_once():
    long = chunk("Session 2", "Vex sold the lantern to a pawnbroker for a single penny at dawn. It came back.", 1)
    [excerpt] = choose_excerpts([long], QUESTION, budget=5)
    assert "Vex sold the lantern to …" == excerpt.text  # one ellipsis, not two
