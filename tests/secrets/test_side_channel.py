"""A player's ranking owes nothing to game-master text: no side channel through the statistics.

Hiding GM-only chunks from a player's results is not enough: bm25's document frequencies and
average lengths, the keyword path's "common words", the learned fusion's IDF coverage and the entity
path's rarity weights are all counts, and a count over GM text changes a player's scores and order.
A player who watches the scores of public passages move could learn that the game master writes
about a name. So a public campaign is searched as a player, GM-only notes that repeat the same names
and words are added, and the player's results must not change by a single byte (timings aside),
while the game master's do.
"""
from __future__ import annotations

import json
import sqlite3

import pytest
import pytest_asyncio

from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.schema import SCHEMA_VERSION
from oracle.index.store import Store
from oracle.oracle import Oracle
from oracle.retrieve.keyword import TermCounts, common_words
from oracle.retrieve.linked import linked_path
from oracle.types import Clearance
from tests.conftest import closed_port_url, quick_settings, write_notes

module_loop = pytest.mark.asyncio(loop_scope="module")

PLAYER = Clearance.PLAYER
EVERYONE = Clearance.GM

PUBLIC_NOTES = {
    "sessions/Session 1.md": """
        ## Session 1 — The Harbor of Tessel
        The party reached the harbor of Tessel, where Captain Ilsa Marrow sold them passage.
        A one-eyed fisherman warned them about the old lighthouse and its drowned lantern.
    """,
    "sessions/Session 2.md": """
        ## Session 2 — Under the Pier
        Ilsa Marrow led the party under the pier, to the drowned lantern in the silt.
        Teodric found a brass key beside it and kept it.
    """,
    "sessions/Session 3.md": """
        ## Session 3 — The Lantern Vigil
        The party kept vigil by the lighthouse lantern of Tessel with the captain.
        At dawn the harbor bells rang and the tide went out.
    """,
    "sessions/Session 4.md": """
        ## Session 4 — Smoke over the Market
        The market of Tessel burned. The party carried the cartographer Odile Fenn out of the smoke.
        Nobody saw the captain that night.
    """,
    # Two sheets alike word for word but for the ship: a GM note will name one ship, never the other.
    "npcs/Ilsa_Marrow.md": """
        Ilsa Marrow captains the Gull, a fast ship of the southern coast.
    """,
    "npcs/Odile_Fenn.md": """
        Odile Fenn captains the Kite, a fast ship of the southern coast.
    """,
    "world/Tessel.md": """
        # Tessel
        A harbor town of fishermen, smugglers and one old lighthouse.
        The party first landed here in [[Session 1]].
    """,
}

# Appended to Session 3: its public chunk stays the same text, the secret becomes a GM chunk.
SECRET_COMMENT = (
    "%% Ilsa Marrow smuggles through the harbor of Tessel: the Gull carries the lantern oil,"
    " Ilsa Marrow pays the harbor watch, see [[Session 1]] %%\n"
)
SPAM = "Ilsa Marrow sails the Gull into the harbor of Tessel. The Gull hides the lantern oil. "


def gm_notes() -> dict[str, str]:
    """Everything the game master adds: a `visibility: gm` note, a `gm/` folder of plans, and a
    secret comment in a public note; all of them repeat the public names and words."""
    notes = {
        "world/Marrow_Truth.md": "---\nvisibility: gm\naliases: [the Smuggler Queen]\n---\n"
        + SPAM * 6 + "\nShe answers to [[Session 2]].\n",
    }
    for n in range(1, 9):
        notes[f"gm/Plan {n}.md"] = f"Plan {n}: " + SPAM * n + "\n"
    return notes


QUESTIONS = [
    "Who is Ilsa Marrow?",
    "What happened at the harbor of Tessel?",
    "Where is the drowned lantern?",
    "Which ship is the Gull?",
    "What did Teodric find under the pier?",
    "Who was carried out of the smoke?",
]


def without_timings(value):
    """The JSON of a search with every timing taken out: they are the only thing allowed to differ."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if not k.startswith("timings") and not k.endswith("_ms")}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def without_entity_ids(text: str) -> dict:
    """A search's JSON without its entities' ids: the players' and the game master's Compendiums
    number the same entities apart (`Store._write_compendium`)."""
    value = json.loads(text)
    value["entities"] = [{k: v for k, v in e.items() if k != "id"} for e in value["entities"]]
    return value


def oracle_for(index: Index, fusion: str) -> Oracle:
    """An Oracle with the given fusion over the shared index (an Oracle reads its settings when made)."""
    original = index.settings
    index.settings = original.model_copy(update={"fusion": fusion})
    try:
        return Oracle(index)
    finally:
        index.settings = original


async def searches(index: Index, *, gm: bool) -> dict[str, str]:
    """(fusion, question) → the search's JSON, canonical text, for both fusions."""
    out = {}
    for fusion in ("dbsf", "learned"):
        oracle = oracle_for(index, fusion)
        for question in QUESTIONS:
            result = (await oracle.search(question, clearance=Clearance.of(gm))).to_json()
            assert ("evidence" in result) == (fusion == "learned")
            out[f"{fusion}: {question}"] = json.dumps(without_timings(result), sort_keys=True, ensure_ascii=False)
    return out


def rows(index: Index, sql: str, params=()) -> list[tuple]:
    with sqlite3.connect(index.settings.sqlite_path) as db:
        return db.execute(sql, params).fetchall()


async def links(index: Index, *, gm: bool) -> dict[str, list]:
    """The linked stage from each public chunk alone, nothing else found: in a campaign this small
    the paths find every chunk, so a search's own linked list is always empty."""
    store = await index.store()
    seeds = [r[0] for r in rows(index, "SELECT label, id FROM chunks WHERE visibility = 'public' ORDER BY n")]
    ids = dict(rows(index, "SELECT label, id FROM chunks WHERE visibility = 'public'"))
    return {label: await linked_path(store, [ids[label]], EVERYONE if gm else PLAYER, 8) for label in seeds}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def campaign(tmp_path_factory, embedder):
    """The public campaign searched by a player and the game master, then the same with the GM
    notes added and reingested: (index, before, after), each {"player"|"gm": searches}."""
    root = tmp_path_factory.mktemp("side-channel")
    notes = write_notes(root / "notes", PUBLIC_NOTES)
    index = Index(quick_settings(notes, root / "data", closed_port_url()), embedder=embedder)
    await ingest(index)
    before = {"player": await searches(index, gm=False), "gm": await searches(index, gm=True),
              "player links": await links(index, gm=False), "gm links": await links(index, gm=True)}
    store = await index.store()
    before_stats = {
        "public_chunks": await store.count_chunks(PLAYER),
        "ilsa_docs": await store.term_docs(["ilsa", "gull", "kite"]),
    }

    write_notes(notes, gm_notes())
    session3 = notes / "sessions" / "Session 3.md"
    session3.write_text(session3.read_text(encoding="utf-8") + SECRET_COMMENT, encoding="utf-8")
    report = await ingest(index)
    assert "sessions/Session 3.md" in report.changed and len(report.added) == 9
    after = {"player": await searches(index, gm=False), "gm": await searches(index, gm=True),
             "player links": await links(index, gm=False), "gm links": await links(index, gm=True)}
    yield index, before | {"stats": before_stats}, after
    await index.close()


@module_loop
async def test_the_gm_notes_are_indexed_and_secret(campaign):
    index, _, _ = campaign
    by_visibility = dict(rows(index, "SELECT visibility, count(*) FROM chunks GROUP BY visibility"))
    # 7 public notes, one chunk each; 1 + 8 GM notes and the secret comment of Session 3.
    assert {"public": 7, "gm": 10} == by_visibility
    # The public chunk of Session 3 is the one ingested first (same id, same place): the secret
    # comment became a chunk of its own.
    assert [("public", 1, 3), ("gm", 4, 4)] == rows(
        index, "SELECT visibility, start_line, end_line FROM chunks WHERE path = 'sessions/Session 3.md' ORDER BY n"
    )


@module_loop
@pytest.mark.parametrize("fusion", ["dbsf", "learned"])
@pytest.mark.parametrize("question", QUESTIONS)
async def test_a_players_search_is_the_same_with_or_without_gm_notes(campaign, fusion, question):
    _, before, after = campaign
    key = f"{fusion}: {question}"
    assert before["player"][key] == after["player"][key]
    assert "Marrow_Truth" not in after["player"][key] and "Plan " not in after["player"][key]


@module_loop
async def test_every_path_is_compared(campaign):
    """The player's searches compared above run every path: a name (entity), words (keyword), the
    dense windows (semantic), and the references between notes (linked)."""
    index, before, _ = campaign
    player = json.loads(before["player"]["learned: Who is Ilsa Marrow?"])
    assert {"entity": 3, "keyword": 3, "semantic": 7} == {path: len(hits) for path, hits in player["paths"].items()}
    assert [{"matched": "ilsa marrow", "name": "Ilsa Marrow"}] == without_entity_ids(json.dumps(player))["entities"]
    assert 7 == len(player["evidence"])
    # Tessel's note refers to Session 1: each reaches the other, scored 1 / rank / √(references made).
    ids = dict(rows(index, "SELECT label, id FROM chunks WHERE label IN ('Session 1', 'World: Tessel')"))
    found = {label: hits for label, hits in before["player links"].items() if hits}
    assert {"Session 1": [(ids["World: Tessel"], 1.0)], "World: Tessel": [(ids["Session 1"], 1.0)]} == found


@module_loop
async def test_a_players_linked_notes_are_the_same_with_or_without_gm_notes(campaign):
    _, before, after = campaign
    assert before["player links"] == after["player links"]
    assert before["gm links"] == before["player links"]  # no GM text yet
    # The GM notes refer to sessions 1 and 2: the game master's linked stage reaches them.
    assert before["gm links"] != after["gm links"]
    assert sum(len(found) for found in after["gm links"].values()) > sum(len(f) for f in before["gm links"].values())


@module_loop
@pytest.mark.parametrize("fusion", ["dbsf", "learned"])
async def test_the_game_masters_search_does_change(campaign, fusion):
    """Not vacuous: the GM notes are there, and the game master's search finds and counts them."""
    _, before, after = campaign
    for question in QUESTIONS[:4]:  # the questions whose words the GM notes repeat
        key = f"{fusion}: {question}"
        assert before["gm"][key] != after["gm"][key]
        # No GM text yet: the two readers agree, but for the ids of the two Compendiums' entities.
        assert without_entity_ids(before["gm"][key]) == without_entity_ids(before["player"][key])
    gm_keyword = json.loads(after["gm"][f"{fusion}: Which ship is the Gull?"])["paths"]["keyword"]
    assert {"gm/Plan 8.md", "world/Marrow_Truth.md"} <= {h["path"] for h in gm_keyword}


@module_loop
async def test_the_statistics_count_what_the_reader_reads(campaign):
    index, before, _ = campaign
    store = await index.store()
    # A player's counts are those of the public campaign alone, as they were before the GM notes.
    assert 7 == before["stats"]["public_chunks"] == await store.count_chunks(PLAYER)
    assert {"ilsa": 3, "gull": 1, "kite": 1} == before["stats"]["ilsa_docs"]
    assert {"ilsa": 3, "gull": 1, "kite": 1} == await store.term_docs(["ilsa", "gull", "kite"], PLAYER)
    assert {"ilsa": 3, "gull": 1, "kite": 1} == await TermCounts(store, PLAYER).of(["ilsa", "gull", "kite"])
    # The game master's count everything: 9 GM notes and the secret comment name Ilsa and the Gull.
    assert 17 == await store.count_chunks(EVERYONE)
    assert {"ilsa": 13, "gull": 11, "kite": 1} == await store.term_docs(["ilsa", "gull", "kite"], EVERYONE)
    assert {"ilsa": 13, "gull": 11, "kite": 1} == await TermCounts(store, EVERYONE).of(["ilsa", "gull", "kite"])
    # Common words (in over half the chunks), which the keyword path asks last: "harbor" is in 3 of
    # 7 public chunks and 13 of 17 in all, "party" in 4 of 7 public ones and no GM one.
    words = ["harbor", "tessel", "ilsa", "party"]
    assert {"tessel", "party"} == await common_words(store, words, clearance=PLAYER)
    assert {"tessel", "party"} == await common_words(store, words)  # a player's, unless told otherwise
    assert {"harbor", "tessel", "ilsa"} == await common_words(store, words, clearance=EVERYONE)
    # A player's total and counts: never the game master's.
    assert await store.term_docs(["harbor"]) == {"harbor": 3}
    with pytest.raises(ValueError, match="term counts"):
        await common_words(store, words, clearance=PLAYER, counts=TermCounts(store, EVERYONE))


@module_loop
async def test_two_public_sheets_alike_score_alike_whatever_the_gm_writes(campaign):
    """The Gull's sheet and the Kite's are the same words but for the ship; GM notes name the Gull
    eleven times over, never the Kite. A player's bm25 must score the two sheets the same."""
    index, _, _ = campaign
    store = await index.store()
    weights = (index.settings.fts_head_weight, 1.0)
    gull = await store.keyword_search('"Gull"', PLAYER, 5, weights)
    kite = await store.keyword_search('"Kite"', PLAYER, 5, weights)
    assert 1 == len(gull) == len(kite)
    assert gull[0].score == kite[0].score > 0
    # The game master's bm25 counts the GM notes: the Gull is common there, the Kite rare.
    gm_gull = [r for r in await store.keyword_search('"Gull"', EVERYONE, 20, weights) if r.chunk_id == gull[0].chunk_id]
    gm_kite = await store.keyword_search('"Kite"', EVERYONE, 5, weights)
    assert [kite[0].chunk_id] == [r.chunk_id for r in gm_kite]
    assert gm_gull[0].score < gm_kite[0].score


@module_loop
async def test_the_public_fts_table_holds_the_public_chunks_only(campaign):
    index, _, _ = campaign
    public = rows(index, "SELECT n FROM chunks WHERE visibility = 'public' ORDER BY n")
    # Through the index itself (fts5vocab reads no content): every public chunk, and no other.
    with sqlite3.connect(index.settings.sqlite_path) as db:
        db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, public_fts, 'instance')")
        indexed = db.execute("SELECT DISTINCT doc FROM temp.v ORDER BY doc").fetchall()
        smuggles = db.execute("SELECT count(*) FROM temp.v WHERE term = 'smuggl'").fetchone()[0]
        db.execute("INSERT INTO public_fts(public_fts) VALUES ('integrity-check')")
        db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
    assert public == indexed and len(public) == 7
    assert 0 == smuggles  # "smuggles" is in GM text only ("smugglers" in Tessel's sheet stems apart)


def test_chunks_removed_and_added_keep_the_public_table_in_step(tmp_path):
    """The triggers: a public chunk inserted is indexed, a GM one is not; deleting either leaves
    the index as if it had never been there (FTS5's delete needs the old values)."""

    async def run():
        store = await Store.open(tmp_path / "index.sqlite3")
        db = store.db
        columns = ("(id, path, label, kind, part, parts, heading, start_line, end_line, head, text, text_hash, visibility,"
                   " words, kw_head, kw_text)")
        row = "VALUES (?, 'p.md', 'Note: p', 'note', 1, 1, '', 1, 1, 'Note: p', ?, 'h', ?, 3, 'Note: p', ?)"
        for cid, text, visibility in [("a", "ilsa marrow harbor", "public"), ("b", "ilsa ilsa gull", "gm"),
                                      ("c", "odile fenn kite", "public")]:
            await db.execute(f"INSERT INTO chunks {columns} {row}", (cid, text, visibility, text))
        first = (await store.term_docs(["ilsa", "gull", "kite"], PLAYER), await store.term_docs(["ilsa", "gull"], EVERYONE))
        await db.execute("DELETE FROM chunks WHERE id IN ('a', 'b')")
        second = (await store.term_docs(["ilsa", "gull", "kite"], PLAYER), await store.term_docs(["ilsa", "gull"], EVERYONE))
        await db.execute("INSERT INTO public_fts(public_fts) VALUES ('integrity-check')")
        await db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        await store.close()
        return first, second

    import asyncio

    first, second = asyncio.run(run())
    assert ({"ilsa": 1, "kite": 1}, {"ilsa": 2, "gull": 1}) == first
    assert ({"kite": 1}, {}) == second


@module_loop
async def test_an_index_of_the_previous_schema_gets_the_public_table(campaign, tmp_path):
    """A file written at schema 6 (one FTS table over every chunk) is migrated when opened: the
    public table is made and filled from the public chunks, and a player's search is as before."""
    index, _, after = campaign
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(index.settings.sqlite_path) as src, sqlite3.connect(old) as dst:
        src.backup(dst)
    with sqlite3.connect(old) as db:
        db.executescript("""
            DROP TRIGGER public_fts_ai;
            DROP TRIGGER public_fts_ad;
            DROP TRIGGER public_fts_au;
            DROP TABLE public_fts;
            DROP VIEW public_chunks;
            ALTER TABLE chunks DROP COLUMN sessions;
            ALTER TABLE files DROP COLUMN entity;
            ALTER TABLE files DROP COLUMN facts;
            -- Schema 6 searched head and text themselves, not a copy of them.
            DROP TRIGGER chunks_ai;
            DROP TRIGGER chunks_ad;
            DROP TABLE chunks_fts;
            ALTER TABLE chunks DROP COLUMN kw_head;
            ALTER TABLE chunks DROP COLUMN kw_text;
            CREATE VIRTUAL TABLE chunks_fts USING fts5(
                head, text, content='chunks', content_rowid='n', tokenize='porter unicode61 remove_diacritics 2');
            CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
                INSERT INTO chunks_fts(rowid, head, text) VALUES (new.n, new.head, new.text);
            END;
            CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
                INSERT INTO chunks_fts(chunks_fts, rowid, head, text) VALUES ('delete', old.n, old.head, old.text);
            END;
            INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
            PRAGMA user_version = 6;
        """)
        assert not db.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE 'public%'").fetchone()[0]

    store = await Store.open(old)
    try:
        assert {"ilsa": 3, "gull": 1, "kite": 1} == await store.term_docs(["ilsa", "gull", "kite"], PLAYER)
        assert {"ilsa": 13, "gull": 11, "kite": 1} == await store.term_docs(["ilsa", "gull", "kite"], EVERYONE)
        weights = (index.settings.fts_head_weight, 1.0)
        current = await index.store()
        for match in ('"Ilsa"', '"harbor" OR "Tessel"', '"lantern"'):
            assert await current.keyword_search(match, PLAYER, 10, weights) == await store.keyword_search(
                match, PLAYER, 10, weights
            )
    finally:
        await store.close()
    with sqlite3.connect(old) as db:
        assert SCHEMA_VERSION == db.execute("PRAGMA user_version").fetchone()[0] == 10
        db.execute("INSERT INTO public_fts(public_fts) VALUES ('integrity-check')")
        # And it keeps step with the next ingest's writes: a public chunk removed leaves the index.
        db.execute("DELETE FROM chunks WHERE path = 'npcs/Odile_Fenn.md'")
        db.execute("INSERT INTO public_fts(public_fts) VALUES ('integrity-check')")
        assert [] == db.execute("SELECT rowid FROM public_fts WHERE public_fts MATCH 'kite'").fetchall()
        db.rollback()
