"""A session's recap of the one before does not crowd out the session it retells."""
from oracle.notes.chunking import chunk_note
from oracle.retrieve.copies import is_copy, sources_first
from oracle.retrieve.retrieval import Hit
from oracle.types import Note

RECAP = "## Recap\nLast time the party bargained with Captain Paij for passage to Darktow."
NOTES = "## Notes\nTato won the arena bout; Ember found the temple of Ioun empty."


def _session(number: int, text: str) -> Note:
    stem = f"Session {number:02d} - Title"
    return Note(path=f"Session Notes/{stem}.md", kind="note", stem=stem, title=stem, text=text, sessions=(number,))


def test_a_recap_is_a_part_of_its_own():
    chunks = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    assert [(1, "Recap", True), (2, "Notes", False)] == [
        (c.part, c.heading.rsplit(" > ", 1)[-1], is_copy(c)) for c in chunks]
    assert {"Session 23 - Title"} == {c.label for c in chunks}


def test_a_recap_heading_outside_a_session_is_prose():
    note = Note(path="Recaps.md", kind="note", stem="Recaps", title="Recaps", text=f"{RECAP}\n\n{NOTES}")
    chunks = chunk_note(note)
    assert 1 == len(chunks) and not is_copy(chunks[0])


def _hits(*chunks):
    return [Hit(c, rank, 1.0 / rank) for rank, c in enumerate(chunks, 1)]


def test_a_recap_goes_after_everything_when_the_session_it_retells_is_listed():
    recap, rest = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    (source,) = chunk_note(_session(22, "## Notes\nThe party bargained with Captain Paij."))
    (other,) = chunk_note(_session(9, "## Notes\nA storm at sea."))
    ordered = sources_first(_hits(recap, source, rest, other))
    assert [source, rest, other, recap] == [h.chunk for h in ordered]
    assert [1, 2, 3, 4] == [h.rank for h in ordered]


def test_a_recap_whose_source_is_not_listed_keeps_its_place():
    recap, rest = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    (other,) = chunk_note(_session(9, "## Notes\nA storm at sea."))
    hits = _hits(recap, other, rest)
    assert hits == sources_first(hits)
