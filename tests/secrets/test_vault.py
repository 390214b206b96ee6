"""Secrets in a vault written as game masters write them: each way a secret used to reach players.

1. a game-master-only name made public by a public text sharing one of its aliases (a GM note's
   `aliases`, a `compendium.yaml` entry marked gm, a name the LLM extracted from a GM chunk, a GM
   note whose alias is a public note's name);
2. `%%` in code, `20%%` and `\\%%` shifting the pairing of comments;
3. a callout continued lazily (a line without `>`);
4. frontmatter that says `visibility: gm` but is not valid YAML;
5. a symlink into `gm/`;
6. `compendium.md` with its own `visibility: gm`.

Every marker and secret name below is written only in game-master text; a player must never see
one, on any path, and the public text beside each secret must still be found.
"""
from __future__ import annotations

import json
import os
import re

import pytest
import pytest_asyncio

from oracle.answer.prompt import Turn
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.types import Clearance
from testing.ollama_server import FakeOllama
from tests.conftest import quick_settings, request_kind, write_notes
from tests.secrets.test_secrets import annotation_or_answer

module_loop = pytest.mark.asyncio(loop_scope="module")

VAULT = {
    "sessions/Session 1.md": """
        ## Session 1 — The Merchant's Bargain
        Aldric the merchant sold the party a map of the Ashen Road. Aldric smiled too much.
        Mirelle the innkeeper warned them about Lord Vesper, who taxes the Ashen Road.
        Orsk the ferryman took them across the river for two silver.
        On the far bank the party met Aldric again, and bought bread that Mirelle had baked in Greyford.

        In Obsidian, type `%%` to open a comment. %% CANARY-CODESPAN Aldric hides his face %%
        The party thanked Orsk and rode on.
    """,
    "sessions/Session 2.md": """
        ## Session 2 — Prices at Greyford
        Aldric met the party again at Greyford market, where Lord Vesper's men counted wagons.
        Greyford market closes at dusk, and the party found lodgings at the Gilded Eel.

        ```c
        printf("100%%");
        ```

        The scribe's code above is a joke about taxes. %% CANARY-FENCE the wagons carry weapons %%
        Prices rose 20%% since spring, said Mirelle.

        %% CANARY-PERCENT the grain merchants are starving Greyford on purpose %%

        Read both ways, the doubtful 20%% hides this line too: to the end of the note.
    """,
    "sessions/Session 3.md": """
        ## Session 3 — The Bells of Greyford
        Lord Vesper arrived at the Gilded Eel after midnight and ordered wine for everyone.
        The party asked Aldric and Mirelle about the bells of Greyford.

        > [!gm] What the bells mean
        > CANARY-CALLOUT the bells ring for the dead
        CANARY-LAZY and this lazy line is still inside the callout

        An escaped \\%% sign was scratched on the inn door.
        %% CANARY-ESCAPED the innkeeper scratched it as a signal %%
    """,
    "sessions/Session 4.md": """
        ## Session 4 — The Ferry
        Orsk ferried the party back across the river at dawn.
        - camp chores
          > [!DM]- note
          > CANARY-LISTCALLOUT Orsk counts the party for the Shadow Regent
        - the party slept in shifts

        > [!Private]
        > CANARY-PRIVATE the ferry toll pays Baron Skell

        > [!note] A public callout
        > The river was cold and grey.
    """,
    "world/The_Duke.md": "---\ntitle: The Duke: a traitor\nvisibility: gm\n---\nCANARY-YAMLCOLON the duke sold the north.\n",
    "world/The_Duchess.md": "---\nvisibility:gm\n---\nCANARY-NOSPACE the duchess poisons the duke.\n",
    "world/The_Bishop.md": "---\nvisibility:\tgm\n\taliases: [x]\n---\nCANARY-TAB the bishop is a fraud.\n",
    "gm/The Masked Lord.md": """
        ---
        aliases: [Aldric, Lord Vesper]
        ---
        CANARY-MASKED The Masked Lord wears two faces: the merchant and the lord of the road.
    """,
    "gm/Orsk's Secret.md": """
        ---
        title: Shadow Regent
        aliases: [Orsk]
        ---
        CANARY-REGENT the ferryman rules the river guild in secret.
    """,
    "gm/Session 9.md": """
        ## Session 9 — What Comes Next
        CANARY-GMSESSION Baron Skell marches on Greyford. Baron Skell burns the ferry.
    """,
    "gm/Plot.md": "CANARY-SYMLINK Velkorath Dunmere hires Velkorath's cousin to burn the Gilded Eel.\n",
    "compendium.yaml": """
        - name: Hidden Hand
          gm: true
          aliases: [Mirelle]
        - name: Gilded Eel
          kind: place
    """,
    "compendium.md": """
        ---
        visibility: gm
        entities:
          - name: Crimson Veil
            aliases: [Ashen Road]
        ---
    """,
    "npcs/Orsk.md": """
        ---
        aliases: [the Ferryman]
        ---
        A ferryman on the Grey River, quiet and honest.
    """,
}
SYMLINK = ("lore/mirror.md", "../gm/Plot.md")

SECRET_NAMES = ["Masked Lord", "Hidden Hand", "Crimson Veil", "Shadow Regent", "Velkorath", "Baron Skell", "Skell"]
MARKER = re.compile(r"CANARY-[A-Z]+|" + "|".join(SECRET_NAMES), re.I)
PROBES = {
    "CANARY-CODESPAN": "Does Aldric hide his face?",
    "CANARY-FENCE": "What do the wagons carry?",
    "CANARY-PERCENT": "Why are the grain merchants starving Greyford?",
    "CANARY-ESCAPED": "Who scratched the sign on the inn door?",
    "CANARY-CALLOUT": "What do the bells of Greyford mean?",
    "CANARY-LAZY": "What is inside the callout?",
    "CANARY-LISTCALLOUT": "Who does Orsk count the party for?",
    "CANARY-PRIVATE": "Who does the ferry toll pay?",
    "CANARY-YAMLCOLON": "Who sold the north?",
    "CANARY-NOSPACE": "Who poisons the duke?",
    "CANARY-TAB": "Is the bishop a fraud?",
    "CANARY-MASKED": "Who is Aldric really?",
    "CANARY-REGENT": "Who rules the river guild?",
    "CANARY-GMSESSION": "What happens in session 9?",
    "CANARY-SYMLINK": "Who wants to burn the Gilded Eel?",
}
PUBLIC_BESIDE = {  # public text next to a secret, and a question that must still find it
    "Session 1": ("thanked Orsk and rode on", "Who did the party thank before riding on?"),
    "Session 2": ("Greyford market closes at dusk", "When does Greyford market close?"),
    "Session 3": ("ordered wine for everyone", "Who ordered wine for everyone at the Gilded Eel?"),
    "Session 4": ("The river was cold and grey", "Was the river cold?"),
}
PUBLIC_NAMES = ["Aldric", "Lord Vesper", "Mirelle", "Orsk", "Ashen Road", "Gilded Eel", "Greyford"]


def extracting_responder(request: dict) -> object:
    """`annotation_or_answer`, with annotations that also 'extract' every capitalised pair of words,
    as a model would (so a GM chunk's annotation holds its names)."""
    reply = annotation_or_answer(request)
    if request_kind(request) == "annotate":
        passage = request["messages"][-1]["content"].split("\n\n", 1)[-1]
        names = sorted(set(re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", passage)))
        reply["entities"] = [{"name": n, "aliases": []} for n in names]
    return reply


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def vault(tmp_path_factory, embedder):
    from oracle.index.index import Index

    root = tmp_path_factory.mktemp("vault")
    notes = write_notes(root / "notes", VAULT)
    (notes / SYMLINK[0]).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(SYMLINK[1], notes / SYMLINK[0])
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        fake.responder = extracting_responder
        settings = quick_settings(notes, root / "data", fake.url)
        index = Index(settings, embedder=embedder)
        report = await ingest(index)
        assert 0 == report.annotations_missing  # names were extracted from GM chunks too
        yield index, fake, report
        await index.close()


def assert_no_secret(thing: object, where: str) -> None:
    text = thing if isinstance(thing, str) else json.dumps(thing, ensure_ascii=False, default=str)
    assert [] == MARKER.findall(text), f"secret text in {where}"


@module_loop
@pytest.mark.parametrize("marker", sorted(PROBES))
async def test_a_player_never_sees_a_secret_of_a_real_vault(vault, marker):
    index, fake, _ = vault
    oracle = Oracle(index)
    question = PROBES[marker]
    assert_no_secret((await oracle.search(question)).to_json(), "search")
    fake.reset()
    fake.responder = extracting_responder
    answer = await oracle.ask(question)
    assert_no_secret(answer.to_json(), "the answer")
    followup = await oracle.ask("and then what?", history=[Turn("user", question), Turn("assistant", answer.text)])
    assert_no_secret(followup.to_json(), "a follow-up")
    assert_no_secret([r.body for r in fake.requests], "a request to Ollama")


@module_loop
@pytest.mark.parametrize("marker", sorted(PROBES))
async def test_the_game_master_finds_each_secret(vault, marker):
    index, _, _ = vault
    retrieval = await Oracle(index).search(PROBES[marker], clearance=Clearance.GM)
    assert any(marker in h.chunk.text for h in retrieval.pool), marker


@module_loop
@pytest.mark.parametrize("label", sorted(PUBLIC_BESIDE))
async def test_the_public_text_beside_each_secret_is_still_found(vault, label):
    index, _, _ = vault
    words, question = PUBLIC_BESIDE[label]
    retrieval = await Oracle(index).search(question)
    assert any(words in h.chunk.text and h.chunk.label == label for h in retrieval.fused[:8]), label


@module_loop
@pytest.mark.parametrize("name", PUBLIC_NAMES)
async def test_public_names_never_reveal_a_secret_name_or_alias(vault, name):
    """Aldric and Lord Vesper are one entity for the game master (the Masked Lord); for players
    they stay two people, each known only by what public text calls them."""
    index, _, _ = vault
    oracle = Oracle(index)
    dossier = await oracle.dossiers.who(name)
    assert dossier is not None, name
    assert_no_secret(dossier.to_json(), f"the dossier of {name}")
    others = {n.casefold() for n in (dossier.name, *dossier.aliases)}
    assert not ({"aldric", "lord vesper"} <= others), "public names joined by a GM note"
    assert_no_secret(await oracle.dossiers.names(name[:3]), "autocomplete")
    search = await oracle.search(f"who is {name} really?")
    assert_no_secret(search.to_json(), "the entity panel")


@module_loop
async def test_the_game_master_sees_the_secret_side(vault):
    index, _, _ = vault
    oracle = Oracle(index)
    masked = await oracle.dossiers.who("Aldric", clearance=Clearance.GM)
    assert ("The Masked Lord", {"Aldric", "Lord Vesper"}) == (masked.name, {"Aldric", "Lord Vesper"} & set(masked.aliases))
    assert "Hidden Hand" == (await oracle.dossiers.who("Hidden Hand", clearance=Clearance.GM)).name
    assert "Crimson Veil" == (await oracle.dossiers.who("Crimson Veil", clearance=Clearance.GM)).name
    assert (await oracle.dossiers.who("Baron Skell", clearance=Clearance.GM)) is not None  # extracted from a GM chunk
    for name in SECRET_NAMES:
        assert await oracle.dossiers.who(name) is None, name
        assert [] == [n for n in await oracle.dossiers.names(name.split()[0]) if MARKER.search(n)]
    assert_no_secret(await oracle.dossiers.names("", limit=1000), "autocomplete")


@module_loop
async def test_status_counts_public_and_gm_only_sessions_apart(vault):
    index, _, _ = vault
    oracle = Oracle(index)
    player = await index_status(oracle.index, clearance=Clearance.PLAYER)
    assert 4 == player.stats.sessions
    assert_no_secret(player.to_json(), "a player's status")
    assert {"notes_dir", "withheld", "sessions_gm_only", "chunks_by_visibility"}.isdisjoint(player.to_json())
    assert player.gm is None and player.stats.gm is None
    assert player.ollama.host is None and "host" not in player.to_json()["ollama"]
    gm = await index_status(oracle.index)
    assert gm.stats.gm is not None
    assert (4, 1) == (gm.stats.sessions, gm.stats.gm.sessions_gm_only)


@module_loop
async def test_ingest_reports_the_secrets_of_each_file_and_why(vault):
    _, _, report = vault
    assert {
        "sessions/Session 1.md": 1,
        "sessions/Session 2.md": 2,  # the doubtful 20%% joins the last two
        "sessions/Session 3.md": 2,
        "sessions/Session 4.md": 2,
        "world/The_Duke.md": -1,
        "world/The_Duchess.md": -1,
        "world/The_Bishop.md": -1,
        "gm/The Masked Lord.md": -1,
        "gm/Orsk's Secret.md": -1,
        "gm/Session 9.md": -1,
        "gm/Plot.md": -1,
        "lore/mirror.md": -1,
    } == report.secrets
    warnings = {(w.path, w.reason.split(":")[0]) for w in report.warnings}
    assert {("world/The_Duke.md", "line 3"), ("world/The_Duchess.md", "line 2"), ("world/The_Bishop.md", "line 2"),
            ("sessions/Session 2.md", "line 10, 14"),  # two doubtful markers
            ("sessions/Session 3.md", "line 9"), ("sessions/Session 3.md", "line 10")} == warnings  # \\%%, unclosed


@pytest.mark.integration  # the command line loads the real model
def test_oracle_who_and_status_on_the_command_line(tmp_path, monkeypatch, capsys):
    """What a game master runs to check what players see: `oracle who NAME [--gm] --json`."""
    from oracle.cli import main
    from tests.conftest import closed_port_url

    notes = write_notes(tmp_path / "notes", VAULT)
    monkeypatch.chdir(tmp_path)  # no developer .env read
    for key in [k for k in os.environ if k.startswith(("ORACLE_", "OLLAMA_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("OLLAMA_HOST", closed_port_url())
    monkeypatch.setenv("ORACLE_OLLAMA_PROBE_TIMEOUT", "2")
    where = ["--notes", str(notes), "--data", str(tmp_path / "data"), "--json"]

    def run(*args: str) -> tuple[int, dict]:
        code = main([*args, *where])
        return code, json.loads(capsys.readouterr().out)

    code, report = run("ingest")
    assert 0 == code and {"path": "gm/The Masked Lord.md", "blocks": 0, "whole_note": True, "rule": "folder 'gm' is a game master's folder"} in report["files"]["secrets"]
    code, player = run("who", "Aldric")
    assert (0, "Aldric", []) == (code, player["dossier"]["name"], player["dossier"]["aliases"])
    assert_no_secret(player, "oracle who")
    code, gm = run("who", "Aldric", "--gm")
    assert (0, "The Masked Lord") == (code, gm["dossier"]["name"])
    assert {"Aldric", "Lord Vesper"} <= set(gm["dossier"]["aliases"])
    code, missing = run("who", "The Masked Lord")
    assert (0, None) == (code, missing["dossier"])  # as for a name no note holds: nothing tells a secret
    assert_no_secret(missing, "oracle who, for a secret name")
    code = main(["status", "--data", str(tmp_path / "data"), "--json", "--gm"])  # the game master's
    status = json.loads(capsys.readouterr().out)
    assert (0, 4, 1) == (code, status["sessions"], status["sessions_gm_only"])
    code = main(["status", "--data", str(tmp_path / "data"), "--json"])  # a player's
    status = json.loads(capsys.readouterr().out)
    assert (0, 4, False) == (code, status["sessions"], "sessions_gm_only" in status)
    assert_no_secret(status, "oracle status")
