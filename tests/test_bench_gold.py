"""bench/banks/report.py keeps its own copy of how a gold entry names a place (so a half-edited working tree
whose `oracle` does not import cannot stop a comparison): the copy must read every entry as the
Oracle's `oracle.eval_bank.matches_place` does."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench.banks.report import matches_place as bench_matches
from oracle.eval_bank import matches_place

PATHS = ["Session Notes/Session 12 - The Fall.md", "npcs/Orrin.md", "sessions/campaign-log.md", "Sessões/Sessão 02.md"]
LABELS = ["Session 12 - The Fall", "Sheet: Orrin", "campaign-log › Session 12", "Sessão 02", "Note: x"]
ENTRIES = st.one_of(
    st.sampled_from([*PATHS, *LABELS, "session 12", "Session  012", "SESSION 3", "npcs/orrin", "Session 12x"]),
    st.text(max_size=30),
)


@given(ENTRIES, st.sampled_from(LABELS), st.sampled_from(PATHS), st.lists(st.integers(0, 20), max_size=3))
def test_the_bench_reads_a_gold_entry_as_the_oracle_does(entry, label, path, sessions):
    assert bench_matches(entry, label, path, tuple(sessions)) == matches_place(entry, label, path, tuple(sessions))


def test_the_shared_cases():
    assert matches_place("npcs/orrin", "Sheet: Orrin", "npcs/Orrin.md")
    assert matches_place("Session 012", "campaign-log › Session 12", "sessions/campaign-log.md", (12,))
    assert not matches_place("Session 12x", "Session 12 - The Fall", "Session Notes/Session 12 - The Fall.md", (12,))
