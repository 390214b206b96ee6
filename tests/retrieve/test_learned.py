"""The learned fusion: its features (pure, by hand, then over a real index), its JSON model, the
fallback when the model cannot be read, and ORACLE_FUSION=learned through `Oracle.search`.

Integration tests use the mini campaign over real SQLite, real Chroma and the real bundled model.
"""
from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import pytest_asyncio

from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.store import Store
from oracle.oracle import Oracle
from oracle.retrieve.entity import EntityMatch
from oracle.retrieve.evidence import (
    FEATURES,
    Terms,
    build_features,
    head_matcher,
    path_features,
    query_stems,
    question_terms,
)
from oracle.retrieve.fusion import Fused, dbsf, weigh_kinds
from oracle.retrieve.keyword import TermCounts
from oracle.retrieve.learned import (
    DEFAULT_MODEL,
    FORMAT,
    VERSION,
    LearnedRanker,
    load_ranker,
)
from oracle.types import Chunk, Clearance
from tests.conftest import MINI_CAMPAIGN, closed_port_url, quick_settings, write_notes

module_loop = pytest.mark.asyncio(loop_scope="module")


def chunk(cid: str, label: str, kind: str, text: str = "x" * 99, heading: str = "", path: str = "") -> Chunk:
    return Chunk(cid, path or f"{cid}.md", label, kind, 1, 1, heading, 1, 1, text, "h")


def feature(rows: np.ndarray, i: int, name: str) -> float:
    return float(rows[i, FEATURES.index(name)])


def model_data(weights: dict[str, float], mean: float = 0.0, scale: float = 1.0) -> dict:
    return {
        "format": FORMAT, "version": VERSION, "kind": "linear", "features": list(FEATURES),
        "weights": [weights.get(name, 0.0) for name in FEATURES],
        "mean": [mean] * len(FEATURES), "scale": [scale] * len(FEATURES),
    }


# ---------------------------------------------------------------------------------------------
# Features, pure


def test_path_features_by_hand():
    # Scores 3 and 1: mean 2, σ 1, so DBSF's range is [−1, 5]: 3 → 4/6, 1 → 2/6. Two hits: ln 3.
    out = path_features([("a", 3.0), ("b", 1.0)])

    assert pytest.approx((1.0, 1.0, 1.0, 4 / 6, 1.0)) == out["a"]
    assert pytest.approx((1.0, 0.5, 1 - math.log(2) / math.log(3), 2 / 6, 1 / 3)) == out["b"]
    assert {} == path_features([])
    # Three equal scores: σ = 0, each is 1 (their float mean is an ulp off 0.1, σ must not be).
    assert {1.0} == {row[3] for row in path_features([(c, 0.1) for c in "xyz"]).values()}


def test_a_repeated_id_keeps_its_first_rank():
    out = path_features([("a", 2.0), ("a", 2.0)])  # equal scores: σ = 0, every score normalises to 1
    assert pytest.approx((1.0, 1.0, 1.0, 1.0, 1.0)) == out["a"]


def test_question_terms_keep_the_rarer_half_rarest_first_with_bm25_idf():
    terms = question_terms(10, {"archduk": 1, "chapel": 3, "parti": 9}, {"archduke": "archduk", "chapel": "chapel",
                                                                        "party": "parti", "zzz": "zzz"})

    assert ("archduke", "chapel") == terms.words  # "party" is in 9 of 10 chunks, "zzz" in none
    assert pytest.approx((math.log(1 + 9.5 / 1.5), math.log(1 + 7.5 / 3.5))) == terms.idf


def test_build_features_by_hand():
    chunks = {
        "s1": chunk("s1", "Session 1", "session", "y" * 999, heading="Session 1 — The Lantern Market"),
        "mira": chunk("mira", "Sheet: Mirela_Vane", "sheet", path="sheets/Mirela_Vane.md"),
        "w": chunk("w", "World: GODS", "world"),
    }
    scored = {"keyword": [("s1", 4.0), ("w", 2.0)], "semantic": [("mira", 0.5), ("s1", 0.25)], "entity": [("mira", 3.0)]}
    fused = [Fused("s1", 2.0, ()), Fused("mira", 1.5, ()), Fused("w", 0.5, ())]
    terms = Terms(("compass", "brass"), (2.0, 1.0))
    mirela = EntityMatch(1, "Mirela Vane", "mira", "sheets/Mirela_Vane.md")
    rows = build_features(
        ["s1", "mira", "w"], scored, {"mira": (0.5, 0.4), "s1": (0.25,)}, chunks, [mirela], terms,
        {"s1": {0, 1}, "w": {1}}, {"s1"}, {"w"}, fused,
    )

    assert (3, len(FEATURES)) == rows.shape
    assert [1.0, 0.0, 1.0] == [feature(rows, i, "keyword_found") for i in range(3)]
    assert [1.0, 0.0, 0.5] == [feature(rows, i, "keyword_rr") for i in range(3)]
    assert [0.5, 1.0, 0.0] == [feature(rows, i, "semantic_rr") for i in range(3)]
    assert [0.25, 0.5, 0.0] == [feature(rows, i, "semantic_best") for i in range(3)]
    assert [0.0, 0.4, 0.0] == [feature(rows, i, "semantic_second") for i in range(3)]
    assert [-0.25, 0.0, -1.0] == [feature(rows, i, "semantic_gap") for i in range(3)]  # −1: no window came back
    assert pytest.approx([math.log(2), math.log(3), 0.0]) == [feature(rows, i, "semantic_windows") for i in range(3)]
    assert pytest.approx([1.0, 0.0, 1 / 3]) == [feature(rows, i, "coverage_idf") for i in range(3)]
    assert [1.0, 0.0, 0.5] == [feature(rows, i, "coverage") for i in range(3)]
    assert pytest.approx([0.0, -1.0, -2 / 3]) == [feature(rows, i, "coverage_gap") for i in range(3)]
    assert [1.0, 0.0, 0.0] == [feature(rows, i, "proximity") for i in range(3)]
    assert [0.0, 1.0, 0.0] == [feature(rows, i, "entity_in_head") for i in range(3)]  # its own note
    assert [0.0, 0.0, 1.0] == [feature(rows, i, "linked") for i in range(3)]
    assert [1.0, 0.0, 0.0] == [feature(rows, i, "kind_session") for i in range(3)]
    assert [0.0, 1.0, 0.0] == [feature(rows, i, "kind_sheet") for i in range(3)]
    assert [0.0, 0.0, 1.0] == [feature(rows, i, "kind_world") for i in range(3)]
    assert pytest.approx([math.log(1000), math.log(100), math.log(100)]) == [feature(rows, i, "log_chars") for i in range(3)]
    assert [2.0, 2.0, 1.0] == [feature(rows, i, "paths_agree") for i in range(3)]
    assert [1.0, 0.75, 0.25] == [feature(rows, i, "fused_score") for i in range(3)]
    assert [1.0, 0.5, 1 / 3] == [feature(rows, i, "fused_rr") for i in range(3)]


# ---------------------------------------------------------------------------------------------
# The model


def test_a_json_model_scores_by_its_coefficients():
    data = model_data({"keyword_rr": 2.0, "kind_sheet": -1.0}, mean=0.5, scale=2.0)
    ranker = LearnedRanker.from_json(json.loads(json.dumps(data)))
    rows = np.zeros((2, len(FEATURES)))
    rows[0, FEATURES.index("keyword_rr")] = 1.0
    rows[1, FEATURES.index("kind_sheet")] = 1.0

    # Σ w·(x − 0.5)/2 over the two weighted features.
    assert pytest.approx([2 * 0.25 - 1 * -0.25, 2 * -0.25 - 1 * 0.25]) == list(ranker.score(rows))


def test_the_shipped_model_loads_and_matches_the_features():
    ranker = LearnedRanker.load(DEFAULT_MODEL)
    assert (len(FEATURES),) == ranker.weights.shape


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{not json",
        json.dumps({"format": "something else"}),
        json.dumps(model_data({}) | {"features": list(FEATURES)[:-1]}),
        json.dumps(model_data({}) | {"weights": ["a"] * len(FEATURES)}),
        json.dumps(model_data({}) | {"scale": [0.0] * len(FEATURES)}),
        json.dumps(model_data({}) | {"kind": "trees"}),
    ],
    ids=["empty", "not-json", "other-format", "other-features", "not-numbers", "zero-scale", "unknown-kind"],
)
def test_an_unreadable_model_is_refused_with_a_warning(tmp_path, caplog, content):
    path = tmp_path / "model.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="oracle.retrieve.learned"):
        assert load_ranker(path) is None
    assert "using the current fusion" in caplog.text


def test_a_missing_model_is_refused_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="oracle.retrieve.learned"):
        assert load_ranker(tmp_path / "absent.json") is None
    assert "absent.json" in caplog.text


# ---------------------------------------------------------------------------------------------
# Over a real index


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mini(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("learned")
    notes = write_notes(root / "notes", MINI_CAMPAIGN)
    index = Index(quick_settings(notes, root / "data", closed_port_url()), embedder=embedder)
    await ingest(index)
    yield index
    await index.close()


def oracle_for(index: Index, **overrides) -> Oracle:
    """An Oracle over the module's index with other retrieval settings: an Oracle reads its settings
    once, when it is made, so the index is shared, not rebuilt."""
    original = index.settings
    index.settings = original.model_copy(update=overrides)
    try:
        return Oracle(index)
    finally:
        index.settings = original


@module_loop
async def test_evidence_over_a_real_index(mini):
    store = await mini.store()
    search = await oracle_for(mini, fusion="learned").search("Who sold a brass compass in the Lantern Market?")
    ev = search.evidence
    chunks = {h.chunk.id: h.chunk for hits in search.paths.values() for h in hits}
    session1 = next(cid for cid in ev.ids if chunks[cid].label == "campaign-log › Session 1")
    gods = next(cid for cid in ev.ids if chunks[cid].label == "World: GODS")
    rows = {cid: dict(zip(FEATURES, row, strict=False)) for cid, row in zip(ev.ids, ev.features, strict=False)}

    # Every candidate of every path, in the current fusion's order.
    assert set(chunks) == set(ev.ids)
    # Session 1 holds every term (sold, brass, compass, lantern, market); GODS none of them.
    assert 1.0 == rows[session1]["coverage_idf"] == rows[session1]["coverage"]
    assert 0.0 == rows[gods]["coverage"]
    assert 1.0 == rows[session1]["kind_session"] and 1.0 == rows[gods]["kind_world"]
    # The same reads, asked directly: each chunk each quoted term matches.
    loaded, rowids = await store.chunks_and_rowids([session1, gods])
    assert [session1, gods] == [c.id for c in loaded]
    candidates = [rowids[session1], rowids[gods]]
    found = await store.matching_chunks(candidates, ['"compass"', '"drowned"'])
    assert {(0, rowids[session1]), (1, rowids[session1]), (1, rowids[gods])} == set(found)
    # Read through or looked up chunk by chunk, the answer is the same.
    for lookups in ({0}, {1}, {0, 1}):
        assert set(found) == set(await store.matching_chunks(candidates, ['"compass"', '"drowned"'], lookups))


def spy_term_docs(monkeypatch) -> list[list[str]]:
    """Every read of term counts from now on, as the terms asked."""
    reads: list[list[str]] = []
    term_docs = Store.term_docs

    async def spy(self, terms, *args):
        reads.append(list(terms))
        return await term_docs(self, terms, *args)

    monkeypatch.setattr(Store, "term_docs", spy)
    return reads


@module_loop
@pytest.mark.parametrize(
    "question", ["Who sold a brass compass in the Lantern Market?", "What did Mirela's ledger-keeper write?"]
)
async def test_a_question_reads_its_term_counts_once(mini, monkeypatch, question):
    """The keyword path and the evidence both need the question's term counts: FTS5 reads a term's
    whole posting list to count its chunks, so both are read in one go, by the keyword path."""
    reads = spy_term_docs(monkeypatch)
    search = await oracle_for(mini, fusion="learned").search(question)
    assert search.evidence is not None
    assert 1 == len(reads)
    assert set(query_stems(question).values()) - {""} <= set(reads[0])
    assert "" not in reads[0]  # the stem of a possessive's "s"


@module_loop
async def test_term_counts_remember_what_they_read(mini, monkeypatch):
    store = await mini.store()
    direct = await store.term_docs(["compass", "ledger", "zzyzx", "monk"])
    reads = spy_term_docs(monkeypatch)
    counts = TermCounts(store, also=["monk"])
    assert direct == await counts.of(["compass", "zzyzx", ""]) | await counts.of(["ledger", "compass", "monk"])
    assert "zzyzx" not in direct  # no chunk holds it: left out, and not asked again
    assert [["compass", "monk", "zzyzx"], ["ledger"]] == reads
    assert {} == await counts.of(["zzyzx"]) and 2 == len(reads)


@module_loop
async def test_entity_heading_and_references_over_a_real_index(mini):
    search = await oracle_for(mini, fusion="learned").search("What does Mirela trust?")
    chunks = {h.chunk.id: h.chunk for hits in search.paths.values() for h in hits}
    rows = {chunks[cid].label: dict(zip(FEATURES, row, strict=False)) for cid, row in zip(search.evidence.ids, search.evidence.features, strict=False)}

    assert 1.0 == rows["Sheet: Mirela_Vane"]["entity_in_head"]
    assert 0.0 == rows["campaign-log › Session 2"]["entity_in_head"]  # mentions her, is not about her by name


@module_loop
async def test_learned_fusion_orders_search_by_the_model(mini, tmp_path):
    path = tmp_path / "sheets-first.json"
    path.write_text(json.dumps(model_data({"kind_sheet": 5.0, "fused_rr": 1.0})))
    learned = await oracle_for(mini, fusion="learned", fusion_model=path).search("Who is Mirela?")
    current = await oracle_for(mini, fusion="dbsf").search("Who is Mirela?")

    assert learned.evidence is not None and current.evidence is None
    assert "Sheet: Mirela_Vane" == learned.fused[0].chunk.label
    # The order is the model's score over the evidence, ties in the current fusion's order.
    ranker = LearnedRanker.load(path)
    scores = dict(zip(learned.evidence.ids, ranker.score(learned.evidence.features), strict=False))
    expected = sorted(learned.evidence.ids, key=lambda cid: (-round(scores[cid], 9), learned.evidence.ids.index(cid)))
    assert expected[: mini.settings.fused_pool] == [h.chunk.id for h in learned.fused]
    assert pytest.approx([scores[h.chunk.id] for h in learned.fused]) == [h.score for h in learned.fused]
    assert {"evidence", "learned"} <= set(learned.timings_ms)
    assert "evidence" in learned.to_json()


@module_loop
async def test_learned_fusion_keeps_the_pool_cap(mini, tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model_data({"kind_world": 1.0})))
    search = await oracle_for(mini, fusion="learned", fusion_model=path, fused_pool=2).search("Mirela and the monk")
    assert 2 == len(search.fused)
    assert len(search.evidence.ids) > 2


@module_loop
async def test_a_corrupt_model_falls_back_to_the_current_fusion_and_still_answers(mini, tmp_path, caplog):
    path = tmp_path / "corrupt.json"
    path.write_text('{"format": "oracle-learned-fusion", "weights": [')
    with caplog.at_level(logging.WARNING, logger="oracle.retrieve.learned"):
        oracle = oracle_for(mini, fusion="learned", fusion_model=path)
    assert "using the current fusion (dbsf)" in caplog.text

    learned = await oracle.search("Who ambushed Mirela at the ford?")
    current = await oracle_for(mini, fusion="dbsf").search("Who ambushed Mirela at the ford?")
    assert [h.chunk.id for h in current.fused] == [h.chunk.id for h in learned.fused]
    answer = await oracle.ask("Who ambushed Mirela at the ford?")
    assert "campaign-log › Session 2" in [c.label for c in answer.citations]


@module_loop
async def test_the_current_fusion_is_the_order_the_features_start_from(mini):
    search = await oracle_for(mini, fusion="learned", fusion_model=None).search("the chapel of Greyhaven")
    scored = {name: [(h.chunk.id, h.score) for h in hits] for name, hits in search.paths.items()}
    chunks = {h.chunk.id: h.chunk for hits in search.paths.values() for h in hits}
    named = head_matcher(search.entities)
    tells = {cid for cid, c in chunks.items() if c.kind == "session"}
    kindless = {cid for cid, c in chunks.items() if c.kind == "note" and not named(c)}
    settings = mini.settings
    fused = weigh_kinds(dbsf(scored, weights=settings.path_weights), tells, settings.telling_prior, kindless,
                        settings.kindless_prior)
    assert kindless and [f.id for f in fused] == list(search.evidence.ids)


# ---------------------------------------------------------------------------------------------
# Training


def test_training_is_reproducible_from_the_same_rows_and_seed():
    train_fusion = pytest.importorskip("tools.train_fusion")
    pytest.importorskip("sklearn")
    rng = np.random.default_rng(7)

    def rows(n: int) -> list:
        out = []
        for q in range(n):
            features = rng.normal(size=(12, len(FEATURES)))
            labels = np.zeros(12, dtype=np.int8)
            labels[rng.integers(12)] = 1
            features[labels == 1, FEATURES.index("coverage_idf")] += 2.0  # the signal to find
            units = [train_fusion.Unit(f"Session {i}", f"s{i}.md") for i in range(12)]
            relevant = [units[int(np.flatnonzero(labels)[0])].label]
            out.append(train_fusion.Row(str(q), "single", relevant, units, features, labels, []))
        return out

    corpora = {"a": rows(30), "b": rows(20)}
    banks = [train_fusion.Bank("a", "a", DEFAULT_MODEL, DEFAULT_MODEL), train_fusion.Bank("b", "b", DEFAULT_MODEL, DEFAULT_MODEL)]
    first = train_fusion.model_json(train_fusion.train(corpora, 0), 0, banks, {"a": 30, "b": 20}, {})
    second = train_fusion.model_json(train_fusion.train(corpora, 0), 0, banks, {"a": 30, "b": 20}, {})

    assert first == second
    ranker = LearnedRanker.from_json(json.loads(first))
    assert FEATURES[int(np.argmax(ranker.weights))] == "coverage_idf"


@module_loop
async def test_eval_reports_the_fused_stage_beside_the_final_one(mini, tmp_path):
    from oracle.eval import run_eval
    from oracle.eval_bank import Question

    path = tmp_path / "sheets-first.json"
    path.write_text(json.dumps(model_data({"kind_sheet": 5.0, "fused_rr": 1.0})))
    questions = [Question("q1", "Who is Mirela?", ("Sheet: Mirela_Vane",)), Question("q2", "Who ambushed them at the ford?", ("Session 2",))]
    learned = await run_eval(oracle_for(mini, fusion="learned", fusion_model=path), questions, clearance=Clearance.PLAYER, k=8)
    fallback = await run_eval(oracle_for(mini, fusion="learned", fusion_model=tmp_path / "absent.json"), questions,
                              clearance=Clearance.PLAYER, k=8)

    assert "learned" == learned["fusion"]
    assert "dbsf, no learned model" == fallback["fusion"]
    overall = learned["overall"]
    assert 0 == learned["reranked"]  # no Ollama: the final list is the fused one, and both say so
    for name in ("hit_at_5", "hit_at_10", "mrr", "ndcg_at_10", "all_gold_at_10"):
        assert overall[name] == overall[f"fused_{name}"]
    assert 1.0 == overall["fused_hit_at_5"]


def test_training_scores_a_hubs_section_by_the_session_it_records():
    # CRD3's gold `Session 12` names the log's section `campaign-log › Session 12`, as `oracle eval` counts it.
    train_fusion = pytest.importorskip("tools.train_fusion")
    units = [train_fusion.Unit("campaign-log › Session 11", "log.md", (11,)),
             train_fusion.Unit("campaign-log › Session 12", "log.md", (12,))]
    row = train_fusion.Row("q", "single", ["Session 12"], units, np.zeros((2, len(FEATURES))), np.array([0, 1]), [])
    assert 0.5 == train_fusion.metrics([row], None)["mrr"]
    saved = train_fusion._row({"id": "q", "kind": "single", "relevant": ["Session 12"],
                               "units": [["campaign-log › Session 12", "log.md", [12]]],
                               "features": [[0.0] * len(FEATURES)], "labels": [1], "linked": []})
    assert (12,) == saved.units[0].sessions
