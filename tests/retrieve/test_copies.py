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


def test_a_recap_that_matched_better_than_the_session_it_retells_brings_the_session_up_before_it():
    recap, rest = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    (source,) = chunk_note(_session(22, "## Notes\nThe party bargained with Captain Paij."))
    (other,) = chunk_note(_session(9, "## Notes\nA storm at sea."))
    ordered = sources_first(_hits(recap, other, source, rest))
    assert [source, recap, other, rest] == [h.chunk for h in ordered]
    assert [1, 2, 3, 4] == [h.rank for h in ordered]


def test_a_recap_that_tells_what_its_source_does_not_stays_near_the_top():
    # A source far below its recap (its notes were the plan, the recap tells what happened): the
    # recap keeps second place, not the place after the source.
    recap, rest = chunk_note(_session(32, f"{RECAP}\n\n{NOTES}"))
    (source,) = chunk_note(_session(31, "## Notes\nThe dragon turtle guards its hoard."))
    others = [chunk_note(_session(n, f"## Notes\nA storm at sea, day {n}."))[0] for n in range(1, 9)]
    ordered = sources_first(_hits(recap, *others, source, rest))
    assert [source, recap, *others, rest] == [h.chunk for h in ordered]
    assert list(range(1, 12)) == [h.rank for h in ordered]


def test_a_recap_that_matched_worse_than_the_session_it_retells_goes_after_everything():
    recap, rest = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    (source,) = chunk_note(_session(22, "## Notes\nThe party bargained with Captain Paij."))
    (other,) = chunk_note(_session(9, "## Notes\nA storm at sea."))
    ordered = sources_first(_hits(source, recap, rest, other))
    assert [source, rest, other, recap] == [h.chunk for h in ordered]
    assert [1, 2, 3, 4] == [h.rank for h in ordered]


def test_recaps_of_one_session_keep_their_order_after_it():
    first, _ = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    second, _ = chunk_note(_session(23, f"{RECAP} They sailed at dawn.\n\n{NOTES}"))
    (source,) = chunk_note(_session(22, "## Notes\nThe party bargained with Captain Paij."))
    (other,) = chunk_note(_session(9, "## Notes\nA storm at sea."))
    ordered = sources_first(_hits(second, first, other, source))
    assert [source, second, first, other] == [h.chunk for h in ordered]


def test_a_recap_whose_source_is_not_listed_keeps_its_place():
    recap, rest = chunk_note(_session(23, f"{RECAP}\n\n{NOTES}"))
    (other,) = chunk_note(_session(9, "## Notes\nA storm at sea."))
    hits = _hits(recap, other, rest)
    assert hits == sources_first(hits)


RECAPPED = {
    "Session Notes/Session 22 - The Arena.md": (
        "# The Arena\n## Notes\n- The party reached Darktow at dusk and took rooms above the tavern.\n"
        "- In the arena Tato fought Captain Paij; after three rounds Tato won and took her cutlass.\n"
        "- Ember found the temple of Ioun empty and its lamps cold.\n"
    ),
    "Session Notes/Session 23 - The Harbour.md": (
        "# The Harbour\n## Recap\n- Tato won the arena bout against Captain Paij and took her cutlass.\n"
        "## Notes\n- At the harbour the party bought passage on the Lucky Gull to Port Zoon.\n"
    ),
    "Session Notes/Session 09 - A Storm.md": "# A Storm\n## Notes\n- A storm at sea broke the mast.\n",
}


async def test_through_the_search_a_recap_follows_the_session_it_retells(tmp_path, make_settings, open_index):
    from oracle.index.ingest import ingest
    from oracle.oracle import Oracle
    from tests.conftest import write_notes

    index = open_index(make_settings(write_notes(tmp_path / "notes", RECAPPED), data_dir=tmp_path / "data"))
    await ingest(index)
    fused = (await Oracle(index).search("Who won the arena bout against Captain Paij?")).fused
    places = [(h.chunk.label, is_copy(h.chunk)) for h in fused]
    source = places.index(("Session 22 - The Arena", False))
    assert places[source + 1] == ("Session 23 - The Harbour", True), places
