"""Fusion over the places a player reads (`by_unit`): every expected score computed by hand.

A unit is a chunk's citation label. Each path counts a unit once, at its best part's rank or score;
the chunks then follow their unit's place. A session's record (`tells`) scores `telling` more.
"""
from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oracle.retrieve.fusion import Fused, Unit, best_per_unit, by_unit, dbsf, make_fusion, rrf
from oracle.types import Scored


def ids(fused: list[Fused]) -> list[str]:
    return [f.id for f in fused]


def scores(fused: list[Fused]) -> dict[str, float]:
    return {f.id: f.score for f in fused}


def ranked(*names: str) -> Scored:
    """A path's list, best first, with falling scores."""
    return [(name, 1.0 - i / 100) for i, name in enumerate(names)]


def by_rrf(scored: Mapping[str, Scored]) -> list[Fused]:
    return rrf({path: [cid for cid, _ in hits] for path, hits in scored.items()})


def test_a_session_found_in_two_parts_gets_both_votes():
    # Keyword finds the session's first part, semantic its second; a one-part sheet is second in both.
    scored = {"keyword": ranked("s4-1", "sheet"), "semantic": ranked("s4-2", "sheet")}
    units = {"s4-1": Unit("Session 4"), "s4-2": Unit("Session 4"), "sheet": Unit("Sheet: Vex")}

    assert ["sheet", "s4-1", "s4-2"] == ids(by_rrf(scored))  # chunk by chunk, the sheet wins
    fused = by_unit(by_rrf, scored, units)

    assert ["s4-1", "s4-2", "sheet"] == ids(fused)
    assert pytest.approx({"s4-1": 2 / 61, "s4-2": 2 / 61, "sheet": 2 / 62}) == scores(fused)
    assert (("keyword", 1),) == fused[0].ranks  # each chunk keeps its own ranks for the trace


def test_a_long_note_takes_one_place_per_path():
    # Five parts of one long note head the keyword list; the next note is second there, not sixth.
    scored = {"keyword": ranked("n1", "n2", "n3", "n4", "n5", "x"), "semantic": ranked("x")}
    units = {f"n{i}": Unit("Note: long") for i in range(1, 6)} | {"x": Unit("Session 9")}

    fused = by_unit(by_rrf, scored, units)

    assert pytest.approx(1 / 62 + 1 / 61) == scores(fused)["x"]
    assert pytest.approx(1 / 66 + 1 / 61) == scores(by_rrf(scored))["x"]
    assert ["x", "n1", "n2", "n3", "n4", "n5"] == ids(fused)
    assert all(s == pytest.approx(1 / 61) for cid, s in scores(fused).items() if cid != "x")


def test_dbsf_counts_a_unit_at_its_best_part():
    scored = {"keyword": [("a1", 9.0), ("a2", 8.0), ("b", 5.0), ("c", 1.0)]}
    units = {"a1": Unit("A"), "a2": Unit("A"), "b": Unit("B"), "c": Unit("C")}

    fused = by_unit(lambda s: dbsf(s), scored, units)

    # The unit list is A 9, B 5, C 1: mean 5, σ = √(32/3); a score s counts (s − (5 − 3σ)) / 6σ.
    sigma = (32 / 3) ** 0.5
    expected = {"A": (9 - 5 + 3 * sigma) / (6 * sigma), "B": 0.5, "C": (1 - 5 + 3 * sigma) / (6 * sigma)}
    assert pytest.approx({"a1": expected["A"], "a2": expected["A"], "b": expected["B"], "c": expected["C"]}) == scores(fused)
    assert ["a1", "a2", "b", "c"] == ids(fused)


def test_a_session_record_is_preferred_by_the_telling_share():
    # Equal scores in one path count 1.0 each: the sheet first by its rank, the session first by 10 %.
    scored = {"keyword": [("sheet", 3.0), ("session", 3.0)]}
    units = {"sheet": Unit("Sheet: Halvar"), "session": Unit("Session 31", tells=True)}

    assert ["sheet", "session"] == ids(by_unit(lambda s: dbsf(s), scored, units))
    preferred = by_unit(lambda s: dbsf(s), scored, units, telling=0.1)
    assert ["session", "sheet"] == ids(preferred)
    assert pytest.approx({"session": 1.1, "sheet": 1.0}) == scores(preferred)


def test_the_telling_share_does_not_outvote_a_second_paths_vote():
    scored = {"keyword": ranked("sheet", "x", "y"), "semantic": ranked("sheet", "session")}
    units = {"sheet": Unit("Sheet: Halvar"), "session": Unit("Session 31", tells=True),
             "x": Unit("x"), "y": Unit("y")}

    assert "sheet" == ids(by_unit(by_rrf, scored, units, telling=0.1))[0]  # 2/61 against 1.1 · 1/62


def test_the_limit_counts_chunks():
    scored = {"keyword": ranked("a1", "a2", "b", "c")}
    units = {"a1": Unit("A"), "a2": Unit("A")}

    assert ["a1", "a2", "b"] == ids(by_unit(by_rrf, scored, units, limit=3))
    assert [] == by_unit(by_rrf, scored, units, limit=0)


def test_best_per_unit_keeps_each_units_first_score():
    assert [("A", 5.0), ("B", 4.0)] == best_per_unit([("a1", 5.0), ("b", 4.0), ("a2", 3.0)],
                                                     {"a1": "A", "a2": "A", "b": "B"}.__getitem__)


def test_make_fusion_fuses_by_unit_for_every_method():
    scored = {"keyword": ranked("s4-1", "sheet"), "semantic": ranked("s4-2", "sheet")}
    units = {"s4-1": Unit("Session 4"), "s4-2": Unit("Session 4"), "sheet": Unit("Sheet: Vex")}
    weights = {"keyword": 1.0, "semantic": 1.0}

    for method in ("rrf", "weighted_rrf", "dbsf", "learned"):
        fused = make_fusion(method, weights=weights, limit=40)(scored, units)
        assert ["s4-1", "s4-2", "sheet"] == ids(fused), method


chunk_ids = st.sampled_from([f"c{i}" for i in range(12)])


@given(
    st.dictionaries(st.sampled_from(["keyword", "semantic", "entity"]),
                    st.lists(chunk_ids, unique=True, max_size=10), max_size=3),
    st.dictionaries(chunk_ids, st.sampled_from(["A", "B", "C", "D"])),
    st.floats(0, 1),
)
def test_units_properties(rankings, labels, telling):
    scored = {path: ranked(*names) for path, names in rankings.items()}
    units = {cid: Unit(label, tells=label == "A") for cid, label in labels.items()}
    fused = by_unit(lambda s: dbsf(s), scored, units, telling=telling)

    # Every chunk found comes out once, and the parts of a unit stand together.
    assert sorted(ids(fused)) == sorted({cid for names in rankings.values() for cid in names})
    places = [units[f.id].label if f.id in units else f.id for f in fused]
    assert all(places.index(p) == i or places[i - 1] == p for i, p in enumerate(places))
    # Scores never rise down the list; without units it is the plain fusion.
    assert all(a.score >= b.score - 1e-12 for a, b in zip(fused, fused[1:], strict=False))
    assert ids(by_unit(lambda s: dbsf(s), scored, {})) == ids(dbsf(scored))
