"""Retrieval quality on every question bank: the working tree next to a baseline commit, in one table.

    python -m bench.banks [--banks sample,crd3,...] [--quick] [--baseline REF | --no-baseline]
                          [--work DIR] [--k N] [--diff BANK] [--json] [--save FILE] [--show FILE]

Why
    A change to parsing, chunking, the paths or the fusion moves every bank at once, and not all the
    same way: what helps the conversations of LoCoMo can cost the sample campaign. `oracle eval` runs
    one bank on one version of the code; this runs all of them on two versions, the working tree
    and a baseline commit (`--baseline`, default HEAD), in one run, so a change is judged by every
    bank in one table rather than by the one its author was looking at.

What runs
    For each code version and bank, the real command line in a process of its own:
    `python -m oracle.cli ingest --notes NOTES --data DATA --json`, then
    `python -m oracle.cli eval BANK --notes NOTES --data DATA --json` (the eval would ingest by itself;
    the ingest runs first so its time is measured apart). Each process gets ORACLE_ANNOTATE=false,
    ORACLE_EMBED_WORKER=false, OLLAMA_HOST at a closed local port (nothing waits on a model, and no
    reranker: the final list is the fused one), ORACLE_CAMPAIGNS removed, and PYTHONPATH set to that
    version's tree, so that version's `oracle` package is imported, not the editable install's (each
    version's `oracle.__file__` is checked once, in a child). The processes run in the work folder,
    where there is no `.env`. Other ORACLE_* settings of this shell pass through to both versions.

    The baseline is a `git worktree add --detach` of REF in the work folder (`WORK/trees/<commit>`,
    reused while it is at the same commit and clean); the checkout at the repository root is never
    touched. Both versions read the same notes and the same bank files, the working tree's: only the
    code differs. Each (version, bank) keeps its own index in `WORK/data/<commit or "worktree">/<bank>`,
    so a second run reuses them (the ingest is incremental: it re-reads only what changed). Each
    child's stderr is kept in `WORK/logs/`.

The banks (one row each; `--banks a,b` picks rows, `vaults` every vault row; `--quick` = sample and
the vault banks)
    sample: the bundled campaign, notes/ and notes/questions.jsonl.
    crd3: EVAL_DIR/crd3/notes with bench/data/crd3_dev.jsonl.
    locomo: the five dev conversations (conv-26, 30, 41, 42, 43), each its own notes folder and index,
      one row of their means weighted by answerable questions (each conversation's numbers in --json).
    scifact: EVAL_DIR/scifact/notes (5,183 abstracts) with questions.train.jsonl.
    <vault>: one row per bench/data/vaults/<vault>.dev.jsonl, with EVAL_DIR/vaults/<vault>/notes.

The table
    One row per bank; a column per measure `oracle eval` reports at the final k for the fused stage
    (its `fused_*` keys: recall@k, any gold in the top 5 and 10, MRR, nDCG@10, all gold in the top 10;
    means over the answerable questions), each cell "baseline → current" with the difference under
    it; then the seconds each bank took to ingest and evaluate per version. `--diff BANK` then lists
    that bank's questions whose first gold changed rank in the fused order between the versions (from
    each question's `fused` places in the eval JSON, collapsed by label as `oracle eval` counts units;
    "—": not in the fused list), with what stood first. `--json` prints everything instead (both
    versions' full eval and ingest JSON per bank and per conversation); `--save FILE` writes it too
    (after every bank, so a run cut short keeps its banks; without it, `WORK/last-run.json`);
    `--show FILE` prints a saved run's table and runs nothing.

    These are quality numbers: the same code over the same notes gives the same table, save for the
    few questions where Chroma's approximate search returns another set of windows from another
    build of the index. The seconds are only there to say what a run costs. It exits 1 when a child
    process failed (its cells read "failed"; the log names the file).
"""
