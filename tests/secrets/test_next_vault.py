"""The next game master's vault, as the issue that asked for it found one: sessions named after the
campaign with the date after (`Tempus Session 05 (2023-04-05).md`) in `01 - session-notes/`, characters
one level down in `02 - characters/allies/`, the Lazy DM's `# Secret and Clues` as `- [ ]` items,
links written with the path of the larger vault it is a part of, GM words written as one, and story
names that borrow a mark's word. No settings at all; then the game master's own policy.

Judged through the product's own entry points (ingest, status, recap, who, search, ask), with the
deterministic stand-in of the model (what a player reads is judged here, not the ranking).
"""
from __future__ import annotations

import re

import pytest

from oracle.index.index import PolicyChanged
from oracle.index.ingest import ingest
from oracle.index.report import VaultReport
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.types import Clearance
from tests.conftest import closed_port_url, quick_settings, write_notes

S = "01 - session-notes/Tempus Session {n:02d} ({date}).md"
S3, S4, S5 = S.format(n=3, date="2023-03-22"), S.format(n=4, date="2023-03-29"), S.format(n=5, date="2023-04-05")
VAULT = {
    S3: """
        # Recap
        The party reached Tempus and met [[02 - characters/allies/Vidrir|Vidrir]] at the harbour.
        # What happened
        Vidrir sold the party a map of the standing stones and warned them of [[Manus]].
        # Secret and Clues
        - [ ] qzcaldermoor: the standing stones hum before the eclipse.
        - [ ] qzcbrindle: Manus serves the Lich of the Barrow.
        """,
    S4: """
        # What happened
        Blackbird stole the ledger from the customs house; Hencelle paid for the party's rooms.
        The party bought [[01 - Projects/tempus-campaign/04 - items/Summer's Edge|Summer's Edge]], a sabre.
        ## 🔑 Secrets & Clues
        - [ ] qzccorvath: Hencelle is Manus's sister.
        ## Loot
        A purse of forty crowns.
        ### 10 Secrets & Clues
        - [ ] qzcdunmere: the ledger names the smugglers of the Hidden Valley.
        ## Planning the Heist
        The party drew a plan of the vault under the Private Quill's shop.
        """,
    S5: """
        # What happened
        Alora opened the gate of the Secret Garden; the party found the Barrow beyond it.
        ## GMNotes
        qzceldritch: the Lich wakes at the next eclipse.
        > [!dmnotes]
        > qzcfenwick: Alora owes the Lich her voice.
        # Aftermath
        Then the party rested at the inn. The cook works for the agency. #secret-service

        DMNotes:: qzcgallow the innkeeper is a spy
        """,
    "02 - characters/allies/Vidrir.md": "# Vidrir\nA harbour trader who sells maps.",
    "02 - characters/allies/Hencelle.md": "# Hencelle\nAn innkeeper of Tempus.",
    "02 - characters/allies/Blackbird.md": "# Blackbird\nA thief with a soft heart.",
    "02 - characters/adversaries/Manus.md": "# Manus\nA cultist.\n## Define Secrets and Clues\n- qzchollow: Manus fears fire.",
    "02 - characters/adversaries/Alora.md": "# Alora\nA singer without a voice.",
    "03 - places/Hidden Valley.md": "# Hidden Valley\nA valley of smugglers north of Tempus.",
    "04 - items/Summer's Edge.md": "# Summer's Edge\nA sabre that never rusts.",
    "GMNotes/Arc.md": "qzcironwood: the campaign ends at the Barrow.",
    "DMStuff/Ideas.md": "qzcjuniper: a dragon may appear.",
}
CANARIES = ["qzcaldermoor", "qzcbrindle", "qzccorvath", "qzcdunmere", "qzceldritch", "qzcfenwick", "qzcgallow",
            "qzchollow", "qzcironwood", "qzcjuniper"]
PUBLIC = ["standing stones", "Blackbird stole the ledger", "drew a plan of the vault", "gate of the Secret Garden",
          "works for the agency", "valley of smugglers", "never rusts", "rested at the inn"]
CHARACTERS = ["Vidrir", "Hencelle", "Blackbird", "Manus", "Alora"]
SECRET = re.compile("|".join(CANARIES))


@pytest.fixture
async def vault(tmp_path, open_quick_index):
    notes = write_notes(tmp_path / "notes", VAULT)

    async def open_(**policy):
        index = open_quick_index(quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False, **policy))
        return index, await ingest(index)

    return open_


async def test_sessions_characters_and_links_are_read_as_the_vault_names_them(vault):
    index, report = await vault()
    oracle = Oracle(index)
    status = await index_status(index, clearance=Clearance.PLAYER)
    assert (3, "3–5") == (status.stats.sessions, status.stats.session_numbers)
    recap = await oracle.recap()
    assert [S5] == [c.path for c in recap.citations]
    for name in CHARACTERS:
        dossier = await oracle.dossiers.who(name)
        assert dossier is not None, name
    edge = await oracle.dossiers.who("Summer's Edge")
    assert edge is not None and S4 in {m.path for m in edge.mentions}  # the link from a larger vault reaches it


async def test_no_secret_reaches_a_player_and_the_public_text_beside_each_does(vault):
    index, _ = await vault()
    oracle = Oracle(index)
    for canary in CANARIES:  # indexed: the game master finds each one
        found = await oracle.search(f"what about {canary}?", clearance=Clearance.GM)
        assert any(canary in h.chunk.text for h in found.pool), canary
    for question in [f"what about {c}?" for c in CANARIES] + ["what hums before the eclipse?", "who is Manus?"]:
        found = await oracle.search(question)
        assert [] == SECRET.findall(str(found.to_json()).replace(question, "")), question
        answer = await oracle.ask(question)
        assert [] == SECRET.findall(str(answer.to_json()).replace(question, "")), question
    for text in PUBLIC:
        found = await oracle.search(text)
        assert any(text in h.chunk.text for h in found.pool), text


async def test_the_report_says_what_was_made_of_the_vault(vault):
    _, report = await vault()
    made = VaultReport.from_json(report.vault)
    lines = "\n".join(made.lines())
    assert ((3, 4, 5), "en") == (made.sessions, made.language)
    assert {"Vidrir", "Hencelle", "Blackbird", "Manus", "Alora"} == set(made.characters)
    kept = {g.what: g.examples for g in made.hidden}
    for heading, path in [("Secret and Clues", S3), ("🔑 Secrets & Clues", S4), ("10 Secrets & Clues", S4),
                          ("GMNotes", S5), ("Define Secrets and Clues", "02 - characters/adversaries/Manus.md")]:
        assert (path,) == kept[f"sections under the heading '{heading}'"]
    assert ("GMNotes/Arc.md",) == kept["the whole note: folder 'GMNotes' is named like GM material (gm)"]
    assert ("DMStuff/Ideas.md",) == kept["the whole note: folder 'DMStuff' is named like GM material (dm)"]
    assert "the heading 'Planning the Heist' has 'planning' in a title" in lines
    assert "Hidden Valley" in lines  # a place's name that borrows a mark's word: listed for a look, and public
    assert made.suggest is False  # no folder here is named like prep that is not kept already


async def test_a_player_never_reads_outside_the_game_masters_own_list(vault):
    index, report = await vault(player_notes=["01 - session-notes", "02 - characters"])
    oracle = Oracle(index)
    allowed = ("01 - session-notes/", "02 - characters/")
    for question in ["Summer's Edge", "Hidden Valley smugglers", "what about the Barrow?", "who is Vidrir?"]:
        found = await oracle.search(question)
        assert [] == [h.chunk.path for h in found.pool if not h.chunk.path.startswith(allowed)], question


async def test_a_new_policy_refiles_the_notes_without_embedding_them_again(vault):
    _, first = await vault()
    _, refiled = await vault(player_notes=["01 - session-notes", "02 - characters"])
    # Every note left unlisted moved to the game master's side: same text, its vectors stored again.
    assert first.windows_embedded > 0
    assert refiled.windows_reused > 0 and refiled.windows_embedded < refiled.windows_reused


async def test_a_process_under_another_policy_refuses_players_and_tells_the_game_master(tmp_path, open_quick_index):
    notes = write_notes(tmp_path / "notes", VAULT)
    built = open_quick_index(quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False,
                                            player_notes=["01 - session-notes"]))
    await ingest(built)
    other = open_quick_index(quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False))
    oracle = Oracle(other)
    with pytest.raises(PolicyChanged, match="reingest"):
        await oracle.search("Vidrir")
    with pytest.raises(PolicyChanged):
        await oracle.recap()
    with pytest.raises(PolicyChanged):
        await oracle.dossiers.names("Vi")
    assert (await oracle.search("Vidrir", clearance=Clearance.GM)).fused  # the game master is served
    status = await index_status(other, clearance=Clearance.GM)
    assert status.gm is not None and not status.gm.policy_current
    assert "01 - session-notes" in status.gm.built_under
    await ingest(other)  # the notes ingested under this process's policy: players are served again
    assert (await oracle.search("Vidrir")).fused
