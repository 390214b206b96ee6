"""Rank fusion, pure: every expected score is computed by hand from the formula in the test.

RRF (Cormack, Clarke & Büttcher 2009): score(d) = Σ_paths w / (k + rank), ranks 1-based, k = 60.
DBSF: per path, (s − (μ − 3σ)) / 6σ clipped to [0, 1] (σ = 0 → 1.0), summed over paths, absent = 0.
"""
from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from oracle.retrieve.fusion import Fused, dbsf, dbsf_scale, make_fusion, rrf, weigh_kinds, within_reach


def ids(fused: list[Fused]) -> list[str]:
    return [f.id for f in fused]


def scores(fused: list[Fused]) -> dict[str, float]:
    return {f.id: f.score for f in fused}


def fillers(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


# ---------------------------------------------------------------------------------------------
# RRF


def test_rrf_scores_order_and_ranks_by_hand():
    fused = rrf({"keyword": ["a", "b", "c"], "semantic": ["b", "d"]})

    assert ["b", "a", "d", "c"] == ids(fused)
    assert pytest.approx({"b": 1 / 62 + 1 / 61, "a": 1 / 61, "d": 1 / 62, "c": 1 / 63}) == scores(fused)
    assert [
        (("keyword", 2), ("semantic", 1)),
        (("keyword", 1),),
        (("semantic", 2),),
        (("keyword", 3),),
    ] == [f.ranks for f in fused]
    assert [1, 1, 2, 3] == [f.best_rank for f in fused]


def test_rrf_found_by_two_paths_beats_found_by_one():
    # "solo" is the keyword path's best hit; "pair" is only 2nd and 10th, but found twice.
    fused = rrf({"keyword": ["solo", "pair"], "semantic": [*fillers("x", 9), "pair"]})

    assert "pair" == fused[0].id
    assert pytest.approx(1 / 62 + 1 / 70) == fused[0].score
    assert ("solo", pytest.approx(1 / 61)) == (fused[1].id, fused[1].score)
    assert 1 / 62 + 1 / 70 > 1 / 61  # the arithmetic the order rests on


def test_rrf_k_is_the_constant_added_to_the_rank():
    fused = rrf({"keyword": ["a", "b"], "semantic": ["b"]}, k=1)
    assert ["b", "a"] == ids(fused)
    assert pytest.approx({"b": 1 / 3 + 1 / 2, "a": 1 / 2}) == scores(fused)


def test_rrf_equal_scores_break_on_id():
    fused = rrf({"keyword": ["b"], "semantic": ["a"]})
    assert ["a", "b"] == ids(fused)
    assert fused[0].score == fused[1].score == 1 / 61


def test_rrf_equal_scores_break_on_best_single_path_rank_before_id():
    # "zed": rank 4 on one path → 1/64. "abe": rank 68 on two paths → 1/128 + 1/128 = 1/64, exactly
    # (powers of two). Equal scores; zed's best rank (4) beats abe's (68) although "abe" < "zed".
    keyword = ["k1", "k2", "k3", "zed", *fillers("k", 67)[4:], "abe"]
    semantic = [*fillers("s", 67), "abe"]
    assert (4, 68, 68) == (keyword.index("zed") + 1, keyword.index("abe") + 1, semantic.index("abe") + 1)

    fused = rrf({"keyword": keyword, "semantic": semantic})
    by_id = {f.id: f for f in fused}
    assert by_id["zed"].score == by_id["abe"].score == 1 / 64
    order = [i for i in ids(fused) if i in {"zed", "abe"}]
    assert ["zed", "abe"] == order


def test_rrf_same_ranks_on_three_paths_tie_whatever_the_arrangement():
    # x: keyword 1, semantic 7, entity 2. y: keyword 7, semantic 2, entity 1.
    # Both score 1/61 + 1/62 + 1/67 and have best rank 1: the id decides, x before y.
    keyword = ["x", *fillers("k", 5), "y"]
    semantic = ["s1", "y", *fillers("s", 6)[2:], "x"]
    entity = ["y", "x"]
    assert (1, 7, 2) == (keyword.index("x") + 1, semantic.index("x") + 1, entity.index("x") + 1)
    assert (7, 2, 1) == (keyword.index("y") + 1, semantic.index("y") + 1, entity.index("y") + 1)

    fused = rrf({"keyword": keyword, "semantic": semantic, "entity": entity})

    assert pytest.approx(1 / 61 + 1 / 62 + 1 / 67) == fused[0].score
    assert ["x", "y"] == ids(fused)[:2]


def test_rrf_limit_caps_the_pool_after_ordering():
    rankings = {"keyword": ["a", "b", "c"], "semantic": ["b", "d"]}
    assert ["b", "a"] == ids(rrf(rankings, limit=2))
    assert ["b", "a", "d", "c"] == ids(rrf(rankings, limit=10))
    assert [] == rrf(rankings, limit=0)
    assert rrf(rankings)[:3] == rrf(rankings, limit=3)


def test_rrf_repeated_id_within_one_list_keeps_its_best_rank():
    fused = rrf({"keyword": ["a", "b", "a"], "semantic": ["a"]})

    assert ["a", "b"] == ids(fused)
    assert (("keyword", 1), ("semantic", 1)) == fused[0].ranks
    assert pytest.approx(1 / 61 + 1 / 61) == fused[0].score  # not 1/61 + 1/63 + 1/61
    assert ((("keyword", 2),), pytest.approx(1 / 62)) == (fused[1].ranks, fused[1].score)


def test_rrf_empty_inputs():
    assert [] == rrf({})
    assert [] == rrf({"keyword": [], "semantic": [], "entity": []})
    assert [Fused("a", 1 / 61, (("semantic", 1),))] == rrf({"keyword": [], "semantic": ["a"], "entity": []})


def test_weighted_rrf_changes_the_order_as_computed():
    rankings = {"keyword": ["a", "b"], "semantic": ["b", "a"]}

    # Unweighted: both 1/61 + 1/62, best rank 1 → the id decides.
    plain = rrf(rankings)
    assert ["a", "b"] == ids(plain)
    assert plain[0].score == plain[1].score

    semantic_heavy = rrf(rankings, weights={"keyword": 1.0, "semantic": 3.0})
    assert ["b", "a"] == ids(semantic_heavy)
    assert pytest.approx({"a": 1 / 61 + 3 / 62, "b": 1 / 62 + 3 / 61}) == scores(semantic_heavy)

    keyword_heavy = rrf(rankings, weights={"keyword": 3.0})  # a path left out weighs 1.0
    assert ["a", "b"] == ids(keyword_heavy)
    assert pytest.approx({"a": 3 / 61 + 1 / 62, "b": 3 / 62 + 1 / 61}) == scores(keyword_heavy)


def test_weighted_rrf_can_let_one_path_outvote_two():
    rankings = {"keyword": ["a"], "semantic": ["a"], "entity": ["e"]}
    assert ["a", "e"] == ids(rrf(rankings))
    fused = rrf(rankings, weights={"keyword": 1.0, "semantic": 1.0, "entity": 2.5})
    assert ["e", "a"] == ids(fused)
    assert pytest.approx({"e": 2.5 / 61, "a": 2 / 61}) == scores(fused)


# ---------------------------------------------------------------------------------------------
# DBSF


def test_dbsf_three_sigma_normalisation_by_hand():
    fused = dbsf({
        "keyword": [("a", 10.0), ("b", 6.0), ("c", 2.0)],
        "semantic": [("b", 0.9), ("d", 0.9)],  # all equal: σ = 0, each counts 1.0
    })
    # keyword: μ = 6, σ = √((16 + 0 + 16) / 3) = √(32/3); (s − (μ − 3σ)) / 6σ = 1/2 + (s − μ) / 6σ.
    sigma = math.sqrt(32 / 3)
    a = 0.5 + 4 / (6 * sigma)  # ≈ 0.704
    c = 0.5 - 4 / (6 * sigma)  # ≈ 0.296

    assert ["b", "d", "a", "c"] == ids(fused)
    assert pytest.approx({"b": 0.5 + 1.0, "d": 1.0, "a": a, "c": c}) == scores(fused)
    assert (("keyword", 2), ("semantic", 1)) == fused[0].ranks


def test_dbsf_all_equal_scores_count_one_each():
    fused = dbsf({"keyword": [("a", 3.0), ("b", 3.0), ("c", 3.0)], "semantic": [("z", 0.1)]})
    assert {"a": 1.0, "b": 1.0, "c": 1.0, "z": 1.0} == scores(fused)
    assert ["a", "z", "b", "c"] == ids(fused)  # equal scores: best rank, then id


@pytest.mark.parametrize("n", [3, 5, 6, 12])
def test_equal_scores_count_one_each_though_their_float_mean_is_not_them(n):
    assert math.fsum([0.1] * n) / n != 0.1 or math.fsum([0.123456789] * n) / n != 0.123456789
    for value in (0.1, 0.123456789):
        assert {f"d{i}": 1.0 for i in range(n)} == scores(dbsf({"keyword": [(f"d{i}", value) for i in range(n)]}))


def exact_dbsf(values: list[float], score: float) -> float:
    """The formula with `statistics`, which sums exactly: what the float version must agree with."""
    mean, std = statistics.fmean(values), statistics.pstdev(values)
    return 1.0 if std == 0 else min(1.0, max(0.0, (score - (mean - 3 * std)) / (6 * std)))


@given(st.lists(st.one_of(st.floats(-50, 50, allow_nan=False), st.sampled_from([0.1, 0.7, 1 / 3])), min_size=1, max_size=40))
def test_the_float_normalisation_agrees_with_the_exact_one(values):
    scale = dbsf_scale(values)
    assert all(0.0 <= scale(score) <= 1.0 for score in values)
    # Scores a millionth of their size apart are ties in all but name: there the float mean's last
    # digit decides, as it may. Further apart, both agree.
    assume(max(values) - min(values) > 1e-6 * (1 + max(map(abs, values))))
    for score in values:
        assert scale(score) == pytest.approx(exact_dbsf(values, score), abs=1e-9)


def test_dbsf_clips_outliers_to_the_unit_interval():
    # One score beyond 3σ (possible with 11 values: the largest z is √10 ≈ 3.16).
    zeros = [(f"z{i}", 0.0) for i in range(10)]
    high = dbsf({"keyword": [("top", 100.0), *zeros]})
    low = dbsf({"keyword": [("bottom", -100.0), *zeros]})
    # μ = 100/11, σ = √100000 / 11; a zero scores 1/2 − μ/6σ = 1/2 − 1/(6√10).
    zero = 0.5 - 1 / (6 * math.sqrt(10))

    assert ("top", 1.0) == (high[0].id, high[0].score)  # (100 − μ + 3σ) / 6σ ≈ 1.027, clipped
    assert pytest.approx([zero] * 10) == [f.score for f in high[1:]]
    assert ("bottom", 0.0) == (low[-1].id, low[-1].score)  # ≈ −0.027, clipped; still listed
    assert pytest.approx([1 - zero] * 10) == [f.score for f in low[:-1]]


def test_dbsf_weights_and_absent_paths():
    scored = {"keyword": [("a", 2.0), ("b", 0.0)], "semantic": [("c", 5.0)]}
    # keyword: μ = 1, σ = 1 → a = (2 − (−2)) / 6 = 2/3, b = (0 − (−2)) / 6 = 1/3; c alone: σ = 0 → 1.
    assert pytest.approx({"c": 1.0, "a": 2 / 3, "b": 1 / 3}) == scores(dbsf(scored))
    assert ["c", "a", "b"] == ids(dbsf(scored))
    weighted = dbsf(scored, weights={"keyword": 3.0, "semantic": 0.5})
    assert ["a", "b", "c"] == ids(weighted)
    assert pytest.approx({"a": 2.0, "b": 1.0, "c": 0.5}) == scores(weighted)


def test_dbsf_limit_and_empty_inputs():
    assert [] == dbsf({})
    assert [] == dbsf({"keyword": [], "semantic": []})
    assert [Fused("a", 1.0, (("semantic", 1),))] == dbsf({"keyword": [], "semantic": [("a", 0.2)]})
    scored = {"keyword": [("a", 10.0), ("b", 6.0), ("c", 2.0)], "semantic": [("b", 0.9), ("d", 0.9)]}
    assert ["b", "d"] == ids(dbsf(scored, limit=2))


# ---------------------------------------------------------------------------------------------
# A session's record preferred (`telling`)


def test_a_session_record_scores_the_telling_share_more():
    # Equal scores in one path count 1.0 each: the sheet first by its rank, the session by a tenth.
    scored = {"keyword": [("sheet", 3.0), ("session", 3.0)]}

    assert ["sheet", "session"] == ids(dbsf(scored))
    preferred = weigh_kinds(dbsf(scored), {"session"}, 0.1)
    assert ["session", "sheet"] == ids(preferred)
    assert pytest.approx({"session": 1.1, "sheet": 1.0}) == scores(preferred)
    assert (("keyword", 2),) == preferred[0].ranks  # the paths' ranks stay as they were
    assert ids(dbsf(scored)) == ids(weigh_kinds(dbsf(scored), {"session"}, 0.0))


def test_the_telling_share_does_not_outvote_a_second_paths_vote():
    fused = rrf({"keyword": ["sheet", "x"], "semantic": ["sheet", "session"]})

    # 2/61 for the sheet against 1.1 · 1/62 for the session.
    assert "sheet" == ids(weigh_kinds(fused, {"session"}, 0.1))[0]


def test_a_kindless_chunk_scores_its_share_less_and_a_telling_keeps_its_share():
    # A hub first by its rank, then the page, then a session: the hub falls behind both when it is
    # kindless, the session rises by its tenth; a chunk in both sets is a telling.
    scored = {"keyword": [("hub", 3.0), ("page", 3.0), ("session", 3.0)]}

    weighed = weigh_kinds(dbsf(scored), {"session"}, 0.1, {"hub"}, 0.15)
    assert ["session", "page", "hub"] == ids(weighed)
    assert pytest.approx({"session": 1.1, "page": 1.0, "hub": 0.85}) == scores(weighed)
    assert ids(dbsf(scored)) == ids(weigh_kinds(dbsf(scored), set(), 0.1, {"hub"}, 0.0))
    assert 1.1 == pytest.approx(scores(weigh_kinds(dbsf(scored), {"hub"}, 0.1, {"hub"}, 0.15))["hub"])


def test_make_fusion_prefers_tellings_for_every_method_then_cuts_the_pool():
    # The session is right behind the page in each path (tied scores for DBSF; 2/62 against 2/61 in
    # RRF, where a tenth is worth about six ranks near the top), and the pool holds one chunk.
    scored = {"keyword": [("page", 2.0), ("session", 2.0)], "semantic": [("page", 0.5), ("session", 0.5)]}
    weights = {"keyword": 1.0, "semantic": 1.0}

    for method in ("rrf", "weighted_rrf", "dbsf", "learned"):
        fuse = make_fusion(method, weights=weights, limit=1, telling=0.1)
        assert ["page"] == ids(fuse(scored, set())), method
        assert ["session"] == ids(fuse(scored, {"session"})), method
    assert ["page", "session"] == ids(make_fusion("dbsf", weights=weights, telling=0.0)(scored, {"session"}))
    kindless = make_fusion("dbsf", weights=weights, telling=0.0, kindless=0.15)
    assert ["session", "page"] == ids(kindless(scored, set(), {"page"}))


# ---------------------------------------------------------------------------------------------
# Properties, on any input

rankings_strategy = st.dictionaries(
    st.sampled_from(["keyword", "semantic", "entity"]),
    st.lists(st.sampled_from(list("abcdefghij")), max_size=12),
    max_size=3,
)


@given(rankings_strategy, st.one_of(st.none(), st.integers(0, 12)))
def test_rrf_properties(rankings, limit):
    everything = rrf(rankings)
    fused = rrf(rankings, limit=limit)

    assert everything[:limit] == fused
    assert sorted({d for ids_ in rankings.values() for d in ids_}) == sorted(ids(everything))
    for f in everything:
        expected_ranks = {path: ids_.index(f.id) + 1 for path, ids_ in rankings.items() if f.id in ids_}
        assert expected_ranks == dict(f.ranks)
        assert pytest.approx(sum(1 / (60 + r) for r in expected_ranks.values())) == f.score
    assert all(a.score >= b.score for a, b in zip(everything, everything[1:], strict=False))


# ---------------------------------------------------------------------------------------------
# One path's best within reach


def test_a_best_id_below_the_reach_takes_its_last_place_and_one_within_stays():
    order = list("abcdefghij")
    assert list("abcdhefgij") == within_reach(order, ["h", "c"], 5)
    assert list("abcigdefhj") == within_reach(order, ["i", "g"], 5)  # in the order of `best`
    assert order == within_reach(order, ["a", "e", "zz"], 5)  # within reach, or not listed at all
    assert list("bcadefghij") == within_reach(order, ["b", "c"], 2)  # one within is not pushed out


@given(st.permutations(list("abcdefghij")), st.lists(st.sampled_from(list("abcdefghijk")), max_size=3),
       st.integers(1, 10))
def test_within_reach_properties(order, best, reach):
    out = within_reach(order, best, reach)
    assert sorted(out) == sorted(order)
    listed = [doc for doc in dict.fromkeys(best) if doc in order][:reach]
    assert all(out.index(doc) < reach for doc in listed)
    others = [doc for doc in order if doc not in best]
    assert others == [doc for doc in out if doc not in best]  # the rest keep their order
