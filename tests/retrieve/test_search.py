"""Retrieval end to end: `Oracle.search` over real SQLite, real Chroma and the real bundled model.

The mini campaign is ingested once for the module (`mini`); tests that change an index or need
other notes ingest their own in a temporary folder.
"""
from __future__ import annotations

import json
import math
import sqlite3

import pytest
import pytest_asyncio

from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.store import VisibleAlias
from oracle.oracle import Oracle
from oracle.retrieve.entity import EntityMatcher, entity_path, mention_weight
from oracle.retrieve.keyword import common_words, fts_terms, keyword_path
from oracle.retrieve.retrieval import Retrieval
from oracle.types import GM, PUBLIC, Clearance
from tests.conftest import MINI_CAMPAIGN, closed_port_url, quick_settings, write_notes

module_loop = pytest.mark.asyncio(loop_scope="module")


def fts_query(text: str) -> str:
    """The MATCH the keyword path sends for a question: its terms, quoted, any of them."""
    return " OR ".join(fts_terms(text))

SECRETS = ["SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR"]


def rows(settings, sql, params=()):
    with sqlite3.connect(settings.sqlite_path) as db:
        return db.execute(sql, params).fetchall()


def labels(hits) -> list[str]:
    return [h.chunk.label for h in hits]


def every_hit(r: Retrieval):
    """(where, hit) for each hit of each path, of the fused list and of the linked notes."""
    for name, hits in r.paths.items():
        for h in hits:
            yield name, h
    for h in r.fused:
        yield "fused", h
    for h in r.linked:
        yield "linked", h


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mini(tmp_path_factory, embedder):
    """The mini campaign, ingested once: as `make_settings(mini_notes)` + `open_index` would build it."""
    root = tmp_path_factory.mktemp("mini")
    notes = write_notes(root / "notes", MINI_CAMPAIGN)
    index = Index(quick_settings(notes, root / "data", closed_port_url()), embedder=embedder)
    await ingest(index)
    yield index
    await index.close()


@pytest.fixture(scope="module")
def chunk_table(mini):
    """id → (label, visibility, text) of every chunk of the mini campaign."""
    return {r[0]: r[1:] for r in rows(mini.settings, "SELECT id, label, visibility, text FROM chunks")}


# ---------------------------------------------------------------------------------------------
# FTS safety: no question breaks MATCH

HOSTILE = [
    "Who is Vex?",
    "Vex's blade",
    "half-elf",
    '"unbalanced quote',
    "NEAR(a b)",
    "a AND OR NOT",
    "col:value",
    "^start",
    "*",
    "'; DROP TABLE chunks; --",
    "(((",
    "",
    "🐉🎲🔥",
    "?!.,;:-()[]{}",
    ("Who is Vex and why does she carry the blade? " * 30)[:1000],
    "x" * 1000,
    "\x00\x1b",
    "Who is Vex?\x00\x1b",
    "Кто такой Векс и где его клинок?",
    "ヴェックスは誰ですか？",
]


@module_loop
@pytest.mark.parametrize("question", HOSTILE)
async def test_no_question_breaks_the_search(mini, question):
    oracle = Oracle(mini)
    for gm in (False, True):
        result = await oracle.search(question, clearance=Clearance.of(gm))
        assert question == result.question
    match = fts_query(question)
    if match:
        with sqlite3.connect(mini.settings.sqlite_path) as db:  # a valid MATCH on the real store
            db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (match,)).fetchone()
    else:
        assert [] == result.paths["keyword"]
    assert 12 == rows(mini.settings, "SELECT count(*) FROM chunks")[0][0]  # nothing dropped


def test_fts_terms_are_quoted_literals():
    assert ['"Vex"'] == fts_terms("Who is Vex?")
    assert ['"Vex"', '"blade"'] == fts_terms("Vex's blade")
    assert ['"half-elf"'] == fts_terms("half-elf")
    assert ['"NEAR(a"', '"b"'] == fts_terms("NEAR(a b)")
    assert ['"DROP"', '"TABLE"', '"chunks"'] == fts_terms("'; DROP TABLE chunks; --")
    assert ['"4:12"'] == fts_terms("4:12")
    assert ['"a"', '"and"', '"then"'] == fts_terms("a and then")  # only stopwords: all are kept
    assert [] == fts_terms("(((") == fts_terms("*") == fts_terms("🐉") == fts_terms("")


@module_loop
async def test_a_nul_inside_a_word_does_not_break_the_search(mini):
    question = "Who is Ve\x00x?"
    with sqlite3.connect(mini.settings.sqlite_path) as db:
        db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (fts_query(question),)).fetchone()
    await Oracle(mini).search(question)


# ---------------------------------------------------------------------------------------------
# keyword path


@module_loop
@pytest.mark.parametrize("question", ["4:12", "entry 4:12", "Saltmarsh ledger", "the Saltmarsh ledger?"])
async def test_keyword_path_keeps_literal_terms(mini, question):
    result = await Oracle(mini).search(question)
    assert "Session 4" == result.paths["keyword"][0].chunk.label


def chunks_matching(settings, term: str) -> int:
    return rows(settings, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (f'"{term}"',))[0][0]


PARTY_LOG = {
    f"sessions/Session {n}.md": f"The party {what}." + (" The party counted the loot." if n % 2 else "")
    for n, what in enumerate(
        ["met the ferryman", "lost the ledger in the river", "crossed the ford", "burned the ledger",
         "slept at the mill", "argued about the map"], 1
    )
}


async def test_terms_in_most_chunks_are_left_out_of_the_keyword_query(tmp_path, make_settings, open_index):
    index = open_index(make_settings(write_notes(tmp_path / "notes", PARTY_LOG)))
    await ingest(index)
    settings, store = index.settings, await index.store()
    words = ["the", "party", "parties", "loot", "ledger", "ledgers", "nowhere"]
    total = rows(settings, "SELECT count(*) FROM chunks")[0][0]
    expected = {w for w in words if chunks_matching(settings, w) > total / 2}
    assert expected == {"the", "party", "parties"}  # loot: exactly half, kept; stemmed as the index is
    assert await common_words(store, words) == expected

    # Asked first without them: enough chunks found, and they are the full question's best.
    question = "What did the party do with the ledger?"
    weights = (settings.fts_head_weight, 1.0)
    full = [(r.chunk_id, r.score) for r in await store.keyword_search(fts_query(question), Clearance.PLAYER, 16, weights)]
    assert len(full) == 6 and {"Session 2", "Session 4"} == {
        c.label for c in await store.chunks_by_ids([cid for cid, _ in full[:2]])
    }
    assert [cid for cid, _ in await keyword_path(store, question, Clearance.PLAYER, 2, weights)] == [cid for cid, _ in full[:2]]
    # Too few: the full question ranks the tail by the common terms, as it always did.
    assert await keyword_path(store, question, Clearance.PLAYER, 16, weights) == full

    # Nothing but common terms: they are searched after all.
    assert len((await Oracle(index).search("the party")).paths["keyword"]) == 6


@module_loop
@pytest.mark.parametrize(
    ("question", "label"),
    [("Who was ambushing people at fords?", "campaign-log › Session 2"), ("cartographers", "Sheet: Mirela_Vane"),
     ("ambushed", "campaign-log › Session 2"), ("ledgers", "Session 4")],
)
async def test_keyword_path_finds_other_forms_of_a_word(mini, question, label):
    result = await Oracle(mini).search(question)
    assert label == result.paths["keyword"][0].chunk.label


@module_loop
@pytest.mark.parametrize("question", ["Sesion", "sesión", "SESIÓN 3"])
async def test_keyword_path_ignores_diacritics(mini, question):
    result = await Oracle(mini).search(question)
    top = result.paths["keyword"][0].chunk
    assert ("campaign-log › Session 3", PUBLIC, (3,)) == (top.label, top.visibility, top.sessions)
    assert "Sesión 3" in top.text


# ---------------------------------------------------------------------------------------------
# entity path


def mentioning(settings, name: str, visibility: str = PUBLIC) -> set[str]:
    return {
        r[0]
        for r in rows(
            settings,
            "SELECT m.chunk_id FROM mentions m JOIN entities e ON e.id = m.entity_id"
            " JOIN chunks c ON c.id = m.chunk_id WHERE e.name = ? AND m.visibility = ? AND c.visibility = ?",
            (name, visibility, visibility),
        )
    }


@module_loop
async def test_entity_path_matches_an_alias(mini):
    result = await Oracle(mini).search("What did the Candle Monk sell?")

    assert [("Brother Aldous", "candle monk")] == [(e.name, e.matched) for e in result.entities]
    entity = result.paths["entity"]
    assert "Sheet: Brother_Aldous" == entity[0].chunk.label  # his own note first
    assert mentioning(mini.settings, "Brother Aldous") == {h.chunk.id for h in entity}
    assert {"Sheet: Brother_Aldous", "campaign-log › Session 1", "Session 4"} == set(labels(entity))


@module_loop
@pytest.mark.parametrize(
    "question",
    ["what about old wick's candles?", "OLD WICK’S CANDLES", "Öld Wíck's candles", "did old wick sell it"],
)
async def test_entity_matching_ignores_case_accents_and_possessives(mini, question):
    result = await Oracle(mini).search(question)
    assert ["Brother Aldous"] == [e.name for e in result.entities]
    assert mentioning(mini.settings, "Brother Aldous") == {h.chunk.id for h in result.paths["entity"]}


@module_loop
@pytest.mark.parametrize("question, name", [("what did Mirla buy?", "Mirela Vane"), ("who is Teodrik?", "Teodric")])
async def test_entity_matching_tolerates_a_small_typo(mini, question, name):
    result = await Oracle(mini).search(question)
    assert [name] == [e.name for e in result.entities]
    assert mentioning(mini.settings, name) == {h.chunk.id for h in result.paths["entity"]}


@module_loop
@pytest.mark.parametrize("question", ["What did Aldus sell?", "What did Aldous sell?"])
async def test_entity_matching_finds_a_misspelt_given_name(mini, question):
    result = await Oracle(mini).search(question)
    assert ["Brother Aldous"] == [e.name for e in result.entities]
    assert "Sheet: Brother_Aldous" == result.paths["entity"][0].chunk.label


def test_a_title_alone_names_the_one_entity_it_ends():
    matcher = EntityMatcher([
        VisibleAlias(1, "lost archduke", "Orrin Valcastre", "npcs/Orrin_Valcastre.md"),
        VisibleAlias(2, "candle monk", "Brother Aldous", "npcs/Brother_Aldous.md"),
        VisibleAlias(3, "grey monk", "Brother Cael", None),
        VisibleAlias(4, "mourning lantern", "Mourning Lantern", None),
        VisibleAlias(5, "lantern", "Lantern", None),
        VisibleAlias(6, "darrington name", "Darrington Name", None),
        VisibleAlias(7, "vecna defeated", "Vecna Defeated", None),
    ])
    assert [(e.name, e.matched) for e in matcher.find("Where did the missing archduke go?")] == [
        ("Orrin Valcastre", "archduke")
    ]
    assert matcher.find("what did the monk say?") == []  # two monks: neither
    assert [e.name for e in matcher.find("who lit the lantern?")] == ["Lantern"]  # a name of its own wins
    assert [e.name for e in matcher.find("the candle monk")] == ["Brother Aldous"]
    # Names found only in running text have no note: their last words stay common words.
    assert matcher.find("what was the name of his gun?") == []
    assert matcher.find("how did they defeat him?") == []


@module_loop
async def test_a_title_alone_respects_visibility(mini):
    # "the Lost Prince" is a GM-only alias: its last word names nobody for a player.
    assert [e.name for e in (await Oracle(mini).search("who is the prince?", clearance=Clearance.GM)).entities] == ["The True Heir"]
    assert (await Oracle(mini).search("who is the prince?")).entities == []


RARE_CAMPAIGN = {
    **{f"sessions/Session {i}.md": f"Kestrel scouted the road north of the village on day {i}." for i in range(1, 11)},
    # Kestrel five times: a score that counted mentions without rarity would put this session first.
    "sessions/Session 3.md": "Kestrel argued with the guard. Kestrel lost the bet. Kestrel paid. Kestrel sulked. Kestrel slept.",
    "sessions/Session 7.md": "Kestrel met Orsolya Brandt at the mill; she sold him a map of the marsh.",
    "compendium.md": """
        ---
        entities:
          - name: Kestrel
            kind: pc
          - name: Orsolya Brandt
            kind: npc
        ---
    """,
}


async def test_an_everywhere_character_does_not_push_out_a_rare_one(tmp_path, make_settings, open_index):
    settings = make_settings(write_notes(tmp_path / "rare", RARE_CAMPAIGN))
    index = open_index(settings)
    await ingest(index)
    assert 10 == len(mentioning(settings, "Kestrel"))
    assert 1 == len(mentioning(settings, "Orsolya Brandt"))

    oracle = Oracle(index)
    for k in (1, 8):
        result = await oracle.search("What did Kestrel and Orsolya Brandt talk about?", k=k)
        assert {"Kestrel", "Orsolya Brandt"} == {e.name for e in result.entities}
        assert "Session 7" == result.paths["entity"][0].chunk.label
        assert "Session 7" == result.fused[0].chunk.label


async def test_entity_counts_are_kept_per_index_and_clearance(tmp_path, make_settings, open_index):
    notes = write_notes(tmp_path / "rare", RARE_CAMPAIGN)
    settings = make_settings(notes)
    index = open_index(settings)
    await ingest(index)
    oracle = Oracle(index)
    question = "What did Kestrel and Orsolya Brandt talk about?"
    await oracle.search(question)
    matcher, stats = await oracle.matchers.lookup(Clearance.PLAYER)
    ids = {e.name: e.entity_id for e in matcher.find(question)}
    assert (10, {ids["Kestrel"]: 10, ids["Orsolya Brandt"]: 1}) == (stats.total, stats.df)
    assert (await oracle.matchers.lookup(Clearance.PLAYER))[1] is stats  # the same index: read once

    write_notes(notes, {
        "sessions/Session 11.md": "Orsolya Brandt came back with the map.",
        "gm/Orsolya.md": "Orsolya Brandt spies for the Margrave.",
    })
    await ingest(index)
    player = await oracle.search(question)
    await oracle.search(question, clearance=Clearance.GM)
    matcher, new = await oracle.matchers.lookup(Clearance.PLAYER)
    gm_matcher, gm = await oracle.matchers.lookup(Clearance.GM)
    orsolya = next(e.entity_id for e in matcher.find(question) if e.name == "Orsolya Brandt")
    # The game master's Compendium is another, with ids of its own.
    gm_orsolya = next(e.entity_id for e in gm_matcher.find(question) if e.name == "Orsolya Brandt")
    assert (11, 2) == (new.total, new.df[orsolya])
    assert (12, 3) == (gm.total, gm.df[gm_orsolya])
    assert (10, 1) == (stats.total, stats.df[ids["Orsolya Brandt"]])  # the old index's, left alone
    # The kept counts give what counting afresh gives.
    store = await index.store()
    fresh = await entity_path(store, player.entities, Clearance.PLAYER, 16)
    assert [(h.chunk.id, h.score) for h in player.paths["entity"]] == [tuple(x) for x in fresh]
    assert "Session 11" in labels(player.paths["entity"])


def entity_scores_by_hand(settings, weights, visibility=PUBLIC) -> dict[str, float]:
    """The entity path's score, from the mentions table, one row at a time in Python."""
    scores: dict[str, float] = {}
    for entity_id, idf, own, only_own in weights:
        for chunk_id, count, path in rows(
            settings,
            "SELECT m.chunk_id, m.count, c.path FROM mentions m JOIN chunks c ON c.id = m.chunk_id"
            " WHERE m.entity_id = ? AND m.visibility = ? AND c.visibility = ?",
            (entity_id, visibility, visibility),
        ):
            if only_own and path != own:
                continue
            bonus = 2 * idf + 1 if path == own else 0.0
            scores[chunk_id] = scores.get(chunk_id, 0.0) + idf * (1 + math.log(max(count, 1))) + bonus
    return scores


@module_loop
async def test_entity_scores_are_the_documented_sum(mini):
    store = await mini.store()
    ids = {name: rows(mini.settings, "SELECT id, note_path FROM entities WHERE name = ?", (name,))[0]
           for name in ("Brother Aldous", "Mirela Vane", "Dunstan Vale")}
    weights = [
        (ids["Brother Aldous"][0], 1.7, ids["Brother Aldous"][1], False),
        (ids["Mirela Vane"][0], 0.4, ids["Mirela Vane"][1], True),  # everywhere: own note only
        (ids["Dunstan Vale"][0], 1.1, None, False),
    ]
    expected = entity_scores_by_hand(mini.settings, weights)

    async def entity_scores(limit):
        rows = await store.mention_scores([mention_weight(*w) for w in weights], Clearance.PLAYER, limit)
        return [(r.chunk_id, r.score) for r in rows]

    got = await entity_scores(40)
    assert len(expected) >= 4
    assert dict(got) == pytest.approx(expected)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    assert await entity_scores(2) == got[:2]

    # A SQLite built without math functions gets Python's ln: the same scores.
    await store.db.create_function("ln", 1, math.log, deterministic=True)
    assert dict(await entity_scores(40)) == pytest.approx(dict(got))


# ---------------------------------------------------------------------------------------------
# semantic path

LONG_SESSION = "## Session 9 — The Long Night\n" + " ".join(
    f"Mirela counted star number {i} above the Saltmarsh." for i in range(120)
)


async def test_semantic_path_collapses_windows_to_chunks(mini_notes, make_settings, open_index):
    (mini_notes / "sessions" / "Session 9.md").write_text(LONG_SESSION)
    settings = make_settings(mini_notes)
    index = open_index(settings)
    await ingest(index)
    [long_id] = [r[0] for r in rows(settings, "SELECT id FROM chunks WHERE label = 'Session 9'")]
    question = "How many stars did Mirela count above the Saltmarsh?"
    # The dense store holds several windows of that one chunk, and returns them.
    vectors, embedder = await index.vectors(), await index.embedder()
    dense = await vectors.query(await embedder.encode_query(question), 40, visibility=PUBLIC)
    assert [h.chunk_id for h in dense].count(long_id) > 1

    result = await Oracle(index).search(question)
    for name, hits in result.paths.items():
        chunk_ids = [h.chunk.id for h in hits]
        assert len(set(chunk_ids)) == len(chunk_ids), name
    assert [h.chunk.id for h in result.fused].count(long_id) == 1
    assert long_id == result.paths["semantic"][0].chunk.id


async def test_semantic_path_fills_its_depth_when_long_sessions_fill_the_first_windows(
    mini_notes, make_settings, open_index
):
    for n in range(5, 9):  # four long sessions of a dozen windows each, all about the question
        (mini_notes / "sessions" / f"Session {n}.md").write_text(LONG_SESSION.replace("Session 9", f"Session {n}"))
    settings = make_settings(mini_notes)
    index = open_index(settings)
    await ingest(index)
    question = "How many stars did Mirela count above the Saltmarsh?"
    vectors, embedder = await index.vectors(), await index.embedder()
    first = await vectors.query(await embedder.encode_query(question), 6 * 8, visibility=PUBLIC)  # k = 1: depth 6
    assert len({h.chunk_id for h in first}) < 6  # the first ask holds fewer chunks than the depth

    result = await Oracle(index).search(question, k=1)
    semantic = [h.chunk.label for h in result.paths["semantic"]]
    assert len(semantic) == 6 == len(set(h.chunk.id for h in result.paths["semantic"]))
    assert {"Session 5", "Session 6", "Session 7", "Session 8"} == set(semantic[:4])


async def test_a_dense_hit_whose_chunk_sqlite_lacks_is_dropped(mini_notes, make_settings, open_index):
    settings = make_settings(mini_notes)
    index = open_index(settings)
    await ingest(index)
    question = "What did the Candle Monk sell to Mirela?"
    [gone] = [r[0] for r in rows(
        settings, "SELECT id FROM chunks WHERE label = 'campaign-log › Session 1' AND visibility = 'public'")]
    before = await Oracle(index).search(question)
    assert gone == before.paths["semantic"][0].chunk.id

    with sqlite3.connect(settings.sqlite_path) as db:  # a half-finished ingest: Chroma still has its windows
        db.execute("DELETE FROM chunks WHERE id = ?", (gone,))
    vectors, embedder = await index.vectors(), await index.embedder()
    assert gone in {h.chunk_id for h in await vectors.query(await embedder.encode_query(question), 40)}

    for gm in (False, True):
        result = await Oracle(index).search(question, clearance=Clearance.of(gm))
        assert gone not in {h.chunk.id for _, h in every_hit(result)}
        assert gone not in json.dumps(result.to_json())
        assert result.paths["semantic"]  # the other chunks are still found


# ---------------------------------------------------------------------------------------------
# visibility

PROBES = {
    "SECRET-COMPASS": ["Who does the compass belong to?", "What is the brass compass really?", "SECRET-COMPASS"],
    "SECRET-PIP": ["Who does Pip work for?", "What does Pip hide?", "SECRET-PIP"],
    "SECRET-PLANS": ["Who will betray the Hollow King?", "What are Dunstan Vale's plans for act two?", "SECRET-PLANS"],
    "SECRET-HEIR": ["Who is the lost prince?", "Is Pip the true heir?", "SECRET-HEIR"],
}


@module_loop
@pytest.mark.parametrize("marker", SECRETS)
async def test_a_player_never_sees_a_gm_chunk(mini, chunk_table, marker):
    gm_ids = {cid for cid, (_, visibility, _) in chunk_table.items() if visibility == GM}
    assert any(marker in text for _, visibility, text in chunk_table.values() if visibility == GM)
    oracle = Oracle(mini)
    for question in PROBES[marker]:
        result = await oracle.search(question, clearance=Clearance.PLAYER)
        assert result.fused
        for where, hit in every_hit(result):
            assert PUBLIC == hit.chunk.visibility, (question, where)
            assert hit.chunk.id not in gm_ids, (question, where)
            assert not any(s in hit.chunk.text for s in SECRETS), (question, where)
        shown = result.to_json()
        assert not any(s in json.dumps([shown["paths"], shown["fused"], shown["linked"]]) for s in SECRETS)
        assert "The True Heir" not in {e.name for e in result.entities}  # a GM-only entity and alias


@module_loop
@pytest.mark.parametrize("marker", SECRETS)
async def test_the_gm_finds_each_secret(mini, chunk_table, marker):
    [secret_id] = [cid for cid, (_, visibility, text) in chunk_table.items() if marker in text]
    assert GM == chunk_table[secret_id][1]
    result = await Oracle(mini).search(PROBES[marker][0], clearance=Clearance.GM)
    assert secret_id in [h.chunk.id for h in result.fused][:3]


# ---------------------------------------------------------------------------------------------
# follow-up


@module_loop
async def test_a_follow_up_is_searched_with_the_previous_turn(mini):
    oracle = Oracle(mini)
    previous = "Who ambushed Mirela at the ford?"

    followed = await oracle.search("and then what?", history=["Who is Mirela?", previous, ""])
    assert "and then what?" == followed.question
    assert previous in followed.search_query
    assert f"Who is Mirela? {previous} and then what?" == followed.search_query  # the thread's opener too
    assert ["Mirela Vane"] == [e.name for e in followed.entities]  # matched in the expanded query
    assert "campaign-log › Session 2" in labels(followed.fused)[:3]
    assert "campaign-log › Session 2" == followed.paths["keyword"][0].chunk.label
    assert "campaign-log › Session 2" == followed.paths["semantic"][0].chunk.label

    alone = await oracle.search("and then what?")
    assert "and then what?" == alone.search_query
    assert [] == alone.entities == alone.paths["entity"]
    # Without the history the question carries no meaning: the ambush is not what it is near.
    assert "campaign-log › Session 2" not in labels(alone.paths["semantic"])[:3]
    # (Session 2 still leads the keyword path here, on the bare word "and": a question of stopwords
    # only searches its stopwords, by design.)


@module_loop
async def test_a_short_follow_up_naming_an_entity_is_not_expanded_unless_it_opens_with_a_connective(mini):
    history = ["Who ambushed Mirela at the ford?"]
    result = await Oracle(mini).search("what did old wick sell?", history=history)
    assert "what did old wick sell?" == result.search_query
    assert ["Brother Aldous"] == [e.name for e in result.entities]
    result = await Oracle(mini).search("and old wick?", history=history)  # the previous question, of him
    assert "Who ambushed Mirela at the ford? and old wick?" == result.search_query
    assert "Brother Aldous" in [e.name for e in result.entities]


# ---------------------------------------------------------------------------------------------
# sizes


@module_loop
@pytest.mark.parametrize("k", [1, 2, 8])
@pytest.mark.parametrize("gm", [False, True])
async def test_each_path_returns_at_most_its_depth(mini, k, gm):
    visible = 12 if gm else 8
    depth = max(2 * k, k + 5)
    result = await Oracle(mini).search("Mirela Saltmarsh compass candle ledger monk", k=k, clearance=Clearance.of(gm))
    assert {"keyword", "semantic", "entity"} == set(result.paths)
    for name, hits in result.paths.items():
        assert len(hits) <= depth, name
        assert list(range(1, len(hits) + 1)) == [h.rank for h in hits]
    assert min(depth, visible) == len(result.paths["semantic"])  # every chunk is near enough
    assert len(result.fused) <= mini.settings.fused_pool == 40
    assert len({h.chunk.id for _, h in every_hit(result)}) == len(result.fused)


async def test_fused_pool_caps_the_fused_list(mini_notes, make_settings, open_index):
    index = open_index(make_settings(mini_notes, fused_pool=3))
    await ingest(index)
    result = await Oracle(index).search("What did the Candle Monk sell to Mirela?")
    assert 3 == len(result.fused)
    assert [1, 2, 3] == [h.rank for h in result.fused]
    assert len({h.chunk.id for hits in result.paths.values() for h in hits}) > 3


# ---------------------------------------------------------------------------------------------
# trace


@module_loop
async def test_retrieval_json_shape(mini):
    result = await Oracle(mini).search("What did the Candle Monk sell?")
    data = json.loads(json.dumps(result.to_json()))

    assert {"question", "search_query", "entities", "paths", "fused", "linked", "union", "overlap", "timings_ms"} == set(
        data
    )
    assert ("What did the Candle Monk sell?", "What did the Candle Monk sell?") == (
        data["question"], data["search_query"])
    assert [{"id", "name", "matched"}] == [set(e) for e in data["entities"]]
    assert {"keyword", "semantic", "entity"} == set(data["paths"])
    hits = [h for hits in data["paths"].values() for h in hits] + data["fused"] + data["linked"]
    assert hits
    for hit in hits:
        assert {"id", "label", "path", "lines", "rank", "score", "text"} == set(hit)
        assert 2 == len(hit["lines"]) and hit["lines"][0] <= hit["lines"][1]
    assert len({h["id"] for hits in data["paths"].values() for h in hits}) == data["union"]
    assert {"entity&keyword", "entity&semantic", "keyword&semantic"} == set(data["overlap"])
    assert {"expand", "keyword", "semantic", "entity", "fusion", "load", "linked", "total"} <= set(data["timings_ms"])
