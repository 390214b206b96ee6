"""Game-master secrets never reach a player: every form, every path, every output.

A marker sits inside every secret of every form. Each probe is asked as a player through search,
ask (the fake Ollama records every request), who, autocomplete and a thread follow-up: no marker may
appear anywhere. Asked with clearance, each secret is found. Removing a secret and reingesting
leaves it in no store.
"""
from __future__ import annotations

import json
import re
import sqlite3

import pytest
import pytest_asyncio

from oracle.answer.prompt import Turn
from oracle.answer.trace import PLAYER_REASON
from oracle.answer.writer import WITHHELD
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.types import Clearance
from testing.ollama_server import FakeOllama
from tests.conftest import quick_settings, request_kind, write_notes

module_loop = pytest.mark.asyncio(loop_scope="module")

SECRET_CAMPAIGN = {
    "sessions/Session 1.md": """
        ## Session 1 — The Heir's Road
        The party escorted Lady Maren Thorne to the border fort of Kelvor.
        The captain of Kelvor, Osric Vane, asked about [[The_True_Heir|the missing heir]] and the sealed letter.
        %% SECRET-INLINE Osric Vane is paid by the smugglers of the Grey Marsh %%
        They camped by the river and heard bells in the marsh.
    """,
    "sessions/Session 2.md": """
        ## Session 2 — The Sealed Letter
        Maren opened the sealed letter at dawn; it spoke of a debt owed by the old king.
        %%
        SECRET-MULTILINE the letter was forged by Maren herself
        to draw the heir out of hiding
        %%
        The party rode on toward the marsh, where the smugglers of the Grey Marsh keep their boats.
        > [!secret] What the bells mean
        > SECRET-CALLOUT the bells ring when the drowned heir walks
        > under the marsh water at night

        Osric Vane followed them at a distance, as he had since session 1.
        > [!gm]
        > SECRET-GMCALLOUT Osric will betray the party in session five
    """,
    "world/The_True_Heir.md": """
        ---
        visibility: gm
        aliases: [the Hidden Queen]
        ---
        SECRET-VISIBILITY The true heir is Lady Maren Thorne, raised as a merchant's daughter.
        Zarquon Estmere knows it. Zarquon Estmere hid the proof.
    """,
    "world/The_Drowned_Court.md": """
        ---
        gm: true
        ---
        SECRET-GMTRUE The drowned court under the marsh is ruled by the old king's ghost.
    """,
    "gm/Act Two.md": (
        "SECRET-GMFOLDER In act two the smugglers burn the fort of Kelvor, led by Zarquon Estmere,"
        " as planned since session 1.\n"
    ),
    "world/gm/Fort Kelvor Vault.md": "SECRET-NESTED The vault under fort Kelvor holds the crown of the old king.\n",
    "npcs/Osric_Vane.md": """
        ---
        aliases: [the Captain]
        ---
        Captain of the border fort of Kelvor, gruff and tired.
    """,
}

PROBES = {
    "SECRET-INLINE": "Who pays Osric Vane?",
    "SECRET-MULTILINE": "Who forged the sealed letter?",
    "SECRET-CALLOUT": "What do the bells in the marsh mean?",
    "SECRET-GMCALLOUT": "Will Osric betray the party?",
    "SECRET-VISIBILITY": "Who is the true heir?",
    "SECRET-GMTRUE": "Who rules the drowned court under the marsh?",
    "SECRET-GMFOLDER": "What happens to the fort of Kelvor in act two?",
    "SECRET-NESTED": "What is in the vault under fort Kelvor?",
}
SECRET_NAMES = ["Hidden Queen", "Zarquon Estmere"]  # named only in secrets
MARKER = re.compile(r"SECRET-[A-Z]+|Zarquon|Hidden Queen", re.I)


def annotation_or_answer(request: dict) -> object:
    """Annotations echo the passage's first words (so a GM annotation holds its marker);
    reranking keeps the fused order; answers quote every fragment header they were given."""
    user = request["messages"][-1]["content"]
    if request_kind(request) == "annotate":
        passage = user.split("\n\n", 1)[1] if "\n\n" in user else user
        return {"summary": " ".join(passage.split()[:14]), "entities": []}
    if request_kind(request) == "rerank":
        return {"best": [1, 2, 3]}
    labels = re.findall(r"^\[([^\]]+)\] \(", user, re.M)
    return " ".join(f"The notes speak of it [{label}]." for label in labels) or "The notes do not say."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def campaign(tmp_path_factory, embedder):
    from oracle.index.index import Index

    root = tmp_path_factory.mktemp("secrets")
    notes = write_notes(root / "notes", SECRET_CAMPAIGN)
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        fake.responder = annotation_or_answer
        settings = quick_settings(notes, root / "data", fake.url)
        index = Index(settings, embedder=embedder)
        report = await ingest(index)
        assert 0 == report.annotations_missing  # GM chunks annotated too: the guard must hold anyway
        yield index, fake, notes
        await index.close()


def assert_no_secret(thing: object, where: str) -> None:
    text = thing if isinstance(thing, str) else json.dumps(thing, ensure_ascii=False, default=str)
    found = MARKER.findall(text)
    assert [] == found, f"secret text in {where}"


@module_loop
@pytest.mark.parametrize("marker", sorted(PROBES))
async def test_a_player_never_sees_a_secret(campaign, marker):
    index, fake, _ = campaign
    oracle = Oracle(index)
    question = PROBES[marker]

    retrieval = await oracle.search(question)
    assert_no_secret(retrieval.to_json(), "search")

    fake.reset()
    fake.responder = annotation_or_answer
    answer = await oracle.ask(question)
    assert "llm" == answer.mode
    assert_no_secret(answer.to_json(), "the answer and its trace")
    assert_no_secret([r.body for r in fake.requests], "a request to Ollama")

    followup = await oracle.ask("and then what?", history=[Turn("user", question), Turn("assistant", answer.text)])
    assert_no_secret(followup.to_json(), "a follow-up")
    assert_no_secret([r.body for r in fake.requests], "a follow-up's request to Ollama")


@module_loop
async def test_a_player_never_sees_a_secret_through_a_link(campaign, embedder):
    """A pool of one leaves the rest to the hop along references, which run from public sessions to
    game-master notes ([[The_True_Heir]]) and back ("as planned since session 1")."""
    from oracle.index.index import Index

    index, _, _ = campaign
    narrow = Index(index.settings.model_copy(update={"fused_pool": 1}), embedder=embedder)
    try:
        linked = {True: set(), False: set()}
        for question in [*PROBES.values(), "Who escorted Lady Maren Thorne to the border fort?"]:
            for gm in (False, True):
                retrieval = await Oracle(narrow).search(question, k=1, clearance=Clearance.of(gm))
                linked[gm] |= {h.chunk.path for h in retrieval.linked}
                if not gm:
                    assert_no_secret(retrieval.to_json(), "notes linked to the results")
        assert {"sessions/Session 1.md", "sessions/Session 2.md"} <= linked[False]
        assert {"gm/Act Two.md", "world/The_True_Heir.md"} <= linked[True]  # the links are there
    finally:
        await narrow.close()


@module_loop
@pytest.mark.parametrize("marker", sorted(PROBES))
async def test_a_game_master_finds_every_secret(campaign, marker):
    index, _, _ = campaign
    retrieval = await Oracle(index).search(PROBES[marker], clearance=Clearance.GM)
    assert any(marker in h.chunk.text for h in retrieval.fused[:8]), f"{marker} not found with clearance"


@module_loop
async def test_the_compendium_keeps_secret_names_from_players(campaign):
    index, _, _ = campaign
    oracle = Oracle(index)
    for name in SECRET_NAMES:
        assert await oracle.dossiers.who(name) is None
        assert [] == [n for n in await oracle.dossiers.names(name.split()[0]) if MARKER.search(n)]
        assert await oracle.dossiers.who(name, clearance=Clearance.GM) is not None
    everything = await oracle.dossiers.names("", limit=1000)
    assert_no_secret(everything, "autocomplete")
    dossier = await oracle.dossiers.who("Osric Vane")
    assert_no_secret(dossier.to_json(), "a dossier")
    assert ["Session 1", "Session 2"] == [m.label for m in dossier.sessions]


@module_loop
@pytest.mark.parametrize("repeated", [
    "The bells ring when the drowned heir walks under the marsh water at night [Session 2].",
    # Citations, real or made up, inside the secret's words: checking drops the unknown ones.
    "The bells ring when [Session 9] the drowned heir walks [Session 2] under the marsh [Session 99] water at night.",
])
async def test_an_answer_repeating_secret_text_is_withheld(campaign, repeated):
    """The second line: a model that repeats a secret anyway (here, scripted to) is not shown."""
    index, fake, _ = campaign
    fake.responder = lambda request: annotation_or_answer(request) if request.get("format") else repeated
    oracle = Oracle(index)
    before = (await index_status(oracle.index)).gm.withheld.count
    shown: list[str] = []

    async def show(text: str) -> None:
        shown.append(text)

    answer = await oracle.ask("What do the bells mean?", on_text=show)
    fake.responder = annotation_or_answer
    # Nor did they see it while the model wrote it: what they saw stops before the secret's run.
    uncited = [" ".join(re.sub(r"\[[^\]]*\]?", " ", text).split()) for text in shown]
    assert uncited and all("drowned heir walks under the marsh" not in text for text in uncited)
    assert uncited[-1].startswith("The bells ring when the drowned heir")
    # Players read what they read when the model fails: nothing tells them a secret lies there.
    assert ("passages", PLAYER_REASON) == (answer.mode, answer.reason)
    assert "drowned heir walks" not in answer.text
    assert [] == re.findall(r"withh|game.master|secret", json.dumps(answer.to_json()), re.I)
    # The game master's status says what was withheld, and why.
    withheld = (await index_status(oracle.index)).gm.withheld
    assert before + 1 == withheld.count
    assert ("What do the bells mean?", WITHHELD) == (withheld.last[0].question, withheld.last[0].reason)
    player = await index_status(oracle.index, clearance=Clearance.PLAYER)
    assert player.gm is None and "withheld" not in player.to_json()


async def test_a_removed_secret_leaves_no_trace(tmp_path, make_settings, open_index, fake_ollama):
    notes = write_notes(tmp_path / "notes", SECRET_CAMPAIGN)
    fake_ollama.responder = annotation_or_answer
    settings = make_settings(notes, ollama_host=fake_ollama.url)
    index = open_index(settings)
    await ingest(index)
    session = notes / "sessions" / "Session 1.md"
    session.write_text(re.sub(r"%%.*?%%\n", "", session.read_text(), flags=re.S))
    await ingest(index)

    with sqlite3.connect(settings.sqlite_path) as db:
        dump = "\n".join(db.iterdump())
    assert "SECRET-INLINE" not in dump  # chunks, FTS index, annotations, Compendium
    assert "SECRET-MULTILINE" in dump  # the others are still there, GM-only
    vectors = await index.vectors()
    ids, chunk_ids, _ = await vectors.vectors()
    with sqlite3.connect(settings.sqlite_path) as db:
        live = {r[0] for r in db.execute("SELECT id FROM chunks")}
    assert set(chunk_ids) == live  # no window of the removed secret's chunk remains
