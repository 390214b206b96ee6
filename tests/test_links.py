"""References between notes, and the hop retrieval takes along them from the fused top k."""
from __future__ import annotations

import pytest

from oracle.links import chunk_refs, own_keys, references

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
    assert own_keys("Session 22", "sessions/022 - Lanternfall.md") == {"session:22", "note:022 - lanternfall"}
    assert own_keys("Sheet: Idris_Vantowe", "sheets/Idris_Vantowe.md") == {"note:idris_vantowe"}
    # what refers to the note by its name finds it, whatever the case or accents
    assert references("", ["idris_vantowe"]) <= own_keys("Sheet: Idris_Vantowe", "sheets/Idris_Vantowe.md")
    assert references("", ["Éowyn"]) == own_keys("Sheet: Eowyn", "sheets/Eowyn.md")


def test_a_chunk_does_not_refer_to_itself():
    rows = chunk_refs([("c1", "Session 2", "log.md", "## Session 2\nAs in session 1, and session 2 again.", ())])
    assert rows == [("c1", "name", "note:log"), ("c1", "name", "session:2"), ("c1", "to", "session:1")]
