"""Generated bad input: random bytes, random Markdown, random frontmatter through parsing and
chunking never raise anything but a NoteError, and a good note beside them is always found."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle.notes.chunking import chunk_note
from oracle.notes.parse import NoteError, parse_note
from oracle.notes.refs import chunk_refs
from oracle.settings import DEFAULT_FOLDER_KINDS
from oracle.types import GM

LINE = st.one_of(
    st.text(max_size=80),
    st.sampled_from([
        "## Session 3 — The Fall", "**Session 7**", "# Sesión 4", "Session 9:", "### Part II", "%%", "%% secret %%",
        "> [!secret] hidden", "> [!gm]", "> quoted", "---", "...", "[[Target|shown]]", "[[", "]]", "![[img.png]]",
        "aliases: [a, b", "visibility: gm", "gm: true", "```", "- list", "| a | b |", "\t", "\r", "\x00",
        "as in session 12", "sessions 3, 4 and 9-11", "| Session | Loot |", "| --- | --- |", "| 7 | gold |",
        "`%%`", "``a `%%` b``", "20%%", "\\%%", "~~~", "    indented %%", "> [!dm] x", "> [!Private]-", "lazy line",
        "- > [!gm] in a list", "visibility:gm", "title: a: b",
    ]),
)
MARKDOWN = st.lists(LINE, max_size=60).map("\n".join)
FRONTMATTER = st.one_of(
    st.just(""),
    st.dictionaries(
        st.sampled_from(["aliases", "alias", "tags", "visibility", "gm", "title", "name", "x"]),
        st.one_of(st.text(max_size=20), st.lists(st.text(max_size=10), max_size=4), st.integers(), st.booleans(), st.none()),
        max_size=5,
    ).map(lambda d: "---\n" + "\n".join(f"{k}: {v!r}" for k, v in d.items()) + "\n---\n"),
    st.text(max_size=60).map(lambda t: f"---\n{t}\n---\n"),
)
PATHS = st.sampled_from(["log.md", "sessions/012 - x.md", "sheets/Kat.md", "world/gm/v.md", "gm/p.md", "npcs/A_B.md"])


def _chunks_of(path: str, data: bytes):
    try:
        note = parse_note(path, data, DEFAULT_FOLDER_KINDS)
    except NoteError:
        return None
    return note, chunk_note(note, max_words=50, overlap=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2000), path=PATHS)
def test_random_bytes(data, path):
    _chunks_of(path, data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(front=FRONTMATTER, body=MARKDOWN, path=PATHS)
def test_random_markdown_and_frontmatter(front, body, path):
    result = _chunks_of(path, (front + body).encode("utf-8", "surrogatepass"))
    if result is None:
        return
    note, chunks = result
    refs = chunk_refs((c.id, c.sessions, c.path, c.text, c.links) for c in chunks)  # never raises either
    assert all(kind in ("name", "to") and key.startswith(("session:", "note:")) for _, kind, key in refs)
    lines = note.text.split("\n")
    for chunk in chunks:
        assert chunk.text.strip()
        assert 1 <= chunk.start_line <= chunk.end_line
        assert chunk.words <= 50
        if chunk.visibility != GM:  # a public chunk is exactly the lines it cites
            assert chunk.text in "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
            # a %% left in public text is in code, where Obsidian reads it literally
            assert "%%" not in chunk.text or _has_code(front + body) or note.visibility == GM


def _has_code(text: str) -> bool:
    return bool(re.search(r"`|~~~|^(?: {4}|\t)", text, re.M))


def _controls(text: str) -> int:
    return sum(1 for ch in text if ord(ch) < 32 and ch not in "\n\t\f")


# Many NULs, or more than 8 other control characters in a short file, make it binary (`notes.decode`).
@settings(max_examples=100, deadline=None)
@given(noise=MARKDOWN.filter(lambda text: "\x00" not in text and _controls(text) <= 8))
def test_a_good_session_survives_any_neighbour(noise):
    """Whatever precedes it in the same log, a well-formed session keeps its number and its text."""
    good = "## Session 41 — The Quiet Harbour\nMirela sold the brass compass to the harbourmaster."
    result = _chunks_of("log.md", f"{noise}\n\n{good}\n".encode("utf-8", "surrogatepass"))
    assert result is not None
    _, chunks = result
    texts = " ".join(c.text for c in chunks if 41 in c.sessions)
    if "%%" not in noise and "[!" not in noise:  # an open secret hides the rest
        assert "Mirela sold the brass compass to the harbourmaster." in texts
