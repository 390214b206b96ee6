"""`verify`: an answer's citations checked against the context it was given. Pure: hand-built chunks."""
from __future__ import annotations

import pytest

from oracle.answer.citations import Citation, Verified, verify
from oracle.answer.context import Context, Headline
from oracle.types import Chunk


def chunk(label: str, path: str, start: int, end: int, text: str = "Some text of the notes.") -> Chunk:
    return Chunk(
        id=f"{label}@{path}:{start}",
        path=path,
        label=label,
        kind="session" if label.startswith("Session") else "sheet",
        part=1,
        parts=1,
        heading="",
        start_line=start,
        end_line=end,
        text=text,
        text_hash=f"hash-{label}-{start}",
    )


S1 = chunk("Session 1", "sessions/log.md", 3, 5)
S1_PART_2 = chunk("Session 1", "sessions/log.md", 6, 9)
S2 = chunk("Session 2", "sessions/log.md", 10, 14)
S3 = chunk("Session 3", "sessions/Session 3.md", 1, 4)
KAT = chunk("Sheet: Kat", "sheets/Kat.md", 1, 12)
GODS = chunk("World: GODS", "world/GODS.md", 2, 8)
S7 = chunk("Session 7", "sessions/Session 7.md", 1, 30)  # a headline only

CONTEXT = Context(fragments=(S1, S1_PART_2, S2, S3, KAT, GODS), headlines=(Headline(S7, "Kat duels the reeve."),))


def cite(c: Chunk) -> Citation:
    return Citation(c.label, c.path, c.start_line, c.end_line)


def test_a_citation_of_a_context_label_is_kept_and_listed():
    answer = "Kat bought a compass in the market [Session 1]."
    assert Verified(answer, (cite(S1),), (), 0) == verify(answer, CONTEXT)
    assert {"label": "Session 1", "path": "sessions/log.md", "lines": [3, 5]} == cite(S1).to_json()


def test_each_label_is_listed_once_in_order_of_first_citation():
    answer = "Kat duelled the reeve [Sheet: Kat]. She won [Session 2]. The reeve fled the town [Sheet: Kat]."
    result = verify(answer, CONTEXT)
    assert answer == result.text
    assert (cite(KAT), cite(S2)) == result.citations
    assert ((), 0) == (result.unknown, result.uncited_sentences)


@pytest.mark.parametrize(
    "written",
    ["[session 3]", "[SESSION 3]", "[session  3]", "[ Session 3 ]", "[Session\t3]", "[sEsSiOn 3 ]"],
)
def test_case_and_space_variants_are_normalised_to_the_exact_label(written):
    result = verify(f"The bridge fell into the river {written}.", CONTEXT)
    assert "The bridge fell into the river [Session 3]." == result.text
    assert ((cite(S3),), (), 0) == (result.citations, result.unknown, result.uncited_sentences)


@pytest.mark.parametrize(
    "written, shown",
    [
        ("[Session 1; Session 2]", "[Session 1; Session 2]"),
        ("[Session 1, Session 2]", "[Session 1; Session 2]"),
        ("[session 1 ;  SESSION 2]", "[Session 1; Session 2]"),
        ("[Session 1, Sheet: Kat]", "[Session 1; Sheet: Kat]"),
        ("[Session 1; Sheet: Kat; World: GODS]", "[Session 1; Sheet: Kat; World: GODS]"),
    ],
)
def test_several_labels_in_one_bracket(written, shown):
    result = verify(f"Kat and the monk met twice {written}.", CONTEXT)
    assert f"Kat and the monk met twice {shown}." == result.text
    labels = [label.strip() for label in shown[1:-1].split(";")]
    assert labels == [c.label for c in result.citations]
    assert ((), 0) == (result.unknown, result.uncited_sentences)


def test_a_label_in_several_parts_cites_its_first_part():
    [citation] = verify("The monk sold a compass [Session 1].", CONTEXT).citations
    assert cite(S1) == citation


@pytest.mark.parametrize(
    "invented",
    ["Session 999", "session 12", "Sheet: Nobody", "World: Atlantis", "Note: plans", "Sesión 4", "sesion 4"],
)
def test_an_unknown_label_shaped_citation_is_removed_and_counted(invented):
    result = verify(f"The dragon woke under the mountain [Session 1]. It ate the reeve [{invented}].", CONTEXT)
    assert "The dragon woke under the mountain [Session 1]. It ate the reeve." == result.text
    assert ((cite(S1),), (invented,), 1) == (result.citations, result.unknown, result.uncited_sentences)


def test_an_unknown_label_beside_a_known_one_is_dropped_from_the_bracket():
    result = verify("Kat won the duel at noon [Session 2; Session 999, Sheet: Kat].", CONTEXT)
    assert "Kat won the duel at noon [Session 2; Sheet: Kat]." == result.text
    assert ((cite(S2), cite(KAT)), ("Session 999",)) == (result.citations, result.unknown)


def test_only_invented_citations_leave_no_citation():
    result = verify("Kat slew the dragon [Session 40]. The town cheered for days [Session 41; Session 42].", CONTEXT)
    assert "Kat slew the dragon. The town cheered for days." == result.text
    assert ((), ("Session 40", "Session 41", "Session 42"), 2) == (
        result.citations, result.unknown, result.uncited_sentences)


@pytest.mark.parametrize(
    "text",
    [
        "The reeve wrote that he was 'very sorry' [sic].",
        "Kat says nothing [shares a photo] and leaves the table.",
        "See [the map](http://example.com/map.png) for the route.",
        "See [Session 1 notes](https://example.com/s1) for the route.",
        "The footnote [1] and the aside [Note] stay.",
        "Sessions were long [sessions are long] that winter.",
    ],
)
def test_brackets_that_are_not_citations_are_left_alone(text):
    result = verify(text, CONTEXT)
    assert (text, (), ()) == (result.text, result.citations, result.unknown)


def test_uncited_sentences_are_counted():
    answer = (
        "Kat bought a compass in the market [Session 1]. "
        "The monk warned her about the ford. "
        "Yes. "  # too short to be a claim
        "Vale ambushed them at the ford [Session 2]!\n"
        "Nobody knows where the bell rang"
    )
    result = verify(answer, CONTEXT)
    assert answer.strip() == result.text
    assert 2 == result.uncited_sentences
    assert (cite(S1), cite(S2)) == result.citations


def test_a_headline_label_is_citable():
    result = verify("Kat duelled the reeve, says the headline [Session 7].", CONTEXT)
    assert "Kat duelled the reeve, says the headline [Session 7]." == result.text
    assert ((Citation("Session 7", "sessions/Session 7.md", 1, 30),), ()) == (result.citations, result.unknown)


def test_an_answer_without_brackets_is_unchanged():
    answer = "The notes do not say who rang the bell."
    assert Verified(answer, (), (), 1) == verify(answer, CONTEXT)


def test_an_empty_context_turns_every_label_into_an_invented_one():
    result = verify("Kat won [Session 1]. The [sic] stays.", Context((), ()))
    assert ("Kat won. The [sic] stays.", (), ("Session 1",)) == (result.text, result.citations, result.unknown)


def test_a_label_with_a_comma_can_share_a_bracket():
    bold = chunk("Sheet: Kat, the Bold", "sheets/Kat, the Bold.md", 1, 9)
    context = Context((S1, bold), ())
    alone = verify("Kat carried the banner [Sheet: Kat, the Bold].", context)
    assert ((Citation(bold.label, bold.path, 1, 9),), ()) == (alone.citations, alone.unknown)  # this part holds
    shared = verify("Kat carried the banner [Session 1; Sheet: Kat, the Bold].", context)
    assert "Kat carried the banner [Session 1; Sheet: Kat, the Bold]." == shared.text
    assert ((cite(S1), Citation(bold.label, bold.path, 1, 9)), ()) == (shared.citations, shared.unknown)


def test_a_citation_after_the_full_stop_cites_its_sentence():
    result = verify("Kat won the duel at noon. [Session 2] Vale fled the town that night. [Session 1]", CONTEXT)
    assert (cite(S2), cite(S1)) == result.citations  # this part holds
    assert 0 == result.uncited_sentences


def test_text_without_invented_citations_is_not_rewritten():
    answer = "Kat est une duelliste : elle gagne toujours [Session 2] ! Le score était de 3 : 1."
    result = verify(answer, CONTEXT)
    assert ((cite(S2),), ()) == (result.citations, result.unknown)  # this part holds
    assert answer == result.text
