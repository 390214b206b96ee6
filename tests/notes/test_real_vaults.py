"""Real vaults written by other people, read as the ingest reads them (parsed and chunked, nothing
embedded): no query or plugin code is indexed as prose, no note with a name is skipped, no Obsidian or
Templater frontmatter is called broken; sessions are counted as their authors numbered them, every
character with a note of its own is an entity, and the policy proposed from each vault's folders is
what its SOURCE.md says its author publishes."""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from oracle.index.scan import read_notes
from oracle.notes.chunking import chunk_note
from oracle.notes.decode import NoteError, decode
from oracle.notes.embeds import Vault
from oracle.notes.frontmatter import split_frontmatter, strings
from oracle.notes.parse import parse_note
from oracle.notes.suggest import propose
from oracle.policy import Policy
from oracle.settings import DEFAULT_FOLDER_KINDS
from oracle.types import Note
from tests.conftest import SHARED_EVAL

VAULTS = ("adventure-log", "ebullient-heist", "raiders-of-the-lost-dice", "maski-nyarlathotepa-pl",
          "mythic-bastionland-es", "nyrule3-tormenta")
CODE_LANGUAGES = (
    "dataviewjs", "dataview", "statblock", "encounter-table", "encounter", "tasks", "mermaid", "meta-bind",
    "button", "leaflet", "chart", "timeline",
)
CODE = {
    "code fence": re.compile(rf"^[ \t>]*(?:`{{3,}}|~{{3,}})[ \t]*(?:{'|'.join(CODE_LANGUAGES)})(?![-\w])", re.M | re.I),
    "Templater tag": re.compile(r"<%[\s\S]*?%>"),
    "dv. call": re.compile(r"\bdv\.\w+"),
}
NAME_KEYS = ("aliases", "alias", "name", "title")
UNREADABLE = ("broken frontmatter", "frontmatter cannot be read")


class Read(NamedTuple):
    name: str
    files: dict[str, bytes]
    notes: dict[str, Note]
    refused: dict[str, str]
    vault: Vault


@pytest.fixture(scope="module", params=VAULTS)
def vault(request: pytest.FixtureRequest) -> Read:
    root: Path = SHARED_EVAL / "vaults" / request.param / "notes"
    found = read_notes(root)  # fails if the shared vault is absent, as the other shared-data tests do
    policy = Policy()
    vault = Vault(found.files, policy, found.reals)
    notes, refused = {}, {}
    for rel, data in found.files.items():
        try:
            notes[rel] = parse_note(
                rel, data, DEFAULT_FOLDER_KINDS, real_path=found.reals.get(rel), policy=policy, vault=vault
            )
        except NoteError as exc:
            refused[rel] = str(exc)
    return Read(request.param, found.files, notes, refused, vault)


def _frontmatter(data: bytes) -> tuple[dict, list[str]]:
    try:
        text, _ = decode(data)
    except NoteError:
        return {}, []
    fm, _, warnings = split_frontmatter(text)
    return fm, warnings


def test_no_code_is_indexed_as_prose(vault: Read) -> None:
    chunks = [(rel, chunk) for rel, note in vault.notes.items() for chunk in chunk_note(note)]
    code = {
        f"{rel} ({chunk.label})": found
        for rel, chunk in chunks
        if (found := [what for what, pattern in CODE.items() if pattern.search(chunk.text)])
    }
    print(f"{vault.name}: {len(vault.files)} files, {len(vault.notes)} notes, {len(vault.refused)} refused,"
          f" {len(chunks)} chunks, {len(code)} with code")
    assert {} == code


def test_no_note_with_a_name_is_skipped(vault: Read) -> None:
    named = {}
    for rel, reason in vault.refused.items():
        fm, _ = _frontmatter(vault.files[rel])
        names = [name for key in NAME_KEYS for name in strings(fm.get(key))]
        if names:
            named[rel] = (reason, names)
    assert {} == named


def test_obsidian_frontmatter_is_not_called_broken(vault: Read) -> None:
    warnings = {rel: list(note.warnings) for rel, note in vault.notes.items()}
    warnings |= {rel: _frontmatter(vault.files[rel])[1] for rel in vault.refused}
    unreadable = {rel: w for rel, ws in warnings.items() for w in ws if any(u in w for u in UNREADABLE)}
    assert {} == unreadable


# What each vault's SOURCE.md says: its sessions as numbered, a few characters with notes of their own,
# and what its author publishes to players.
SESSIONS = {
    "adventure-log": set(range(0, 74)), "ebullient-heist": {1, 2, 3, 4, 5}, "raiders-of-the-lost-dice": set(range(0, 56)),
    "maski-nyarlathotepa-pl": {1, 2, 3}, "mythic-bastionland-es": set(range(0, 7)), "nyrule3-tormenta": {1, 2, 3, 4},
}
CHARACTERS = {
    "adventure-log": ["characters/NPCs/beezer-twelve-washingbeard.md", "characters/players/rowan-chokrotsk.md"],
    "ebullient-heist": ["heist/characters/gm-rowen.md", "heist/waterdeep/npcs/eldon-highhill.md"],
    "raiders-of-the-lost-dice": ["NPCs/Moira.md", "NPCs/Lady Thinora Va'del, Archmage of Antiquity.md", "PCs/Tato.md"],
    "maski-nyarlathotepa-pl": ["Jackson Elias.md", "Roger Carlyle.md", "Edward Gavigan.md"],
    "mythic-bastionland-es": ["10-Personajes/Ser Tanneth (Pearl Knight).md", "20-Caballeros/The Dusk Knight.md",
                              "50-PNJs/Brank.md"],
    "nyrule3-tormenta": ["Personagens/Personagens Recorrentes/Malgrim/Malgrim.md"],
}
PROPOSED = {  # (ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, no part of the story), from each SOURCE.md
    "adventure-log": ((), (), ()),  # all published; templates are kept already
    "ebullient-heist": ((), ("heist/encounters", "heist/tables", "heist/potential-npcs.md"),
                        ("assets/", "compendium/", "readme.md")),
    "raiders-of-the-lost-dice": ((), ("Encounters", "Plot", "Statblocks", "Misc/Player Motivations.md"),
                                 ("Rules/", "README.md", "Resources.md")),
    "maski-nyarlathotepa-pl": ((), (), ()),  # all the players' own
    "mythic-bastionland-es": ((), (), ("README.md", "REGLAS_DE_LA_CAMPAÑA.md")),  # no GM text; rules and AI prompts
    "nyrule3-tormenta": (("Sessões",), (), ()),  # "NÃO saia por aí entrando em qualquer página… muitos spoilers"
}


def test_sessions_are_counted_as_their_authors_numbered_them(vault: Read) -> None:
    found = {n for note in vault.notes.values() for n in note.sessions}
    assert SESSIONS[vault.name] == found


def test_every_character_with_a_note_of_its_own_is_an_entity(vault: Read) -> None:
    assert [] == [rel for rel in CHARACTERS[vault.name] if not vault.vault.conventions.of(rel).entity]


def test_the_policy_proposed_from_the_folders_is_what_the_author_publishes(vault: Read) -> None:
    readers = {rel: note.visibility for rel, note in vault.notes.items()}
    hubs = {rel: data.decode("utf-8", "replace") for rel, data in vault.files.items() if "/" not in rel}
    proposal = propose(vault.vault.conventions, readers, hubs)
    assert PROPOSED[vault.name] == (proposal.player_notes, proposal.gm_notes, tuple(f.path for f in proposal.reference))


def test_players_read_every_session_their_authors_wrote(vault: Read) -> None:
    """No written session is kept from players wholesale (a query block's leftover Templater tag once
    hid the Spanish vault's last one)."""
    public = {n for note in vault.notes.values() if note.visibility == "public" for n in note.sessions}
    assert SESSIONS[vault.name] == public
