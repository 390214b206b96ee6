"""The session header detector: every style, accents, and passing mentions that are not headers."""
import pytest

from oracle.notes.sessions import Header, match_header, split_sessions
from oracle.types import Note


@pytest.mark.parametrize(
    "line, expected",
    [
        ("## Session 12 — The Fall", Header(12, "Session 12 — The Fall", 2)),
        ("# Session 1", Header(1, "Session 1", 1)),
        ("###### Session 40: Endgame", Header(40, "Session 40: Endgame", 6)),
        ("**Session 7**", Header(7, "Session 7", 0)),
        ("**Session 7 — Ashes**", Header(7, "Session 7 — Ashes", 0)),
        ("__Session 8__", Header(8, "Session 8", 0)),
        ("# Sesión 3 — El puente", Header(3, "Sesión 3 — El puente", 1)),
        ("## Sesion 3", Header(3, "Sesion 3", 2)),
        ("Session 4:", Header(4, "Session 4", 0)),
        ("Session 4: The Drowned Bell", Header(4, "Session 4: The Drowned Bell", 0)),
        ("SESSION 05", Header(5, "SESSION 05", 0)),
        ("## Session #9 - Return", Header(9, "Session #9 - Return", 2)),
        ("## **Session 10**", Header(10, "Session 10", 2)),
        ("  ## Session 11  ", Header(11, "Session 11", 2)),
    ],
)
def test_headers_of_every_style(line, expected):
    assert expected == match_header(line)


@pytest.mark.parametrize(
    "line",
    [
        "…back in session 5, the party met the monk.",
        "As in Session 11 the bell tolled.",
        "Session 5 was the one where everyone died.",
        "**Session 5** was great fun",
        "The session 12 recap is below.",
        "## Sessions and rules",
        "## Loot",
        "Session notes",
        "Session 4: " + "a very long sentence that keeps going " * 5,
        "",
    ],
)
def test_passing_mentions_are_not_headers(line):
    assert match_header(line) is None


def _note(text, path="log.md", kind="note", sessions=()):
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    return Note(path=path, kind=kind, stem=stem, title=stem, text=text, sessions=sessions)


def test_a_hub_is_cut_at_its_session_headers_into_its_own_sections():
    text = "# Log\nintro\n## Session 1 — A\none\n**Session 2**\ntwo\nmore\nSession 3:\nthree"
    spans = split_sessions(_note(text))
    assert [(s.label, s.start_line, s.end_line, s.kind, s.sessions) for s in spans] == [
        ("Note: log", 1, 2, "note", ()),
        ("log › Session 1", 3, 4, "session", (1,)),
        ("log › Session 2", 5, 7, "session", (2,)),
        ("log › Session 3", 8, 9, "session", (3,)),
    ]


def test_a_session_note_is_one_source_under_its_own_name():
    spans = split_sessions(_note("The party rested.\nThen left.", "sessions/012 - The Fall.md", "session", (12,)))
    assert [("012 - The Fall", 1, 2, (12,))] == [(s.label, s.start_line, s.end_line, s.sessions) for s in spans]
    # Its own header, or headers of the sessions its name records, do not cut it.
    text = "## Session 8\nfought\n## Session 9\nrested"
    spans = split_sessions(_note(text, "Session Notes/Session 8-9.md", sessions=(8, 9)))
    assert [("Session 8-9", 1, 4, (8, 9))] == [(s.label, s.start_line, s.end_line, s.sessions) for s in spans]


def test_a_note_titled_by_its_one_session_header_is_that_session():
    spans = split_sessions(_note("\n# Session 5 — Ashes\nwe ran", "The Ashes.md"))
    assert [("The Ashes", "session", (5,))] == [(s.label, s.kind, s.sessions) for s in spans]


def test_sheets_and_world_notes_are_never_split():
    text = "# Kat\n## Session 3\nlevelled up"
    assert ["Sheet: Kat"] == [s.label for s in split_sessions(_note(text, "sheets/Kat.md", "sheet"))]
    assert ["World: Kat"] == [s.label for s in split_sessions(_note(text, "world/Kat.md", "world"))]


def test_plain_note_without_sessions_keeps_its_name():
    assert ["Note: House Rules"] == [s.label for s in split_sessions(_note("Roll dice.", "House Rules.md"))]
