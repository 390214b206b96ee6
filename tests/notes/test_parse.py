"""Parsing one note: decoding, frontmatter, secrets in every form, wikilinks."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from oracle.notes import secrets as secrets_module
from oracle.notes.chunking import chunk_note
from oracle.notes.parse import (
    NoteError,
    decode,
    extract_secrets,
    parse_note,
    render_wikilinks,
    split_frontmatter,
)
from oracle.settings import DEFAULT_FOLDER_KINDS
from oracle.types import GM, PUBLIC, Link, Secret


def parse(path, text):
    data = text.encode() if isinstance(text, str) else text
    return parse_note(path, data, DEFAULT_FOLDER_KINDS)


def test_decode_bom_and_crlf():
    assert ("a\nb\nc", []) == decode(b"\xef\xbb\xbfa\r\nb\rc")


def test_decode_windows_1252_with_a_warning():
    text, warnings = decode("Caf\u00e9 notes".encode("cp1252"))
    assert "Café notes" == text
    assert ["not UTF-8 (byte 3); decoded as Windows-1252"] == warnings


@pytest.mark.parametrize(
    "data, reason",
    [(b"", "empty note"), (b"  \n\t\n", "empty note"), (b"PK\x03\x04\x00\x00", "binary file (NUL bytes), not a Markdown note")],
)
def test_unreadable_notes_are_refused_with_a_reason(data, reason):
    with pytest.raises(NoteError) as err:
        decode(data)
    assert reason == str(err.value)


def test_frontmatter_is_read_and_its_lines_blanked():
    fm, text, warnings = split_frontmatter("---\naliases: [Kat]\nTags: pc\n---\nbody")
    assert {"aliases": ["Kat"], "tags": "pc"} == fm
    assert "\n\n\n\nbody" == text
    assert [] == warnings


def test_broken_frontmatter_keeps_the_body_and_warns():
    fm, text, warnings = split_frontmatter("---\naliases: [Kat\n---\nbody")
    assert {} == fm
    assert text.endswith("\nbody") and text.count("\n") == 3
    assert 1 == len(warnings) and warnings[0].startswith("broken frontmatter ignored")


def test_inline_comment_on_one_line_keeps_the_rest_of_the_line():
    public, secrets, _ = extract_secrets("Aldous smiled. %% he is a spy %% They left.\nNext line")
    assert "Aldous smiled.  They left.\nNext line" == public
    assert (Secret(1, 1, "he is a spy", "%% comment"),) == secrets


def test_comment_across_lines_keeps_the_line_count():
    public, secrets, _ = extract_secrets("a\n%%\nline one\nline two\n%%\nb")
    assert "a\n\n\n\n\nb" == public
    assert (Secret(2, 5, "line one\nline two", "%% comment"),) == secrets


def test_unclosed_comment_hides_the_rest():
    public, secrets, warnings = extract_secrets("visible\n%% hidden\nstill hidden")
    assert "visible\n\n" == public
    assert (Secret(2, 3, "hidden\nstill hidden", "%% comment"),) == secrets
    assert 1 == len(warnings)


@pytest.mark.parametrize("kind", ["secret", "gm", "SECRET", "gm-", "dm", "private+", "Private"])
def test_callouts_hide_the_whole_quoted_block(kind):
    tag = kind.rstrip("-+")
    fold = kind[len(tag):]
    text = f"before\n> [!{tag}]{fold} The truth\n> the heir lives\n>\n> in the north\n\nafter"
    public, secrets, _ = extract_secrets(text)
    assert "before\n\n\n\n\n\nafter" == public
    assert (Secret(2, 5, "The truth\nthe heir lives\n\nin the north", f"callout [!{tag}]"),) == secrets


def test_ordinary_quotes_and_callouts_stay_public():
    text = "> [!note] Hint\n> look up\n> just a quote"
    assert (text, (), []) == extract_secrets(text)


def test_wikilinks_read_as_shown_text_and_are_recorded():
    text, links = render_wikilinks("Met [[Brother_Aldous|the Candle Monk]] in [[Greyhaven]].\n![[map.png]]")
    assert "Met the Candle Monk in Greyhaven.\nmap.png" == text
    assert (Link("Brother_Aldous", 1), Link("Greyhaven", 1), Link("map.png", 2)) == links


def test_a_link_with_a_path_records_the_target_name_only():
    assert ("Kat", (Link("Kat", 1),)) == render_wikilinks("[[../../etc/Kat]]")


def test_sheet_note_with_aliases():
    note = parse("sheets/Kat_Ash.md", "---\naliases:\n  - Kat\n  - the Ember Witch\nalias: Ashes\n---\n# Kat\nFire.")
    assert ("sheet", "Kat Ash", ("Kat", "the Ember Witch", "Ashes"), PUBLIC) == (
        note.kind, note.title, note.aliases, note.visibility)
    assert "\n" * 6 + "# Kat\nFire." == note.text  # line 7 of the file is line 7 of the text


@pytest.mark.parametrize(
    "path, text",
    [
        ("world/Heir.md", "---\nvisibility: gm\n---\nThe heir lives."),
        ("world/Heir.md", "---\ngm: true\n---\nThe heir lives."),
        ("gm/Plans.md", "The heir lives."),
        ("world/gm/Vault.md", "The heir lives."),
    ],
)
def test_whole_note_secrets(path, text):
    note = parse(path, text)
    assert GM == note.visibility
    assert "The heir lives." == note.text.strip()


def test_public_note_secrets_are_cut_out():
    note = parse("sessions/Session 3.md", "Public.\n%% SECRET-X %%\n> [!gm]\n> SECRET-Y [[Kat|the witch]]\n\nEnd.")
    assert "SECRET" not in note.text
    assert (Secret(2, 2, "SECRET-X", "%% comment"), Secret(3, 4, "SECRET-Y the witch", "callout [!gm]")) == note.secrets


def test_stray_nul_bytes_in_a_text_note_are_dropped_with_a_warning():
    text, warnings = decode(b"## Session 1\nThe party\x00 rested by the river all night long.\n")
    assert ("## Session 1\nThe party rested by the river all night long.\n", ["removed 1 NUL bytes"]) == (text, warnings)


# -- Markdown as Obsidian reads it: the forms that used to show a secret ---------------------


def test_a_lazy_continuation_line_belongs_to_the_callout():
    """CommonMark (and Obsidian) read a line without `>` right after a quote as part of it."""
    public, secrets, _ = extract_secrets("Open.\n> [!gm]\n> The duke\nis a traitor\n\nClose.")
    assert "Open.\n\n\n\n\nClose." == public
    assert (Secret(2, 4, "The duke\nis a traitor", "callout [!gm]"),) == secrets


def test_a_callout_inside_a_list_item_is_secret():
    public, secrets, _ = extract_secrets("- camp\n  > [!secret]\n  > the cook is a spy\n- rest")
    assert "the cook" not in public and "rest" in public
    assert (Secret(2, 3, "the cook is a spy", "callout [!secret]"),) == secrets


@pytest.mark.parametrize(
    "before",
    [
        "Type `%%` to start a comment.",
        "Use ``a `%%` b`` here.",
        "```c\nprintf(\"100%%\");\n```",
        "~~~\n%%\n~~~",
        "    indented %% code",
    ],
)
def test_percent_signs_in_code_are_literal(before):
    text = f"{before}\n\nThe party rested. %% SECRET the inn is cursed %% They slept."
    public, secrets, warnings = extract_secrets(text)
    assert "SECRET" not in public and "They slept." in public
    assert ["SECRET the inn is cursed"] == [s.text for s in secrets]
    assert [] == warnings
    assert before.split("\n")[0] in public


@pytest.mark.parametrize("before", ["a 20%% discount", "escaped \\%% sign", "100%%"])
def test_a_doubtful_marker_hides_more_never_less(before):
    """`20%%` or `\\%%` before a real comment: either reading's hidden text is hidden."""
    text = f"Start. {before} then.\nMiddle %% SECRET the cook %% after.\nEnd of note."
    public, secrets, warnings = extract_secrets(text)
    assert "SECRET" not in public and "the cook" not in public
    assert "Start." in public
    assert 1 <= len(warnings) and "line 1" in warnings[0]


def test_a_doubtful_marker_after_a_comment_still_hides_it():
    text = "A 20%% rise. %% SECRET the mayor %% then 50%% more.\n\nLast line."
    public, _, _ = extract_secrets(text)
    assert "SECRET" not in public and "mayor" not in public and "Last line." in public


# Lines that move CommonMark's block boundaries, secret markers among them and around them.
_LINES = [
    "", "Plain text.", "# Heading", "```", "~~~c", "    indented %% code", "\tcode by tab", "> quoted",
    "> [!gm] The duke", "> [!note]- Public", ">[!SECRET]+", "- item", "  > [!dm] in a list", "1. step",
    "lazy continuation", "| a | b |", "|---|---|", "| `%%` | x |", "Type `%%` here", "``a ` %% b``",
    "text %% hidden %% text", "%%", "20%% off", "\\%% escaped", "<div>", "</div>", "***", "Setext", "===",
    "[!gm] not in a quote", "> > [!private] nested", "* [!secret]",
]
_FULL_PARSE = MarkdownIt("commonmark").enable("table")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_LINES), min_size=1, max_size=2).map(" ".join), max_size=25))
def test_reading_the_blocks_alone_finds_what_the_full_parse_finds(lines):
    """The parser runs without its inline rule, and a note with no marker is not parsed at all: both
    must hide exactly what reading the whole CommonMark parse of every note hides."""
    text = "\n".join(lines)
    quick = secrets_module.hidden_passages(text)
    saved = secrets_module._MD, secrets_module.may_hide
    secrets_module._MD, secrets_module.may_hide = _FULL_PARSE, lambda _text, _headings: True
    try:
        full = secrets_module.hidden_passages(text)
    finally:
        secrets_module._MD, secrets_module.may_hide = saved
    assert quick == full


def test_an_unclosed_comment_names_its_line_and_hides_what_it_says():
    public, secrets, warnings = extract_secrets("one\ntwo %% SECRET\nthree\nfour")
    assert "one\ntwo \n\n" == public
    assert ["line 2: a %% comment is never closed; the rest of the note is treated as secret"] == warnings


@pytest.mark.parametrize(
    "frontmatter",
    [
        "title: The Duke: a traitor\nvisibility: gm",  # not YAML: a colon in a plain value
        "visibility:\tgm\n\tx: y",  # a tab
        "visibility:gm",  # one string, not a map
        "- visibility: gm",  # a list
        "aliases: [Kat\ngm: true",  # broken, and says gm
        "visibility: maybe",  # a value the Oracle does not know
        "visibility: [gm]",
        "gm: maybe",
    ],
)
def test_frontmatter_that_cannot_be_read_but_may_say_gm_makes_the_note_gm(frontmatter):
    note = parse("world/Duke.md", f"---\n{frontmatter}\n---\nThe duke is a traitor.")
    assert GM == note.visibility
    assert 1 == len(note.warnings) and "game-master-only" in note.warnings[0]


def test_unclosed_frontmatter_that_says_gm_makes_the_note_gm():
    note = parse("world/Duke.md", "---\nvisibility: gm\nThe duke is a traitor.")
    assert GM == note.visibility
    assert ["line 2: frontmatter cannot be read (opened with --- but never closed) but mentions 'visibility';"
            " the note is treated as game-master-only"] == list(note.warnings)


@pytest.mark.parametrize("frontmatter", ["visibility: public", "gm: false", "aliases: [Kat]", "tags: [pc, dmg]"])
def test_frontmatter_that_says_public_stays_public(frontmatter):
    note = parse("world/Duke.md", f"---\n{frontmatter}\n---\nThe duke is loyal.")
    assert (PUBLIC, ()) == (note.visibility, note.warnings)


@pytest.mark.parametrize("folder", ["gm", "DM", "secrets", "private", "lore/secret"])
def test_gm_folders(folder):
    assert GM == parse(f"{folder}/Plot.md", "The plot.").visibility


def test_a_link_into_a_gm_folder_takes_the_visibility_of_its_real_path():
    note = parse_note("lore/mirror.md", b"The plot.", DEFAULT_FOLDER_KINDS, real_path="gm/plot.md")
    assert GM == note.visibility


def test_a_note_of_aliases_alone_is_kept_for_its_names():
    note = parse("NPCs/Red Hollis.md", "---\naliases: [Red, the Widow's Knife]\n---\n")
    assert ("Red Hollis", ("Red", "the Widow's Knife"), "") == (note.title, note.aliases, note.text.strip())


def test_a_note_of_frontmatter_without_names_is_skipped():
    with pytest.raises(NoteError, match="no text besides frontmatter or plugin code"):
        parse("Drafts/Stub.md", "---\ntags: [draft]\n---\n")
    with pytest.raises(NoteError, match="no text besides frontmatter or plugin code"):
        parse("Sessions.md", "\n```dataview\nTABLE file.name FROM \"Session Notes\"\n```\n")


def test_an_empty_note_tagged_as_a_person_is_an_entity_whatever_its_folder():
    note = parse("Drafts/Stub.md", "---\ntags: [npc]\n---\n")
    assert ("Stub", True, "") == (note.title, note.entity, note.text.strip())


@pytest.mark.parametrize("data", ["", "---\ntags: [npc]\n---\n"])
def test_an_empty_character_or_place_note_is_an_entity_by_its_name(data):
    for path, kind in [("NPCs/Grogar.md", "sheet"), ("Gods/Avandra.md", "world")]:
        note = parse(path, data)
        assert (kind, path.split("/")[1][:-3], "") == (note.kind, note.title, note.text.strip())
        assert [] == chunk_note(note)
