"""The phases of a load run as the table names them, the run's target and the monitor's clock."""
from __future__ import annotations

ANSWER_RATIO_TARGET = 1.5  # p95 time to answer while an ingest runs, against idle
TICK = 0.010  # the monitor's sleep
ATTRIBUTE_MS = 50.0  # a wake-up this late is matched against what was running meanwhile
MACHINE_PAUSE = "the whole machine paused (another process saw it)"

ANSWERS_IDLE = "answers alone"
PHASES = ("idle", "full ingest + questions", "answering only", ANSWERS_IDLE)
# The ingests measured against the idle answers: one session's reingest of the campaign being asked,
# and a second campaign (a copy of the notes) built from cold while the first answers, each run in
# this process, through the embedding worker and by another process.
REINGESTS = (
    "session reingest, in-process",
    "session reingest, worker process",
    "session reingest, another process",
)
SECOND = (
    "second campaign's full ingest, in-process",
    "second campaign's full ingest, worker process",
    "second campaign's full ingest, worker process, Chroma server",
    "second campaign's full ingest, another process",
)
INGEST_PHASES = REINGESTS + SECOND
ALL_PHASES = PHASES + INGEST_PHASES
