"""Parsing one note: decoding, frontmatter, secrets in every form, wikilinks."""
import pytest

from oracle.notes import NoteError, decode, extract_secrets, parse_note, render_wikilinks, split_frontmatter
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
    assert (Secret(1, 1, "he is a spy"),) == secrets


def test_comment_across_lines_keeps_the_line_count():
    public, secrets, _ = extract_secrets("a\n%%\nline one\nline two\n%%\nb")
    assert "a\n\n\n\n\nb" == public
    assert (Secret(2, 5, "line one\nline two"),) == secrets


def test_unclosed_comment_hides_the_rest():
    public, secrets, warnings = extract_secrets("visible\n%% hidden\nstill hidden")
    assert "visible\n\n" == public
    assert (Secret(2, 3, "hidden\nstill hidden"),) == secrets
    assert 1 == len(warnings)


@pytest.mark.parametrize("kind", ["secret", "gm", "SECRET", "gm-"])
def test_callouts_hide_the_whole_quoted_block(kind):
    tag = kind.rstrip("-")
    fold = "-" if kind.endswith("-") else ""
    text = f"before\n> [!{tag}]{fold} The truth\n> the heir lives\n>\n> in the north\nafter"
    public, secrets, _ = extract_secrets(text)
    assert "before\n\n\n\n\nafter" == public
    assert (Secret(2, 5, "The truth\nthe heir lives\n\nin the north"),) == secrets


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
    note = parse("sessions/Session 3.md", "Public.\n%% SECRET-X %%\n> [!gm]\n> SECRET-Y [[Kat|the witch]]\nEnd.")
    assert "SECRET" not in note.text
    assert (Secret(2, 2, "SECRET-X"), Secret(3, 4, "SECRET-Y the witch")) == note.secrets


def test_stray_nul_bytes_in_a_text_note_are_dropped_with_a_warning():
    text, warnings = decode(b"## Session 1\nThe party\x00 rested by the river all night long.\n")
    assert ("## Session 1\nThe party rested by the river all night long.\n", ["removed 1 NUL bytes"]) == (text, warnings)
