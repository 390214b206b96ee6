"""The session header detector: every style, accents, and passing mentions that are not headers."""
import pytest

from oracle.notes.sessions import Header, match_header, session_number_from_filename, split_sessions
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


@pytest.mark.parametrize(
    "stem, number",
    [("Session 12", 12), ("session_03", 3), ("012 - The Fall", 12), ("7. Ashes", 7), ("Sesión 4", 4)],
)
def test_session_number_from_filename(stem, number):
    assert number == session_number_from_filename(stem)


@pytest.mark.parametrize("stem", ["4983", "2024-05-01 recap", "Loot Ledger", "GODS"])
def test_names_without_a_session_number(stem):
    assert session_number_from_filename(stem) is None


def _note(text, path="log.md", kind="note"):
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    return Note(path=path, kind=kind, stem=stem, title=stem, text=text)


def test_split_covers_every_line_with_labels():
    text = "# Log\nintro\n## Session 1 — A\none\n**Session 2**\ntwo\nmore\nSession 3:\nthree"
    spans = split_sessions(_note(text))
    assert [(s.label, s.start_line, s.end_line) for s in spans] == [
        ("Note: log", 1, 2),
        ("Session 1", 3, 4),
        ("Session 2", 5, 7),
        ("Session 3", 8, 9),
    ]


def test_file_without_header_named_by_number_is_one_session():
    spans = split_sessions(_note("The party rested.\nThen left.", path="sessions/012 - The Fall.md", kind="session"))
    assert [("Session 12", 1, 2)] == [(s.label, s.start_line, s.end_line) for s in spans]


def test_sheets_and_world_notes_are_never_split():
    text = "# Kat\n## Session 3\nlevelled up"
    assert ["Sheet: Kat"] == [s.label for s in split_sessions(_note(text, "sheets/Kat.md", "sheet"))]
    assert ["World: Kat"] == [s.label for s in split_sessions(_note(text, "world/Kat.md", "world"))]


def test_plain_note_without_sessions_keeps_its_name():
    assert ["Note: House Rules"] == [s.label for s in split_sessions(_note("Roll dice.", "House Rules.md"))]
