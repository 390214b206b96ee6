"""Bad input never stops an ingest and never loses a good note; each problem is reported by path."""
from __future__ import annotations

import os
import sqlite3

from oracle.index.ingest import ingest
from oracle.index.scan import chunk_all, scan_notes
from tests.conftest import write_notes

GOOD = "## Session 1 — Fine\nThe party met Mirela at the Lantern Market.\n"


def labels_by_path(settings):
    with sqlite3.connect(settings.sqlite_path) as db:
        return {r[0]: r[1] for r in db.execute("SELECT path, group_concat(DISTINCT label) FROM chunks GROUP BY path")}


def sessions_by_path(settings):
    with sqlite3.connect(settings.sqlite_path) as db:
        return {r[0]: r[1] for r in db.execute("SELECT path, group_concat(DISTINCT sessions) FROM chunks GROUP BY path")}


async def test_bad_notes_are_reported_and_good_ones_kept(tmp_path, make_settings, open_quick_index):
    outside = tmp_path / "outside.md"
    outside.write_text("## Session 99\nSECRET-OUTSIDE must never be read")
    notes = write_notes(tmp_path / "notes", {
        "good.md": GOOD,
        "empty.md": "",
        "blank.md": "  \n\t\n",
        "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "latin1.md": "## Session 2\nCaf\u00e9 with the ma\u00eetre d'.".encode("cp1252"),
        "bom-crlf.md": b"\xef\xbb\xbf## Session 3\r\nLine one\r\nLine two\r\n",
        "broken-frontmatter.md": "---\naliases: [unclosed\n---\n## Session 4\nStill here.",
        "headings.md": "\n".join(f"## Heading {i}" for i in range(500)),
        "fts.md": '## Session 5\nThe "half-elf" said: NEAR(a b) OR "x" AND NOT y* -- {col}: ^start; Vex\'s "quote',
        "longline.md": "## Session 6\n" + "x" * 50_000,
        "wikilink-out.md": "## Session 7\nSee [[../../../etc/passwd]] and [[/root/.ssh/id_rsa|keys]].",
        "notes.txt": "not markdown",
        "image.png": b"\x89PNG",
        ".obsidian/workspace.md": "## Session 8\nhidden folder",
        ".hidden.md": "## Session 9\nhidden file",
    })
    os.symlink(outside, notes / "link-out.md")
    settings = make_settings(notes)
    report = await ingest(open_quick_index(settings))

    assert {
        "binary.md": "binary file (NUL bytes), not a Markdown note",
        "blank.md": "empty note",
        "empty.md": "empty note",
        "link-out.md": "link points outside the notes folder (not followed)",
    } == {s.path: s.reason for s in report.skipped}
    warnings = {w.path: w.reason for w in report.warnings}
    assert warnings["latin1.md"].startswith("not UTF-8")
    assert warnings["broken-frontmatter.md"].startswith("broken frontmatter ignored")
    # Each note opens with its one session header: a session note, cited by its own name.
    assert {
        "good.md": "good",
        "latin1.md": "latin1",
        "bom-crlf.md": "bom-crlf",
        "broken-frontmatter.md": "broken-frontmatter",
        "headings.md": "Note: headings",
        "fts.md": "fts",
        "longline.md": "longline",
        "wikilink-out.md": "wikilink-out",
    } == labels_by_path(settings)
    assert {
        "good.md": "[1]",
        "latin1.md": "[2]",
        "bom-crlf.md": "[3]",
        "broken-frontmatter.md": "[4]",
        "headings.md": "[]",
        "fts.md": "[5]",
        "longline.md": "[6]",
        "wikilink-out.md": "[7]",
    } == sessions_by_path(settings)
    with sqlite3.connect(settings.sqlite_path) as db:
        texts = " ".join(r[0] for r in db.execute("SELECT text FROM chunks"))
        assert "Café with the maître d'." in texts
        assert "SECRET-OUTSIDE" not in texts and "hidden" not in texts
        assert [("Line one\nLine two", 1, 3)] == [
            (t.split("\n", 1)[1], a, b)
            for t, a, b in db.execute("SELECT text, start_line, end_line FROM chunks WHERE path = 'bom-crlf.md'")]

    # Fixing a skipped note brings it in; it is no longer reported.
    (notes / "empty.md").write_text("## Session 10\nNow written.")
    again = await ingest(open_quick_index(settings))
    assert ["empty.md"] == again.changed
    assert "empty.md" not in {s.path for s in again.skipped}
    assert ("empty", "[10]") == (labels_by_path(settings)["empty.md"], sessions_by_path(settings)["empty.md"])


def test_a_five_megabyte_log_with_hundreds_of_sessions(tmp_path, make_settings):
    """Parsing and chunking only: embedding 5 MB belongs in bench/, not in every test run."""
    session = "The party argued about the toll on the Weeping Bridge. " * 160  # ~1,440 words
    log = "\n".join(f"## Session {n} — Day {n}\n### Morning\n{session}\n### Night\n{session}" for n in range(1, 301))
    notes = write_notes(tmp_path / "notes", {"big-log.md": log})
    assert os.path.getsize(notes / "big-log.md") > 5_000_000
    settings = make_settings(notes)
    scan = scan_notes(settings, {}, full=True)
    chunks = chunk_all(scan, settings)["big-log.md"]
    assert [] == scan.skipped
    # A hub: each session is a section of the log, with its number as metadata.
    assert {(f"big-log › Session {n}", (n,)) for n in range(1, 301)} == {(c.label, c.sessions) for c in chunks}
    assert max(c.words for c in chunks) <= 1200
    assert 2 * 300 <= len(chunks)
