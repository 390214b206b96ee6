"""The Oracle's benchmarks: each measures one cost on this machine and prints a table.

    python -m bench.ingest         # ingest throughput against raw encoding; what a small edit costs
    python -m bench.retrieval      # retrieval latency at 1x, 10x, 100x against a tutorial baseline
    python -m bench.load           # time to answer while notes are indexed, loop stalls, peak memory
    python -m bench.chroma_writes  # how long Chroma's writes hold the interpreter lock
    python -m bench.stream_guard   # the secret check of an answer as it streams
    python -m bench.lanes          # the event loop's wait while questions' CPU steps run off it
    python -m bench.banks          # retrieval on every question bank: the working tree against a baseline commit

Shared helpers (paths, `EVAL_DIR`, the notes copy, the machine, a fake Ollama, tables) are in
bench/common.py; data written for the benchmarks (question lists, dev banks) is in bench/data/.
"""
