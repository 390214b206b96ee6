"""References between notes, and the hop retrieval takes along them from the fused top k."""
from __future__ import annotations

import sqlite3

import pytest

from oracle.index.ingest import ingest
from oracle.notes.refs import chunk_refs, own_keys, references
from oracle.oracle import Oracle
from oracle.retrieve.linked import linked_path
from oracle.types import PUBLIC, Clearance
from tests.conftest import write_notes

# ---------------------------------------------------------------------------------------------
# what a chunk refers to, and what it is called


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("Pell had a theory since Lanternfall (session 22).", {"session:22"}),
        ("the ransom note from Session 14, and the ledger", {"session:14"}),
        ("Found the temple under Bellholm (sessions 25 and 27).", {"session:25", "session:27"}),
        ("sessions 3, 4 & 6", {"session:3", "session:4", "session:6"}),
        ("recap of sessions 12–14", {"session:12", "session:13", "session:14"}),
        ("desde la sesión 3 y la sesión 5", {"session:3", "session:5"}),
        ("as in sesiones 7 y 9", {"session:7", "session:9"}),
        ("session #8 went long", {"session:8"}),
        # a singular mention starts no list; a span of time is not a list of sessions
        ("In session 3, 4 goblins attacked.", {"session:3"}),
        ("over sessions 1-400 nothing changed", {"session:1", "session:400"}),
        # not references
        ("a long session of shopping", set()),
        ("the session zero talk", set()),
        ("possession 4 of the estate", set()),
    ],
)
def test_session_mentions_in_running_text(text, keys):
    assert references(text) == keys


def test_the_session_column_of_a_table_refers_to_those_sessions():
    ledger = """
## Party treasury
| Session | Source | Amount |
| --- | --- | --- |
| 1 | Wedding guard fee | 300 cr |
| 7 | Bog Lamb bounty | 0 cr |
| **12** | Brinehall job | — |

| Day | Weather |
|:---:|---|
| 3 | rain |
"""
    assert references(ledger) == {"session:1", "session:7", "session:12"}
    assert references("| Sesión | Botín |\n|---|---|\n| 4 | espada |") == {"session:4"}
    assert references("| Item | Owner |\n| --- | --- |\n| 4 | Vex |") == set()


def test_wikilinks_refer_to_notes_or_sessions():
    assert references("Idris", ["Idris_Vantowe"]) == {"note:idris_vantowe"}
    assert references("", ["Session 12", "012 - The Fall", "Brother Aldous"]) == {
        "session:12", "note:brother aldous"
    }


def test_a_chunk_is_known_by_its_note_and_its_session():
    assert own_keys((22,), "sessions/022 - Lanternfall.md") == {"session:22", "note:022 - lanternfall"}
    assert own_keys((), "sheets/Idris_Vantowe.md") == {"note:idris_vantowe"}
    # what refers to the note by its name finds it, whatever the case or accents
    assert references("", ["idris_vantowe"]) <= own_keys((), "sheets/Idris_Vantowe.md")
    assert references("", ["Éowyn"]) == own_keys((), "sheets/Eowyn.md")


def test_a_chunk_does_not_refer_to_itself():
    rows = chunk_refs([("c1", (2,), "log.md", "## Session 2\nAs in session 1, and session 2 again.", ())])
    assert rows == [("c1", "name", "note:log"), ("c1", "name", "session:2"), ("c1", "to", "session:1")]


# ---------------------------------------------------------------------------------------------
# the hop, over a real index

LINKED_CAMPAIGN = {
    "sessions/Session 1.md": "The party found a ransom note pinned to the chapel door: the Stag sleeps.\n",
    "sessions/Session 2.md": "Pell matched the wax on the ransom note from session 1 to a seal of the [[Tithe]].\n",
    "sessions/Session 3.md": "A quiet day of shopping in Corvanne.\n",
    "sessions/Session 4.md": "Recap at the inn of sessions 2 and 3.\n",
    "sheets/Pell.md": "# Pell\n- Matched the seal in session 2.\n",
    "Loot Ledger.md": "| Session | Source |\n| --- | --- |\n| 3 | a shop refund |\n",
    "index.md": "[[Session 1]] [[Session 2]] [[Session 3]] [[Session 4]] [[Pell]]\n",
    "gm/Secrets.md": "The Tithe took the archduke; the party learns it in session 2.\n",
    "world/Tithe.md": "---\nvisibility: gm\n---\nThe Grey Tithe, bankers of Corvanne.\n",
}


async def _linked_index(tmp_path, make_settings, open_index, **overrides):
    settings = make_settings(write_notes(tmp_path / "linked", LINKED_CAMPAIGN), **overrides)
    index = open_index(settings)
    await ingest(index)
    with sqlite3.connect(settings.sqlite_path) as db:
        ids = {label: cid for cid, label in db.execute("SELECT id, label FROM chunks")}
    return index, ids


async def _labels(index, ids, seeds, gm=False, limit=8, candidates=()):
    by_id = {cid: label for label, cid in ids.items()}
    async with index.snapshot() as store:
        found = await linked_path(store, [ids[s] for s in seeds], Clearance.of(gm), limit, candidates)
    return [by_id[cid] for cid, _ in found]


async def test_the_hop_follows_references_both_ways(tmp_path, make_settings, open_index):
    index, ids = await _linked_index(tmp_path, make_settings, open_index)
    player = await _labels(index, ids, ["Session 2"])
    # forward: Session 2 names session 1; backward: Pell's sheet, the recap and the index name session 2
    assert set(player) == {"Session 1", "Sheet: Pell", "Session 4", "Note: index"}
    # a specific tie beats a note that names everything (five references: each counts 1/√5)
    assert player[0] == "Sheet: Pell" and player[-1] == "Note: index"
    # a table's Session column is a reference too
    assert set(await _labels(index, ids, ["Session 3"])) == {"Note: Loot Ledger", "Session 4", "Note: index"}


async def test_the_hop_never_reaches_game_master_notes_for_a_player(tmp_path, make_settings, open_index):
    index, ids = await _linked_index(tmp_path, make_settings, open_index)
    gm_labels = {label for label in ids if label.endswith(("Secrets", "Tithe"))}
    assert len(gm_labels) == 2
    assert not gm_labels & set(await _labels(index, ids, ["Session 2"]))
    # the game master follows the link to the GM-only note and the GM note's mention back
    assert gm_labels <= set(await _labels(index, ids, ["Session 2"], gm=True))


async def test_the_hop_adds_only_new_labels_and_at_most_limit(tmp_path, make_settings, open_index):
    index, ids = await _linked_index(tmp_path, make_settings, open_index)
    assert await _labels(index, ids, ["Session 2"], limit=1) == ["Sheet: Pell"]
    assert "Sheet: Pell" not in await _labels(index, ids, ["Session 2"], candidates={"Sheet: Pell"})
    assert await _labels(index, ids, ["Session 2"], limit=0) == []
    # seeds are never linked to each other: they are candidates already
    assert "Session 1" not in await _labels(index, ids, ["Session 2", "Session 1"])


async def test_search_puts_linked_notes_after_the_fused_pool(tmp_path, make_settings, open_index):
    # A pool of 2 leaves most notes out, so that the hop has something to add.
    index, ids = await _linked_index(tmp_path, make_settings, open_index, fused_pool=2)
    oracle = Oracle(index)
    retrieval = await oracle.search("Whose seal was on the wax of the ransom note?", k=1)
    fused = [h.chunk.label for h in retrieval.fused]
    linked = [h.chunk.label for h in retrieval.linked]
    assert len(fused) == 2 and linked
    assert not set(fused) & set(linked)
    assert all(h.chunk.visibility == PUBLIC for h in retrieval.linked)
    assert [h.rank for h in retrieval.linked] == list(range(1, len(linked) + 1))
    assert retrieval.to_json()["linked"][0]["label"] == linked[0]
    selection = await oracle.select(retrieval, k=1)  # no Ollama: the reranker keeps the pool's order
    assert [c.label for c in selection.final] == fused + linked

    off = await Oracle(open_index(index.settings.model_copy(update={"linked": 0}))).search(
        "Whose seal was on the wax of the ransom note?", k=1
    )
    assert off.linked == [] and [h.chunk.label for h in off.fused] == fused


def test_a_link_to_a_session_heading_refers_to_that_session():
    from oracle.notes.parse import render_wikilinks

    text, links = render_wikilinks("as [[Campaign Notes#Session 12 - The Fall|then]] and [[Thinora#Secrets]]")
    assert "as then and Thinora > Secrets" == text
    assert {"session:12", "note:thinora"} == references(text, [link.target for link in links])
