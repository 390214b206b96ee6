"""Chunking by session: one chunk per session, heading packing over the cap, windows only when needed."""
from oracle.notes.chunking import chunk_note, pack, window_words
from oracle.types import GM, PUBLIC, Note, Secret


def words(n, tag="w"):
    return " ".join(f"{tag}{i}" for i in range(n))


def note(text, path="log.md", kind="note", secrets=()):
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    return Note(path=path, kind=kind, stem=stem, title=stem, text=text, secrets=tuple(secrets))


def test_window_words_overlap():
    text = words(10)
    ranges = window_words(text, 4, 1)
    assert ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"] == [text[a:b] for a, b in ranges]


def test_a_session_under_the_cap_is_one_chunk():
    chunks = chunk_note(note(f"## Session 1 — A\n{words(50)}\n### Sub\n{words(50)}"), max_words=200, overlap=10)
    assert [("log", 1, 1, 1, 4)] == [(c.label, c.part, c.parts, c.start_line, c.end_line) for c in chunks]


def test_sections_are_packed_up_to_the_cap_without_splitting_one():
    text = "\n".join(["## Session 2", words(30, "a"), "### One", words(60, "b"), "### Two", words(60, "c"), "### Three", words(20, "d")])
    pieces = pack(text, 100, 10)
    # intro (33 words with the header line) + One (62) = 95; Two (62) + Three (22) = 84
    assert [("", 95), ("Two", 84)] == [(p.heading, len(text[p.start:p.end].split())) for p in pieces]


def test_only_a_section_over_the_cap_is_windowed():
    text = "\n".join(["**Session 3**", words(10, "a"), "### Huge", words(250, "h"), "### Small", words(10, "s")])
    chunks = chunk_note(note(text), max_words=100, overlap=20)
    assert ["log"] * len(chunks) == [c.label for c in chunks]
    assert [12, 100, 100, 92, 12] == [c.words for c in chunks]
    assert ["Session 3", "Session 3 > Huge", "Session 3 > Huge", "Session 3 > Huge", "Session 3 > Small"] == [
        c.heading for c in chunks]
    assert list(range(1, 6)) == [c.part for c in chunks] and {5} == {c.parts for c in chunks}
    # windows overlap by 20 words
    assert chunks[1].text.split()[-20:] == chunks[2].text.split()[:20]


def test_line_ranges_point_at_the_file():
    text = "intro\n\n## Session 1\nline a\n\n## Session 2\nline b\n"
    chunks = chunk_note(note(text), max_words=100, overlap=10)
    assert [("Note: log", 1, 1), ("log › Session 1", 3, 4), ("log › Session 2", 6, 7)] == [
        (c.label, c.start_line, c.end_line) for c in chunks]
    lines = text.split("\n")
    for c in chunks:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])


def test_secrets_become_gm_chunks_under_their_session_label():
    text = "## Session 1\npublic one\n\n## Session 2\npublic two\n"
    secrets = [Secret(3, 3, "SECRET-A"), Secret(6, 6, "SECRET-B")]
    chunks = chunk_note(note(text, secrets=secrets), max_words=100, overlap=10)
    assert [("log › Session 1", PUBLIC, "## Session 1\npublic one"), ("log › Session 1", GM, "SECRET-A"),
            ("log › Session 2", PUBLIC, "## Session 2\npublic two"), ("log › Session 2", GM, "SECRET-B")] == [
        (c.label, c.visibility, c.text) for c in chunks]
    assert len({c.id for c in chunks}) == 4


def test_chunk_ids_are_deterministic_and_change_with_text():
    a = chunk_note(note("## Session 1\nsame"), max_words=100, overlap=10)
    b = chunk_note(note("## Session 1\nsame"), max_words=100, overlap=10)
    c = chunk_note(note("## Session 1\nchanged"), max_words=100, overlap=10)
    assert a[0].id == b[0].id != c[0].id


def test_empty_sessions_make_no_chunks():
    assert ["log › Session 2"] == [c.label for c in chunk_note(note("## Session 1\n\n## Session 2\ntext"))]


def test_a_long_line_without_spaces_is_one_word():
    chunks = chunk_note(note("## Session 1\n" + "x" * 50_000))
    assert 1 == len(chunks) and 4 == chunks[0].words


def test_a_heading_on_every_line():
    text = "\n".join(f"## Heading {i}" for i in range(3000))
    chunks = chunk_note(note(text), max_words=1200, overlap=120)
    assert all(c.words <= 1200 for c in chunks)
    assert 3 * 3000 == sum(c.words for c in chunks)


def test_a_one_line_session_file_is_kept():
    chunks = chunk_note(note("The party rested.", path="sessions/Session 9.md", kind="session"))
    assert [("Session 9", "The party rested.")] == [(c.label, c.text) for c in chunks]
