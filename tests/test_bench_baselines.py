"""The pure parts of bench/baselines.py: measures, fusion, the FTS5 query, Snowball folding (no model)."""
from __future__ import annotations

import pytest

from bench.baseline_rank import (
    Doc,
    Snowball,
    bank_measures,
    fts_query,
    measures,
    porter_index,
    rrf,
    search_text,
    snowball_index,
)


def test_measures_on_a_hand_made_ranking():
    ranking = ["a.md", "b.md", "A.md", "c.md", "d.md", "e.md", "f.md", "g.md", "h.md", "i.md"]
    # Gold: "c" (rank 3: "A.md" repeats "a.md" and is not counted again), "I" without .md (rank 9), "z" absent.
    got = measures(ranking, ["c.md", "I", "z.md"])
    assert got["recall@8"] == pytest.approx(1 / 3)
    assert got["hit@5"] == 1.0
    assert got["rr"] == pytest.approx(1 / 3)
    assert measures(ranking, ["i.md"]) == {"recall@8": 0.0, "hit@5": 0.0, "rr": pytest.approx(1 / 9)}


def test_bank_measures_skip_unanswerable_and_count_paraphrases_apart():
    rows = [
        ({"relevant": ["a.md"], "kind": "paraphrase"}, ["a.md", "b.md"]),
        ({"relevant": ["b.md"], "kind": "event"}, ["c.md", "d.md", "e.md", "f.md", "g.md", "b.md"]),
        ({"relevant": [], "kind": "unanswerable"}, ["a.md"]),
    ]
    got = bank_measures(rows)
    assert got["questions"] == 2
    assert got["recall@8"] == 1.0
    assert got["hit@5"] == 0.5
    assert got["MRR"] == pytest.approx((1 + 1 / 6) / 2)
    assert got["paraphrase recall@8"] == 1.0
    assert got["paraphrase MRR"] == 1.0
    assert bank_measures(rows[1:])["paraphrase recall@8"] is None
    assert bank_measures(rows[1:])["paraphrase MRR"] is None
    second = [({"relevant": ["b.md"], "kind": "paraphrase"}, ["a.md", "b.md"]), rows[1]]
    assert bank_measures(second)["paraphrase MRR"] == 0.5


def test_rrf_order():
    fused = rrf(["a", "b", "c"], ["b", "c"])
    assert fused[0] == "b"  # 1/62 + 1/61
    assert fused[1] == "c"  # 1/63 + 1/62
    assert fused[2] == "a"  # 1/61
    # One list alone keeps its order; a tie goes to the earlier rank.
    assert rrf(["x", "y", "z"]) == ["x", "y", "z"]
    assert rrf(["p", "q"], ["q", "p"]) == ["p", "q"]


def test_fts_query_strips_syntax():
    query = fts_query('Who said "NEAR(foo* bar)" AND -baz: the (old) Foo?')
    assert query == '"who" OR "said" OR "near" OR "foo" OR "bar" OR "and" OR "baz" OR "the" OR "old"'
    assert fts_query('*** "" ()') == ""
    index = porter_index([Doc("x.md", "x", "The old foo sat by the bar."), Doc("y.md", "y", "Nothing here.")])
    assert index.search('"foo*" (bar) OR') == ["x.md"]  # no FTS5 syntax error
    assert index.search("***") == []


def test_snowball_folds_spanish_forms_to_one_stem():
    stem = Snowball("es")
    assert stem.words("atacado") == stem.words("ataca")
    assert stem("Mantícora ATACADO") == stem("manticora ataca")
    assert Snowball("pl")("Żółć Gavigana") == "zołc gavigan"  # ł has no accent to fold
    index = snowball_index([Doc("a.md", "a", "El grifo fue atacado al alba."), Doc("b.md", "b", "Nada.")], "es")
    assert index.search("¿Quién ataca al grifo?") == ["a.md"]


def test_follow_up_searches_after_its_last_history_turn():
    q = {"question": "And how did he die?", "history": ["Who is Toby?", "Who is Keith?"]}
    assert search_text(q) == "Who is Keith? And how did he die?"
    assert search_text({"question": "Who?"}) == "Who?"
