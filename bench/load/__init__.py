"""Load benchmark: the time to answer while notes are indexed, event-loop stalls and peak memory, in one run.

    python -m bench.load [NOTES_DIR] [--quick] [--json] [--save FILE] [--concurrency 20] [--asyncio-debug]
    python -m bench.load --show FILE      # the table of a saved result

NOTES_DIR defaults to the real 113-session CRD3 log (`EVAL_DIR`/crd3/notes, bench/common.py); `--quick`
uses the bundled sample campaign (notes/) for a smoke run. The notes are copied into a temporary folder
(one session gets edited) and indexed into a cold temporary data folder. A fake Ollama
(testing/ollama_server.py, real HTTP on 127.0.0.1) answers every chat at once, so no LLM time
is in any number. It runs in a process of its own, as a real Ollama does (`--ollama-in-thread`: in
a thread of this one, where its HTTP handling competes with the loop for the GIL).
Annotations are off: without a real model none would exist.

The process starts as the bot does (load the model, open the stores), then runs these phases while a
monitor task sleeps 10 ms in a loop and records how late each wake-up is (`loop.time()` drift):

1. idle: nothing but the monitor;
2. full ingest of the cold index AND, concurrently, waves of `--concurrency` questions through
   `Oracle.ask` (questions before the first commit find nothing: they must still be answered);
3. answering only: `ask()` latency, 1 question at a time and `--concurrency` at once, with
   `reranker="none"` and `reranker="llm"` (which turns itself off: no chunk has an annotation);
4. answers alone: the time to answer a question without a model (retrieval, then the passages a
   reply shows: `answer_without_model`), one question at a time, `--answer-gap` seconds apart, for
   `--answer-idle` seconds. This is the idle baseline of every phase below;
5. a session's reingest (one session edited, `--reingests` times in a row) while the same answers go
   on: embedded in this process; (unless --no-worker) in the embedding worker process
   (`oracle/index/worker.py`, started once during setup, as the bot starts it); and (unless
   --no-other-process) by `oracle ingest` in another process, at `--other-nice`, as the reingest
   timer runs it. After that one, the next question must find the edit through every path;
6. a second campaign (the same notes, a cold data folder of its own) fully ingested while the first
   campaign answers: in this process; through the worker; through the worker into a `chroma run`
   server on 127.0.0.1 (unless --no-chroma-server); and by `oracle ingest` in another process.

For each phase of 5 and 6 the table gives the p95 time to answer against the idle baseline's: the
target is at most `ANSWER_RATIO_TARGET` (1.5) times idle. That is what a table feels while notes are
indexed. The loop's stalls are printed for information only.

To name what stalls the loop, every callback the loop runs is timed (as asyncio's debug mode does
with `slow_callback_duration`, without its overhead): loop iterations whose callbacks took at least
`--slow-ms` are kept with the frame and the lines each slow task step resumed and stopped at; and a
watchdog thread samples every thread's stack whenever the monitor is `--dump-after-ms` overdue,
naming the line that holds the loop even when the cause is another thread holding the GIL.
`--asyncio-debug` also turns on asyncio's own debug mode and collects its "Executing <Task ...> took
X seconds" warnings (debug mode slows everything: use those runs to name blockers, not for numbers).
A step's time includes waiting for the GIL: on 2 cores, a step can be slow because an embedding or
Chroma thread runs; the stack samples tell which.

It starts as `python -m bot` does: gc.freeze() once everything is loaded, so a full collection no
longer walks the ~480k objects the imports leave (`--no-gc-freeze` measures without it, 300+ ms
stalls). It hands the GIL over every 1 ms, as the bot does (`--switch-interval-ms 5`: Python's default).

With `--campaigns 1,5,20`, it measures several campaigns in one process instead: one campaign's
index is built once (a full ingest of NOTES_DIR), then, for each count, a fresh process copies that
built data folder once per campaign (they are the same notes: a copy stands for the same ingest, and
keeps 20 CRD3-sized campaigns to minutes on two cores), opens them all through one `Library` (one
model, one embedding worker, one Ollama client) and asks `--serial` questions one at a time and
`--waves` waves of `--concurrency` at once, spread over the campaigns. It reports, per count, how many
times the bot process loaded the model, its peak and current RSS, the embedding worker's peak RSS,
and question latency p50/p95.

Peak RSS (`ru_maxrss`) is read at start (before torch is imported), after the model loads, after the
full ingest, after the answering phase and at the end.

The package, by phase: phases.py (the phases' names, the target), startup.py (the process started as
the bot is, the ingests the phases run), probe.py and frames.py (the loop probe and what its frames
say), measures.py (memory, percentiles), asking.py (the questions and their latency), answering.py
(phases 1-4), reingest.py (5), second.py (6), run.py (the phases in order), report.py (the JSON
result, failures, missed targets), table.py (the tables), campaigns.py (--campaigns), __main__.py
(the command line).
"""
from __future__ import annotations

from bench.load.phases import ANSWER_RATIO_TARGET
from bench.load.report import failed_phases, missed_targets

__all__ = ["ANSWER_RATIO_TARGET", "failed_phases", "missed_targets"]
