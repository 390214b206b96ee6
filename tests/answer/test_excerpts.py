"""Passages that answer: sentence splitting over Markdown, the terms a sentence is matched on, and
the sentences each passage shows, against hand-computed scores."""
from __future__ import annotations

import math

import pytest

from oracle.answer.excerpts import (
    Sentence,
    choose_excerpts,
    content_terms,
    going_on,
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


def test_the_sentence_after_the_one_that_names_it_is_shown_and_the_words_go_where_the_match_is():
    calls: list[list[str]] = []

    def similarity(texts):
        calls.append(list(texts))
        return [0.0] * len(texts)

    market, study = choose_excerpts([MARKET, STUDY], QUESTION, similarity, budget=12)

    # Over the 7 sentences: idf(vex) = ln 8, idf(lantern) = ln 4.5; one sentence of each passage scores,
    # and the embedding reads it and the two after it, all in one call.
    assert [[
        "Vex bought a brass lantern from a blind peddler.", "It cost three silver, paid in bent copper coins.",
        "Idris sang for coins.", "Pell studied the lantern's maker.", "Nobody else cared.",
    ]] == calls
    # 24 words for the two: each best sentence (9 + 5 words), then the sentence after Vex's, which
    # takes 0.7 of its score (9 words: 23); nothing else fits. The market shows more than its 12.
    assert "… Vex bought a brass lantern from a blind peddler. It cost three silver, paid in bent copper coins. …" == (
        market.text
    )
    assert (2, 3) == (market.start_line, market.end_line)
    assert {"label": "Session 4", "lines": [[2, 2], [3, 3]]} == market.to_json()
    assert "Pell studied the lantern's maker. …" == study.text
    assert (10, 10) == (study.start_line, study.end_line)


def test_the_budget_skips_a_sentence_that_does_not_fit_and_the_gap_shows():
    [market] = choose_excerpts([MARKET], query_terms("Vex lantern supper"), budget=13)
    # Scores: "Vex bought … peddler." 1.0, the one after it 0.7 (9 words: 9 + 9 > 13), "Teodric paid
    # for supper." 0.5 (ln 6 of 2 ln 6; 9 + 4 = 13 fits), "Idris sang …" 0.49 (no room left).
    assert "… Vex bought a brass lantern from a blind peddler. … Teodric paid for supper." == market.text
    assert [[2, 2], [5, 5]] == market.to_json()["lines"]


def test_the_query_embedding_decides_between_two_places_that_name_it():
    text = (
        "The lantern hummed all night.\nRain fell.\nThe roads flooded.\nThe party waited.\n"
        "Vex kept the lantern under his bed.\nNobody slept."
    )
    kept = chunk("Session 8", text, 1)
    terms = query_terms("What did Vex do with the lantern?")  # {vex, lantern}
    sims = {"The lantern hummed all night.": 0.9}
    # Keyword: "Vex kept …" scores ln 7 + ln 4 (1.0), "The lantern hummed …" ln 4 (0.416); with the
    # cosine, 1.316 against 1.0, and "Rain fell." after it takes 0.7 of that: 0.921.
    [excerpt] = choose_excerpts([kept], terms, lambda texts: [sims.get(t, 0.0) for t in texts], budget=7)
    assert "The lantern hummed all night. Rain fell. …" == excerpt.text
    [excerpt] = choose_excerpts([kept], terms, None, budget=7)
    assert "… Vex kept the lantern under his bed. …" == excerpt.text


def test_a_vault_s_sentences_are_matched_in_its_own_language():
    # Portuguese stop words ("aconteceu", "com", "da") are out and Snowball's Portuguese stemmer
    # meets "espadas" and "espada"; the fixed form (no language) keeps them, as English would.
    assert ["espad", "pyke"] == content_terms("O que aconteceu com a espada da Pyke?", "pt")
    assert ["espad", "pyke"] == content_terms("espadas do Pyke", "pt")
    assert ["aconteceu", "com", "espada", "da", "pyke"] == content_terms("O que aconteceu com a espada da Pyke?")
    # The answer is told in the sentence after the one that names the pit ("foso"), which no word of
    # the question reaches ("oímos", "oían" stem apart): it is shown for following it.
    spanish = chunk(
        "Sesion-3", "El camino subía.\nLlegamos al foso de la cueva.\nSe oían ladridos lejanos allí abajo.\nVolvimos.", 1
    )
    terms = query_terms("¿Qué oímos en el foso?", language="es")
    [excerpt] = choose_excerpts([spanish], terms, budget=12, language="es")
    assert "… Llegamos al foso de la cueva. Se oían ladridos lejanos allí abajo. …" == excerpt.text


def test_a_passage_no_term_reaches_shows_its_opening():
    rain = chunk("Session 9", "Rain fell. The roads flooded. The party waited a week at the inn.", 3)
    [excerpt] = choose_excerpts([rain], QUESTION, budget=5)
    assert "Rain fell. The roads flooded. …" == excerpt.text
    assert (3, 3) == (excerpt.start_line, excerpt.end_line)


def test_a_sentence_longer_than_the_budget_is_cut_once():
    long = chunk("Session 2", "Vex sold the lantern to a pawnbroker for a single penny at dawn. It came back.", 1)
    [excerpt] = choose_excerpts([long], QUESTION, budget=5)
    assert "Vex sold the lantern to …" == excerpt.text  # one ellipsis, not two


def test_and_then_what_shows_the_sentences_after_those_shown_then_nothing_at_the_end():
    [shown] = choose_excerpts([MARKET], QUESTION, budget=18)
    assert [[2, 2], [3, 3]] == shown.to_json()["lines"]
    after = going_on(shown, budget=8)
    assert after is not None
    # In note order from the sentence after the last one shown, while the words fit.
    assert "… Idris sang for coins. Teodric paid for supper." == after.text
    assert [[4, 4], [5, 5]] == after.to_json()["lines"]
    assert going_on(after) is None  # the passage ends there
    [opening] = choose_excerpts([STUDY], query_terms("dragon"), budget=4)  # no term: its opening
    assert "… Nobody else cared." == getattr(going_on(opening, budget=4), "text", None)


def test_and_before_that_shows_the_nearest_sentences_before_those_shown():
    [shown] = choose_excerpts([MARKET], query_terms("Idris sang"), budget=5)
    assert [[4, 4]] == shown.to_json()["lines"]
    before = going_on(shown, budget=18, back=True)
    assert before is not None
    # The nearest first, while the words fit, shown in note order.
    assert "… Vex bought a brass lantern from a blind peddler. It cost three silver, paid in bent copper coins. …" == (
        before.text
    )
    first = going_on(before, back=True)
    assert first is not None and [[1, 1]] == first.to_json()["lines"]
    assert going_on(first, back=True) is None  # the passage starts there
