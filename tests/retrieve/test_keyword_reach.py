"""The keyword path's two best are among the first five passages, whatever fusion made of them: a note
that alone holds the question's rare word is read, even when many notes that the other paths find too
tell of the same person and place (fusion alone puts it last here)."""
from __future__ import annotations

from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from oracle.retrieve.pipeline import KEYWORD_BEST, KEYWORD_REACH
from tests.conftest import write_notes

HARBOUR = {
    "People/Orrin.md": "# Orrin\nOrrin is the harbourmaster of Greyhaven. He hides keys about the harbour.\n",
    **{
        f"Sessions/Session {n}.md": (
            f"# Session {n}\n[[Orrin]] the harbourmaster met us at the harbour again. [[Orrin]] hid the key "
            f"of the customs house somewhere at the harbour, and would not say where he hid the key. Day {n}.\n"
        )
        for n in range(1, 9)
    },
    "Sessions/Session 9.md": (
        "# Session 9\nA long road inland through the marsh villages. The mule went lame; the rain never "
        "stopped. At the last inn an old woman sold us a verdigris trinket. We slept in the stable, and "
        "in the morning the ferryman took us across the river for two coppers and a song.\n"
    ),
}
QUESTION = "Where did Orrin hide the verdigris key at the harbour?"


async def test_the_note_that_alone_holds_a_rare_word_is_among_the_first_five(tmp_path, make_settings, open_index):
    index = open_index(make_settings(write_notes(tmp_path / "notes", HARBOUR), data_dir=tmp_path / "data"))
    await ingest(index)
    retrieval = await Oracle(index).search(QUESTION)

    keyword = [h.chunk.label for h in retrieval.paths["keyword"]]
    fused = [h.chunk.label for h in retrieval.fused]
    assert "Session 9" in keyword[:KEYWORD_BEST]  # "verdigris" is in no other note
    assert {"semantic", "entity"} & {name for name, hits in retrieval.paths.items()
                                     if any(h.chunk.label == "Session 9" for h in hits[:3])} == set()
    assert set(keyword[:KEYWORD_BEST]) <= set(fused[:KEYWORD_REACH]), fused
    assert [h.rank for h in retrieval.fused] == list(range(1, len(fused) + 1))
