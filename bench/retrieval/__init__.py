"""Retrieval latency benchmark: the Oracle's hybrid search against a tutorial baseline, at 1×, 10×, 100×.

    python -m bench.retrieval [--scales 1,10,100] [--queries N] [--repeat R] [--json] [--work DIR]

Everything runs in one process with one loaded embedding model (loaded and warmed up before any
timing). Annotations are off and OLLAMA_HOST points at a closed local port, so nothing waits.

Corpus
    The real CRD3 log of Critical Role campaign 1 (--notes, default EVAL_DIR/crd3/notes, bench/common.py:
    113 sessions, 169k words). 1× is that folder, indexed by the real `oracle.index.ingest.ingest`.
    10× and 100× are synthetic: a folder of N copies of the log, one file per copy
    (`campaign-log-000.md` … ), copy 0 unchanged and copy i ≥ 1 with every session header renumbered
    `Session N` → `Session N + i·S` (S = the log's highest session number, 115) and three lower-case
    words of every session swapped for other common words, so no two copies are byte-identical and
    every copy's sessions are new chunks. Session numbers have at most 4 digits (oracle/sessions.py
    `_NUM`), so 100 × 115 numbers cannot all be distinct: numbers past 9999 wrap to 1, 2, … (copies
    86–99 reuse labels of copies 0–13, in other files; chunk ids include the path, so every chunk is
    still distinct; only the citation labels repeat).

The embedding trick (10× and 100× are not re-encoded)
    Encoding 100 × ~2,200 windows on 2 cores would take hours. The enlarged indexes are built by the
    same real `ingest` (same SQLite FTS5 schema, same Chroma collection name, same window ids, same
    upsert batches), but with a `ReuseEmbedder`: an `Embedder` subclass sharing the loaded model whose
    `windows()` cuts the windows exactly as the real one does and, for each window, remembers the 1×
    vector of the window at the same position — same original session, same part, same window
    number n (clamped to the 1× window count) — and whose `encode()` then serves those vectors by
    window text. Positional, not by body text: renumbered headers change the label line's token count
    and so the token budget of every window of a chunk, so bodies rarely match byte for byte. Copies
    i ≥ 1 get the 1× vector plus deterministic Gaussian noise (σ = 0.01 per dimension, renormalised;
    cosine ≈ 0.98 to the original), so Chroma's HNSW graph is not built from exact duplicates.
    Anything without a 1× counterpart is encoded for real (the table's "windows encoded" row).

What is timed, per scale (p50 / p95 over queries × repeat, after 3 untimed warm-up questions)
    - query embedding alone: `embedder.encode_query` (ONNX Runtime unless ORACLE_QUERY_BACKEND=torch);
    - each path in isolation, called one after another: keyword, semantic (includes its own query
      embedding), entity (after the Compendium match), and RRF fusion of their results;
    - the same stages as `Oracle.search` reports them in `timings_ms` (the three paths there run
      concurrently, so each includes waiting for the others; then fusion, loading the chunks and the
      hop to the notes linked to the fused top k), and its `total` (query embedding
      included), and the wall time of the awaited `Oracle.search` call (which also covers opening
      the read snapshot);
    - the BASELINE of the tutorials: rank_bm25 `BM25Okapi` over the chunk texts tokenised as
      lower-case `\\w+` (built once, untimed), `get_scores` + argsort top 20; Chroma `query`
      (n_results=20, no filter) on the same collection with the same query embedding; RRF (k=60) of
      the two top-20 lists in Python, windows mapped to their chunks. Its total includes the query
      embedding the tutorials do (`SentenceTransformer.encode` on torch), like the Oracle's includes its own.
    - the learned fusion (ORACLE_FUSION=learned, the shipped model): a second `Oracle.search` of the
      same question over the same index, its `evidence` and `learned` stages (what it adds to the
      current fusion) and its total;
    - diagnostics: the semantic path's Chroma call as `VectorStore.query` makes it for a player
      (n = 8 × depth, the public collection) and for a game master (both collections); the entity path's
      `Store.count_chunks` and `Store.mention_counts` (the latter over questions that name an entity),
      read once per index generation (`MentionStats`), so these rows are what that cache saves.
    Targets: Oracle p50 at 1× ≤ 30 ms; Oracle p50 10× ÷ 1× ≤ 1.5; baseline p50 ÷ Oracle p50 at 100× ≥ 3;
    the learned fusion adds ≤ 3 ms p50 at every scale.

Indexes are kept in --work DIR (default: a temporary folder, removed at the end). With --work, a
re-run reuses each scale's index without ingesting again (its build time is read back from
`build.json`); --reingest runs the (incremental) real ingest over it anyway.

rank_bm25 is the baseline's library only; the project does not depend on it: `pip install rank_bm25`.

The package, by section: corpus.py (the synthetic copies), embedding.py (the embedding trick),
scale.py (building one scale's index), measure.py (timing one scale: the table's rows), run.py (the
scales in order, the targets, the command line), report.py (the table), __main__.py (runs main()).
"""
