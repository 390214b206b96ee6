"""bench.load: a run whose ingest failed measured nothing, and one whose answers slowed past the
target while notes were indexed says so; both by its exit status."""
from __future__ import annotations

from bench.load import ANSWER_RATIO_TARGET, failed_phases, missed_targets

OK = {"error": "", "pass": True, "p95_vs_idle": 1.1}


def test_a_failed_ingest_is_named_with_its_error():
    ingests = {"session reingest, worker process": OK,
               "second campaign's full ingest, worker process": {"error": "EmbedError: worker killed",
                                                                  "pass": False, "p95_vs_idle": None}}
    result = {"full_ingest": {"error": "IngestError: disk full"}, "ingests": ingests}
    assert [("full ingest", "IngestError: disk full"),
            ("second campaign's full ingest, worker process", "EmbedError: worker killed")] == failed_phases(result)
    # A failed ingest is named once, as a failure, not as a target missed.
    assert [] == missed_targets(result)


def test_a_run_without_failures_has_none():
    assert [] == failed_phases({"full_ingest": {"error": ""}})
    assert [] == failed_phases({"full_ingest": {"error": ""}, "ingests": {"session reingest, in-process": OK}})


def test_answers_slower_than_the_target_against_idle_are_named():
    slow = {"error": "", "pass": False, "p95_vs_idle": ANSWER_RATIO_TARGET + 0.2}
    result = {"ingests": {"session reingest, in-process": OK, "second campaign's full ingest, another process": slow},
              "other_process_edit_found": {"keyword": True, "semantic": True}}
    assert [f"second campaign's full ingest, another process: p95 {slow['p95_vs_idle']}× idle"] == missed_targets(result)


def test_an_edit_another_process_ingested_and_a_path_missed_is_named():
    result = {"ingests": {"session reingest, another process": OK},
              "other_process_edit_found": {"keyword": True, "semantic": False}}
    [missed] = missed_targets(result)
    assert "did not find its edit" in missed and "'semantic': False" in missed
    assert [] == missed_targets({"ingests": {}, "other_process_edit_found": None})  # not measured
