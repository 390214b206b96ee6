"""bot/formatting.py: answers into Discord messages within Discord's limits (pure, no Discord)."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.formatting import (
    EMBED_DESCRIPTION_LIMIT,
    EXCERPT_LIMIT,
    MESSAGE_LIMIT,
    THREAD_NAME_LIMIT,
    Asker,
    answer_text,
    clip_lines,
    dossier_embed,
    excerpt_embeds,
    sources_embed,
    split_message,
    thread_name,
)
from bot.views import answer_view
from oracle.answer.citations import Citation
from oracle.answer.results import Answer
from oracle.dossier import Dossier, Mentioned

EMBED_TOTAL_LIMIT = 6000  # title + description + fields + footer, across one message's embeds
FIELD_VALUE_LIMIT = 1024


def squeeze(text: str) -> str:
    return "".join(text.split())


def answer(text: str = "An answer.", mode: str = "llm", citations=(), language: str = "en") -> Answer:
    return Answer("q", text, mode, "", tuple(citations), (), (), {}, language=language)


# ---------------------------------------------------------------------------------------------
# split_message


def test_a_short_text_is_one_piece_stripped():
    assert split_message("  The Candle Monk sold the compass [Session 1].\n\n") == [
        "The Candle Monk sold the compass [Session 1]."
    ]
    assert split_message("x" * MESSAGE_LIMIT) == ["x" * MESSAGE_LIMIT]  # exactly at the limit: one piece


@pytest.mark.parametrize("blank", ["", "   ", "\n\n\t"])
def test_an_empty_text_is_never_an_empty_message(blank):
    assert split_message(blank) == ["…"]


def test_paragraphs_are_kept_whole():
    paragraphs = [f"Paragraph {i}. " + "The monk lit the candles again. " * 14 for i in range(12)]
    paragraphs = [p.strip() for p in paragraphs]
    text = "\n\n".join(paragraphs)
    pieces = split_message(text)
    assert len(text) > 2 * MESSAGE_LIMIT and len(pieces) >= 3
    assert all(len(p) <= MESSAGE_LIMIT for p in pieces)
    assert "\n\n".join(pieces) == text  # every cut falls between two paragraphs
    for piece in pieces:
        assert piece.startswith("Paragraph ") and piece.endswith("again.")
    # Greedy: a piece never leaves out a next paragraph that would still have fitted.
    for piece, after in zip(pieces, pieces[1:], strict=False):
        assert len(piece) + 2 + len(after.split("\n\n")[0]) > MESSAGE_LIMIT


def test_without_paragraphs_the_cut_falls_after_a_sentence():
    sentences = [f"Sentence number {i} tells how the party crossed the Weeping Bridge [Session 3]." for i in range(60)]
    text = " ".join(sentences)
    pieces = split_message(text)
    assert len(pieces) == 3
    assert all(len(p) <= MESSAGE_LIMIT for p in pieces)
    assert " ".join(pieces) == text
    assert all(p.endswith("[Session 3].") and p.startswith("Sentence number ") for p in pieces)
    assert len(pieces[0]) > MESSAGE_LIMIT - 90  # as much as fits, not an early cut


def test_a_sentence_ending_in_a_quote_or_bracket_is_a_sentence():
    text = ("He said “go north.” " * 150).strip()
    pieces = split_message(text)
    assert all(p.endswith("north.”") for p in pieces)
    assert " ".join(pieces) == text


def test_without_sentences_the_cut_falls_between_words():
    text = " ".join(f"word{i}" for i in range(900))  # ~7,000 characters, no punctuation
    pieces = split_message(text)
    assert all(len(p) <= MESSAGE_LIMIT for p in pieces)
    assert " ".join(pieces) == text  # no word cut in two
    assert all(re.fullmatch(r"word\d+( word\d+)*", p) for p in pieces)


def test_a_word_longer_than_the_limit_is_cut_hard_and_kept_whole():
    word = "A" * 3000
    assert split_message(word) == ["A" * MESSAGE_LIMIT, "A" * 1000]
    text = f"Before it. {word} after it."
    pieces = split_message(text)
    assert pieces == ["Before it.", "A" * MESSAGE_LIMIT, "A" * 1000 + " after it."]
    assert squeeze("".join(pieces)) == squeeze(text)


def test_a_custom_limit_is_honoured():
    pieces = split_message("one two three four five six seven eight nine ten", limit=12)
    assert pieces == ["one two", "three four", "five six", "seven eight", "nine ten"]


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from(list("ab .!?\n”)é…🙂") + ["\n\n", "  ", "abc. ", "\t"]), max_size=200).map("".join),
    limit=st.integers(min_value=3, max_value=60),
)
def test_split_message_properties(text, limit):
    pieces = split_message(text, limit)
    assert pieces, text
    assert all(1 <= len(p) <= limit for p in pieces)
    assert all(p == p.strip() for p in pieces)
    if text.strip():
        assert squeeze("".join(pieces)) == squeeze(text)  # nothing lost but whitespace
    else:
        assert pieces == ["…"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=12), min_size=1, max_size=200), st.data())
def test_words_that_fit_are_never_cut_when_separated_by_spaces(words, data):
    limit = data.draw(st.integers(min_value=12, max_value=80))
    pieces = split_message(" ".join(words), limit)
    assert [w for p in pieces for w in p.split()] == words


def test_words_separated_by_newlines_are_not_cut():
    words = [f"Name{i:04d}" for i in range(400)]  # 3,600 characters, one name per line, no space
    pieces = split_message("\n".join(words))
    assert [w for p in pieces for w in p.split()] == words


# ---------------------------------------------------------------------------------------------
# thread_name


def test_thread_name_is_the_question_within_100_characters():
    assert thread_name("Who is  Pip?\n") == "Who is Pip?"
    question = "Why " * 60
    name = thread_name(question)
    assert len(name) == THREAD_NAME_LIMIT == 100
    assert name == " ".join(question.split())[:99] + "…"
    exact = "x" * 100
    assert thread_name(exact) == exact
    assert thread_name("   \n ") == "Oracle"


@given(st.text(max_size=400))
def test_thread_name_is_always_1_to_100_characters(question):
    name = thread_name(question)
    assert 1 <= len(name) <= THREAD_NAME_LIMIT
    assert name == name.strip() or name.endswith("…")


# ---------------------------------------------------------------------------------------------
# sources_embed and answer_text


def test_sources_embed_lists_label_path_and_lines():
    cited = answer(citations=[Citation("Session 1", "sessions/log.md", 3, 5), Citation("Sheet: Pip", "pcs/Pip.md", 1, 9)])
    embed = sources_embed(cited)
    assert (embed.title, embed.author.name, embed.footer.text) == (None, None, "Sources")
    assert embed.description == "**Session 1** — `sessions/log.md` lines 3–5\n**Sheet: Pip** — `pcs/Pip.md` lines 1–9"
    assert sources_embed(answer()) is None
    assert sources_embed(answer(mode="passages", citations=cited.citations)).footer.text == "Passages"


def test_a_public_answer_names_the_asker_and_the_question_within_discords_limits():
    question = "Who sold the compass? " * 40  # 880 characters: more than a title holds
    embed = sources_embed(answer(), Asker("Mirela's Player", question, "https://cdn.example/a.png"))
    assert embed.author.name == "Mirela's Player asked" and embed.author.icon_url == "https://cdn.example/a.png"
    assert len(embed.title) <= 256 and embed.title.endswith("…")
    assert " ".join(question.split()).startswith(embed.title[:-1]) and len(embed.title) > 250
    assert embed.description is None and embed.footer.text is None  # nothing cited: no sources line
    assert sources_embed(answer(), Asker("x" * 300, "q")).author.name == "x" * 255 + "…"


def test_excerpts_fit_one_message_and_say_when_a_source_is_not_readable():
    cited = [(f"Session {i}", f"sessions/{i}.md", i, i + 9, "A line of the session. " * 80) for i in range(12)]
    embeds = excerpt_embeds(cited)
    total = sum(len(e.title) + len(e.description) + len(e.footer.text) for e in embeds)
    assert total <= EMBED_TOTAL_LIMIT and len(embeds) <= 10
    assert len(embeds) == 6  # ~920 characters each: six fit
    assert all(len(e.description) <= EXCERPT_LIMIT and e.description.endswith("…") for e in embeds)
    assert [e.footer.text for e in embeds[:2]] == ["sessions/0.md · lines 0–9", "sessions/1.md · lines 1–10"]
    [gone] = excerpt_embeds([("Session 2", "a.md", 1, 2, "")])
    assert gone.description == "*Not in the notes you can read now (they may have changed).*"


def test_clip_lines_cuts_at_a_line_then_a_word():
    assert clip_lines("one\ntwo\nthree", 100) == "one\ntwo\nthree"
    assert clip_lines("alpha beta\ngamma delta epsilon", 20) == "alpha beta…"
    assert clip_lines("alpha beta gamma delta epsilon", 20) == "alpha beta gamma…"


def test_sources_embed_stays_within_4096_characters_with_many_citations():
    citations = [
        Citation(f"Session {i} — the long road through the marsh of sorrows", f"sessions/campaign/{i:04d}.md", i, i + 40)
        for i in range(400)
    ]
    embed = sources_embed(answer(citations=citations))
    description = embed.description
    assert len(description) <= EMBED_DESCRIPTION_LIMIT
    assert len(embed) <= EMBED_TOTAL_LIMIT
    *shown, more = description.split("\n")
    assert re.fullmatch(r"…and (\d+) more", more)
    assert len(shown) + int(more.split()[1]) == 400  # what is shown plus what is counted: all of them
    assert shown == [f"**{c.label}** — `{c.path}` lines {c.start_line}–{c.end_line}" for c in citations[: len(shown)]]
    assert len(description) + len(shown[0]) + 1 > EMBED_DESCRIPTION_LIMIT - 20  # filled, not cut early


def test_answer_text_marks_passages():
    assert answer_text(answer("Orrin Hale [Session 10].")) == "Orrin Hale [Session 10]."
    assert answer_text(answer("The Oracle could not write…", mode="passages")) == (
        "**Passages, not an answer.** The Oracle could not write…")


def test_what_the_oracle_writes_around_an_answer_is_in_the_question_s_language():
    cited = [Citation("Sesión 1", "sesiones/1.md", 3, 5)]
    passages = answer("El Oráculo no pudo…", mode="passages", citations=cited, language="es")
    assert answer_text(passages) == "**Pasajes, no una respuesta.** El Oráculo no pudo…"
    embed = sources_embed(passages, Asker("Lucía", "¿Quién vendió la brújula?"))
    assert (embed.author.name, embed.footer.text) == ("Lucía preguntó", "Pasajes")
    assert embed.description == "**Sesión 1** — `sesiones/1.md` líneas 3–5"
    [sources, *_] = answer_view("mesa", 7, sources=True, language="es").children
    assert sources.item.label == "Ver fuentes"


# ---------------------------------------------------------------------------------------------
# dossier_embed


def test_dossier_embed_names_aliases_first_and_last_sessions():
    dossier = Dossier("Brother Aldous", "sheet", ("Old Wick", "the Candle Monk"), (
        Mentioned("log › Session 1", "sessions/log.md", 3, 5, 3, sessions=(1,)),
        Mentioned("Session 4", "sessions/Session 4.md", 1, 2, 1, sessions=(4,)),
        Mentioned("Sheet: Brother_Aldous", "npcs/Brother_Aldous.md", 4, 4, 3),
    ))
    embed = dossier_embed(dossier)
    assert embed.title == "Brother Aldous"
    assert embed.description.split("\n")[1] == "**Session 4** — `sessions/Session 4.md` lines 1–2 (1×)"
    assert [(f.name, f.value, f.inline) for f in embed.fields] == [
        ("Also called", "Old Wick, the Candle Monk", False),
        ("First seen", "log › Session 1", True),
        ("Last seen", "Session 4", True),
    ]
    assert embed.footer.text == "sheet · mentioned under 3 labels"


def test_a_dossier_without_mentions_or_sessions():
    embed = dossier_embed(Dossier("Zarn Opal", "person", (), ()))
    assert (embed.description, embed.fields) == ("No mentions in the notes.", [])


def test_a_huge_dossier_fits_discords_embed_limits():
    mentions = tuple(Mentioned(f"{i:04d} the long road", f"sessions/{i:04d} the long road.md", i, i + 3, 2, sessions=(i,))
                     for i in range(1, 600))
    aliases = tuple(f"the Keeper of the {i}th Candle" for i in range(20))
    embed = dossier_embed(Dossier("N" * 300, "person", aliases, mentions))
    assert len(embed.title) <= 256
    assert len(embed.description) <= EMBED_DESCRIPTION_LIMIT
    assert all(len(f.value) <= FIELD_VALUE_LIMIT for f in embed.fields)
    assert len(embed) <= EMBED_TOTAL_LIMIT
    assert [f.value for f in embed.fields[1:]] == ["0001 the long road", "0599 the long road"]


def test_many_aliases_show_as_many_as_fit():
    aliases = tuple(f"the Keeper of the {i}th Candle" for i in range(60))  # ~1,700 characters joined
    embed = dossier_embed(Dossier("Brother Aldous", "sheet", aliases, ()))
    [also] = [f for f in embed.fields if f.name == "Also called"]
    assert len(also.value) <= FIELD_VALUE_LIMIT
    assert also.value.startswith("the Keeper of the 0th Candle, the Keeper of the 1th Candle")
