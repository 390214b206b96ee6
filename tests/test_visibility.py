"""`oracle visibility`: who reads each note and each hidden passage, and the vault as players read it."""
from __future__ import annotations

import json

import pytest

from oracle.cli import main
from oracle.policy import UNLISTED
from tests.conftest import write_notes

VAULT = {
    "Session Notes/Session 1.md": """
        # Session 1 — The Lantern Market

        The party met Mira at the lantern market. %% Mira is the thieves' guildmaster %%
        They bought a map of the sewers.

        ## Secrets

        The map is forged by the Ashen Hand.

        ## Loot

        A silver key.
        """,
    "GM Notes/Plot.md": """
        # The Plot

        The duke poisoned the king.
        """,
    "Lore/Rumour.md": """
        ---
        public: false
        ---
        # Rumour

        The lighthouse keeper is a werewolf.
        """,
    "Handouts/Letter.md": """
        # A letter

        The courier handed you this:

        ![[Item#Handout]]
        """,
    "Items/Item.md": """
        # The Brass Compass

        ## Handout

        A brass compass whose needle points to the nearest lie.

        ## Secrets

        It was forged by the drowned god.
        """,
    "Drafts/Empty.md": """
        ---
        title: nothing yet
        ---
        """,
}
SECRET_WORDS = ("guildmaster", "Ashen Hand", "duke", "poisoned", "werewolf", "lighthouse", "drowned god")
GM_FOLDER_RULE = "folder 'GM Notes' is named like GM material (gm)"
SECTION_RULE = "section under the heading 'Secrets'"


@pytest.fixture
def notes(monkeypatch, tmp_path):
    """The vault above, in a clean environment: no developer's .env, no campaigns file, no policy."""
    monkeypatch.chdir(tmp_path)
    for name in ("ORACLE_CAMPAIGNS", "ORACLE_NOTES_DIR", "ORACLE_DATA_DIR", "ORACLE_PLAYER_NOTES",
                 "ORACLE_GM_NOTES", "ORACLE_GM_HEADINGS"):
        monkeypatch.delenv(name, raising=False)
    return write_notes(tmp_path / "notes", VAULT)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def listing(capsys, notes, *argv: str) -> dict:
    code, out, err = run(capsys, "visibility", "--notes", str(notes), "--json", *argv)
    assert (0, "") == (code, err)
    return json.loads(out)


def by_path(doc: dict) -> dict[str, dict]:
    return {n["path"]: n for n in doc["notes"]}


def test_every_note_with_its_reader_its_rule_and_its_hidden_blocks(notes, capsys):
    doc = listing(capsys, notes)
    assert {
        "GM Notes/Plot.md": ("game master", GM_FOLDER_RULE, []),
        "Handouts/Letter.md": ("players", "", []),
        "Items/Item.md": ("players", "", [{"start_line": 7, "end_line": 10, "rule": SECTION_RULE}]),
        "Lore/Rumour.md": ("game master", "frontmatter public: False", []),
        "Session Notes/Session 1.md": ("players", "", [
            {"start_line": 3, "end_line": 3, "rule": "%% comment"},
            {"start_line": 6, "end_line": 9, "rule": SECTION_RULE},
        ]),
    } == {path: (n["reader"], n["rule"], n["hidden"]) for path, n in by_path(doc).items()}
    assert [f"kept from players: {GM_FOLDER_RULE}; list it in ORACLE_PLAYER_NOTES if players may read it"] == \
        by_path(doc)["GM Notes/Plot.md"]["warnings"]
    assert [{"path": "Drafts/Empty.md", "reason": "no text besides frontmatter or plugin code"}] == doc["skipped"]
    assert [] == doc["unmatched"]
    assert {"notes": 5, "players": 3, "game_master": 2, "hidden": 3, "skipped": 1} == doc["counts"]
    assert str(notes) == doc["notes_dir"]
    assert all("text" not in n for n in doc["notes"])  # the listing never carries what the notes say


def test_the_text_listing_one_line_per_note_then_its_blocks_then_the_count(notes, capsys):
    code, out, _ = run(capsys, "visibility", "--notes", str(notes))
    assert 0 == code
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert f"GM Notes/Plot.md GM {GM_FOLDER_RULE}" in lines
    assert "Lore/Rumour.md GM frontmatter public: False" in lines
    at = lines.index("Session Notes/Session 1.md players no rule keeps it from players")
    assert ["line 3 %% comment", f"lines 6–9 {SECTION_RULE}"] == lines[at + 1 : at + 3]
    at = lines.index("Items/Item.md players no rule keeps it from players")
    assert f"lines 7–10 {SECTION_RULE}" == lines[at + 1]
    assert "Drafts/Empty.md skipped no text besides frontmatter or plugin code" in lines
    assert "5 notes: 3 read by players, 2 game-master-only, 3 hidden passages; 1 file skipped" == lines[-1]
    assert not any(word in out for word in SECRET_WORDS)


def test_players_read_the_public_text_and_the_embedded_handout_and_no_secret(notes, capsys):
    code, out, _ = run(capsys, "visibility", "--notes", str(notes), "--players")
    assert 0 == code
    assert "The party met Mira at the lantern market." in out
    assert "They bought a map of the sewers." in out
    assert "A silver key." in out
    letter = out.index("Handouts/Letter.md")
    assert "Handout A brass compass whose needle points to the nearest lie." in out[letter : out.index("Items/Item.md")]
    for word in (*SECRET_WORDS, "Plot.md", "Rumour.md", "Empty.md"):
        assert word not in out
    assert "\n\n\n" not in out  # blanked lines collapsed
    assert out.rstrip().endswith("3 notes players read")


def test_players_json_holds_only_what_players_read_line_for_line(notes, capsys):
    doc = listing(capsys, notes, "--players")
    texts = {n["path"]: n["text"] for n in doc["notes"]}
    assert ["Handouts/Letter.md", "Items/Item.md", "Session Notes/Session 1.md"] == sorted(texts)
    session = texts["Session Notes/Session 1.md"].split("\n")
    assert "The party met Mira at the lantern market." == session[2].rstrip()  # line 3 is still line 3
    assert "## Loot" == session[9]
    assert "A brass compass whose needle points to the nearest lie." in texts["Handouts/Letter.md"]
    assert not any(word in json.dumps(doc) for word in SECRET_WORDS)


def test_paths_restrict_the_listing(notes, capsys):
    assert ["Session Notes/Session 1.md"] == list(by_path(listing(capsys, notes, "Session Notes")))
    assert ["Session Notes/Session 1.md"] == list(by_path(listing(capsys, notes, "Session Notes/")))
    both = listing(capsys, notes, str(notes / "Items" / "Item.md"), "GM Notes/Plot")
    assert ["GM Notes/Plot.md", "Items/Item.md"] == list(by_path(both))
    assert {"notes": 2, "players": 1, "game_master": 1, "hidden": 1, "skipped": 0} == both["counts"]
    drafts = listing(capsys, notes, "Drafts")
    assert ([], [{"path": "Drafts/Empty.md", "reason": "no text besides frontmatter or plugin code"}]) == (drafts["notes"], drafts["skipped"])
    # A restricted listing still renders embeds from the whole vault.
    players = listing(capsys, notes, "Handouts", "--players")
    assert "A brass compass whose needle points to the nearest lie." in players["notes"][0]["text"]


def test_a_path_outside_the_notes_folder_or_naming_nothing_is_refused(notes, tmp_path, capsys):
    code, _, err = run(capsys, "visibility", "--notes", str(notes), str(tmp_path))
    assert 1 == code
    assert f"{tmp_path} is not inside the notes folder {notes}" in err
    code, _, err = run(capsys, "visibility", "--notes", str(notes), "Sessions")
    assert 1 == code
    assert f"Sessions names no note in the notes folder {notes}" in err


def test_with_player_notes_an_unlisted_note_is_the_game_masters_and_its_handout_still_shows(notes, monkeypatch, capsys):
    monkeypatch.setenv("ORACLE_PLAYER_NOTES", "Session Notes, Handouts, Handuots")
    doc = listing(capsys, notes)
    assert {
        "GM Notes/Plot.md": ("game master", UNLISTED),
        "Handouts/Letter.md": ("players", "ORACLE_PLAYER_NOTES: Handouts"),
        "Items/Item.md": ("game master", UNLISTED),
        "Lore/Rumour.md": ("game master", "frontmatter public: False"),
        "Session Notes/Session 1.md": ("players", "ORACLE_PLAYER_NOTES: Session Notes"),
    } == {path: (n["reader"], n["rule"]) for path, n in by_path(doc).items()}
    assert "not listed in ORACLE_PLAYER_NOTES" == UNLISTED
    assert ["ORACLE_PLAYER_NOTES: 'Handuots' matches no note"] == doc["unmatched"]
    code, out, _ = run(capsys, "visibility", "--notes", str(notes), "--players")
    assert 0 == code
    assert "A brass compass whose needle points to the nearest lie." in out  # the section it embeds
    assert "Items/Item.md" not in out and "drowned god" not in out
    code, out, _ = run(capsys, "visibility", "--notes", str(notes))
    assert "policy ORACLE_PLAYER_NOTES: 'Handuots' matches no note" in " ".join(out.split())
    assert "Items/Item.md GM not listed in ORACLE_PLAYER_NOTES" in [" ".join(line.split()) for line in out.splitlines()]


def test_an_unlisted_compendium_file_gives_the_game_master_its_entries(tmp_path):
    from oracle.index.scan import scan_notes
    from oracle.settings import Settings
    from oracle.types import GM, PUBLIC

    (tmp_path / "Handouts").mkdir()
    (tmp_path / "Handouts" / "Letter.md").write_text("A letter.")
    (tmp_path / "compendium.yaml").write_text("- name: Hidden Hand\n  aliases: [the Hand]\n")
    for listed, expected in (([], PUBLIC), (["Handouts"], GM), (["Handouts", "compendium.yaml"], PUBLIC)):
        settings = Settings(_env_file=None, notes_dir=tmp_path, player_notes=listed)
        assert [("Hidden Hand", expected)] == [(e.name, e.visibility) for e in scan_notes(settings, {}, True).compendium]
