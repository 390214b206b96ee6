"""`pack_context` (k fragments, then headlines) and the prompt that renders it. Pure: hand-built chunks."""
from __future__ import annotations

import pytest

from oracle.answer.context import Context, Headline, pack_context
from oracle.answer.prompt import SYSTEM, Turn, build_answer_prompt, render_context
from oracle.types import Chunk


def chunk(n: int, label: str | None = None, part: int = 1, parts: int = 1) -> Chunk:
    label = label or f"Session {n}"
    return Chunk(
        id=f"c{n}",
        path=f"sessions/{label}.md",
        label=label,
        kind="session",
        part=part,
        parts=parts,
        heading=label,
        start_line=n,
        end_line=n + 2,
        text=f"Text of chunk {n}.",
        text_hash=f"h{n}",
    )


def ids(chunks) -> list[str]:
    return [c.id for c in chunks]


def notes_for(chunks) -> dict[str, str]:
    return {c.id: f"note {c.id}" for c in chunks}


def test_the_first_k_are_the_fragments_in_order():
    ranked = [chunk(n) for n in (5, 3, 9, 1, 2, 8, 7, 4, 6, 10)]
    context = pack_context(ranked, notes_for(ranked))
    assert ["c5", "c3", "c9", "c1", "c2", "c8", "c7", "c4"] == ids(context.fragments)
    assert [("c6", "note c6"), ("c10", "note c10")] == [(s.chunk.id, s.text) for s in context.headlines]


def test_fewer_chunks_than_k_are_all_fragments():
    ranked = [chunk(n) for n in range(1, 4)]
    assert Context(tuple(ranked), ()) == pack_context(ranked, notes_for(ranked))
    assert Context((), ()) == pack_context([], {})


def test_fragments_do_not_need_annotations():
    ranked = [chunk(n) for n in range(1, 12)]
    context = pack_context(ranked, {})
    assert ids(ranked[:8]) == ids(context.fragments)
    assert () == context.headlines


def test_summaries_only_for_chunks_with_annotations():
    ranked = [chunk(n) for n in range(1, 15)]
    annotations = {"c9": "nine", "c11": "eleven", "c14": "fourteen", "c3": "three (a fragment)", "c12": ""}
    context = pack_context(ranked, annotations)
    assert [("c9", "nine"), ("c11", "eleven"), ("c14", "fourteen")] == [(s.chunk.id, s.text) for s in context.headlines]


def test_one_summary_per_label_and_none_for_a_label_in_full():
    ranked = [chunk(n) for n in range(1, 9)] + [
        chunk(9, "Session 2", part=2, parts=2),  # Session 2 is in full already
        chunk(10, "Session 20", part=1, parts=3),
        chunk(11, "Session 20", part=2, parts=3),
        chunk(12, "Session 21"),
        chunk(13, "Session 20", part=3, parts=3),
        chunk(14, "Session 21"),
    ]
    context = pack_context(ranked, notes_for(ranked))
    assert [("c10", "Session 20"), ("c12", "Session 21")] == [(s.chunk.id, s.chunk.label) for s in context.headlines]


def test_a_chunk_without_annotation_leaves_its_label_to_a_later_part():
    ranked = [chunk(n) for n in range(1, 9)] + [
        chunk(10, "Session 20", part=1, parts=2),
        chunk(11, "Session 20", part=2, parts=2),
    ]
    context = pack_context(ranked, {"c11": "the second part"})
    assert [("c11", "the second part")] == [(s.chunk.id, s.text) for s in context.headlines]


def test_at_most_max_summaries_in_order():
    ranked = [chunk(n) for n in range(1, 41)]
    context = pack_context(ranked, notes_for(ranked))
    assert ids(ranked[:8]) == ids(context.fragments)
    assert ids(ranked[8:24]) == [s.chunk.id for s in context.headlines]
    assert 16 == len(context.headlines)


@pytest.mark.parametrize("k, max_summaries", [(1, 0), (3, 2), (8, 16), (5, 40)])
def test_k_and_max_summaries(k, max_summaries):
    ranked = [chunk(n) for n in range(1, 31)]
    context = pack_context(ranked, notes_for(ranked), k=k, max_headlines=max_summaries)
    assert ids(ranked[:k]) == ids(context.fragments)
    assert ids(ranked[k : k + max_summaries]) == [s.chunk.id for s in context.headlines]


def test_labels_and_chunk_for():
    ranked = [chunk(n) for n in range(1, 9)] + [chunk(9, "Session 1", part=2, parts=2), chunk(10)]
    context = pack_context(ranked, notes_for(ranked))
    assert {f"Session {n}" for n in range(1, 9)} | {"Session 10"} == context.labels
    assert "c1" == context.chunk_for("Session 1").id  # the fragment, not a later part
    assert "c10" == context.chunk_for("Session 10").id  # a headline's chunk
    assert context.chunk_for("Session 99") is None


# ---------------------------------------------------------------------------------------------
# The prompt around the packed context


def test_render_context_marks_parts_and_headlines():
    fragments = (chunk(1), chunk(2, "Session 20", part=2, parts=3))
    context = Context(fragments, (Headline(chunk(3), "A headline."),))
    assert (
        "NOTES IN FULL (cite by label):\n\n---\n\n"
        "[Session 1] (sessions/Session 1.md, lines 1–3)\nText of chunk 1.\n\n---\n\n"
        "[Session 20] (sessions/Session 20.md, lines 2–4, part 2 of 3)\nText of chunk 2.\n\n---\n\n"
        "HEADLINES ONLY (other notes, not shown in full):\n[Session 3] A headline."
    ) == render_context(context)
    assert "HEADLINES" not in render_context(Context(fragments, ()))


def test_the_prompt_is_system_history_then_context_and_question():
    context = Context((chunk(1),), ())
    history = [Turn("user", "Who is Kat?"), Turn("assistant", "A duellist [Session 1]."), Turn("user", " ")]
    messages = build_answer_prompt("and then?", context, history)
    assert [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Who is Kat?"},
        {"role": "assistant", "content": "A duellist [Session 1]."},
        {"role": "user", "content": f"{render_context(context)}\n\n---\n\nQuestion: and then?"},
    ] == messages
    assert not any(ch.isdigit() for ch in SYSTEM)  # no example label to copy
