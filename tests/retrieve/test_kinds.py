"""A session's record before a page that mentions what it tells, and a note of no kind (a timeline, a
hub) after both unless the question names it: through the real search, over a vault of each."""
from __future__ import annotations

import pytest

from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from tests.conftest import write_notes

VAULT = {
    "Sessions/Session 1.md": "# Session 1\nThe party met Wren at the ferry and crossed the river to Dunmore.\n",
    "Sessions/Session 2.md": "# Session 2\nWren bargained with the smugglers of Dunmore for a boat.\n",
    "Sessions/Session 3.md": (
        "# Session 3\nAt dawn the party waded into [[The Drowned Chapel]] and rescued the miller's daughter "
        "from the cultists who had chained her below the altar. Wren carried her back to the mill.\n"
    ),
    "Timeline.md": (
        "# Timeline\n- Session 1: the ferry to Dunmore.\n- Session 2: a boat from the smugglers.\n"
        "- Session 3: the miller's daughter rescued from the chapel.\n- Session 4: the cult's cellar under the mill.\n"
    ),
    "The Drowned Chapel.md": "# The Drowned Chapel\nA flooded chapel south of the mill, half under the river.\n",
}


def order(search) -> list[str]:
    return [h.chunk.label for h in search.fused]


async def test_a_timeline_comes_after_the_session_it_lists_unless_it_is_asked_about(tmp_path, make_settings,
                                                                                    open_index):
    notes = write_notes(tmp_path / "notes", VAULT)
    plain = open_index(make_settings(notes, kindless_prior=0.0, data_dir=tmp_path / "plain"))
    weighed = open_index(make_settings(notes, data_dir=tmp_path / "weighed"))
    for index in (plain, weighed):
        await ingest(index)
    question = "Who rescued the miller's daughter?"

    before = order(await Oracle(plain).search(question))
    after = order(await Oracle(weighed).search(question))
    assert before.index("Note: Timeline") < before.index("Session 3"), before  # the list's short line wins alone
    assert after.index("Session 3") < after.index("Note: Timeline"), after
    # A page the question names keeps its score: it is what is asked about. The timeline, not named,
    # scores 15% less.
    asked = "What is the Drowned Chapel?"
    plain_scores, weighed_scores = [
        {h.chunk.label: h.score for h in (await Oracle(index).search(asked)).fused} for index in (plain, weighed)
    ]
    assert weighed_scores["Note: The Drowned Chapel"] == pytest.approx(plain_scores["Note: The Drowned Chapel"])
    assert weighed_scores["Note: Timeline"] == pytest.approx(plain_scores["Note: Timeline"] * 0.85)


async def test_a_session_log_beside_the_sessions_is_an_index_the_report_names_and_comes_after_them(
        tmp_path, make_settings, open_index):
    from oracle.index.report import VaultReport

    log = ("# Session Log\n- [[Session 1]]: the ferry to Dunmore.\n- [[Session 2]]: a boat from the smugglers.\n"
           "- [[Session 3]]: the miller's daughter rescued from the chapel.\n")
    vault = {**{k: v for k, v in VAULT.items() if k != "Timeline.md"}, "Sessions/Session Log.md": log}
    index = open_index(make_settings(write_notes(tmp_path / "notes", vault), data_dir=tmp_path / "data"))
    report = VaultReport.from_json((await ingest(index)).vault)

    assert ("Sessions/Session Log.md",) == report.session_indexes
    assert any("not sessions, indexes of them" in line and "Session Log.md" in line for line in report.lines())
    after = order(await Oracle(index).search("Who rescued the miller's daughter?"))
    assert after.index("Session 3") < after.index("Note: Session Log"), after
