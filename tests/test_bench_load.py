"""bench/load.py: a run whose ingest failed measured nothing, and says so by its exit status."""
from __future__ import annotations

from bench.load import failed_phases

OK = {"error": None}


def test_a_failed_ingest_is_named_with_its_error():
    worker = {"re-ingest + questions, worker process": OK,
              "second campaign's full ingest + questions, worker process": {"error": "EmbedError: worker killed"}}
    result = {"full_ingest": OK, "reingest": {"error": "IngestError: disk full"}, "worker": worker}
    assert [("re-ingest", "IngestError: disk full"),
            ("second campaign's full ingest + questions, worker process", "EmbedError: worker killed")] == failed_phases(result)


def test_a_run_without_failures_has_none():
    assert [] == failed_phases({"full_ingest": OK, "reingest": OK})
    assert [] == failed_phases({"full_ingest": OK, "reingest": OK, "worker": {"re-ingest + questions, worker process": OK}})
