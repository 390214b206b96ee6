"""Output: the table of a run's result, the build rows and the targets' verdicts."""
from __future__ import annotations

from bench.printing import console, print_machine, verdict
from bench.retrieval.measure import ROWS, WARMUP


def print_table(r: dict) -> None:
    from rich.table import Table

    out = console(200)
    print_machine(out, r["machine"])
    s = r["settings"]
    out.print(
        f"Model {r['model']['ref']} ({r['model']['fingerprint']}; questions on "
        f"{r['model'].get('query_runtime', 'torch')}), loaded in {r['model']['load_seconds']} s (untimed). "
        f"k={s['k']}, fusion={s['fusion']}, fused pool {s['fused_pool']}, windows of {s['window_tokens']} tokens, "
        f"sessions split over {s['session_max_words']} words. {r['questions']} questions × {r['repeat']} "
        f"after {WARMUP} warm-ups. Index folder: {r['work']}"
    )
    scales = sorted(int(k) for k in r["results"])
    t = Table(title="Retrieval latency, ms: the Oracle vs the tutorial baseline (BM25Okapi + Chroma + RRF)")
    t.add_column("Measure", justify="left")
    for sc in scales:
        t.add_column(f"{sc}× p50", justify="right")
        t.add_column(f"{sc}× p95", justify="right")
    res = {sc: r["results"][sc] if sc in r["results"] else r["results"][str(sc)] for sc in scales}
    group = None
    for key, label, g in ROWS:
        if group is not None and g != group:
            t.add_section()
        group = g
        style = "bold" if g == "total" else ("dim" if g in {"search", "diag"} else "")
        cells = []
        for sc in scales:
            for q in ("p50", "p95"):
                v = res[sc][q].get(key)
                cells.append("" if v is None else f"{v:.1f}")
        t.add_row(label, *cells, style=style)
    t.add_section()
    b = {sc: r["builds"][sc] if sc in r["builds"] else r["builds"][str(sc)] for sc in scales}
    for label, fn in [
        ("chunks", lambda x, y: f"{x['chunks']:,}"),
        ("windows (SQLite / Chroma)", lambda x, y: f"{x['windows']:,} / {x['chroma_windows']:,}"),
        ("Compendium entities / mentions", lambda x, y: f"{x['entities']:,} / {x['mentions']:,}"),
        ("index build s", lambda x, y: f"{x['build_seconds']:.0f}" + (" (reused)" if x["reused"] else "")),
        ("windows encoded / reused from 1×", lambda x, y: f"{x['windows_encoded']:,} / {x['windows_reused']:,}"),
        ("SQLite / Chroma MB", lambda x, y: f"{x['sqlite_mb']:.0f} / {x['chroma_mb']:.0f}"),
        ("baseline BM25 build s (untimed)", lambda x, y: f"{y['bm25_build_seconds']:.1f}"),
        ("other processes' CPU share meanwhile",
         lambda x, y: "" if y["others_cpu_share"] is None else f"{y['others_cpu_share']:.0%}"),
    ]:
        cells = []
        for sc in scales:
            cells += [fn(b[sc], res[sc]), ""]
        t.add_row(label, *cells, style="dim")
    out.print(t)
    for sc in scales:
        ph = b[sc].get("build_phases") or {}
        if ph:
            out.print(f"[dim]{sc}× build phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items()) + "[/]")
    for c in r["checks"]:
        value = "n/a" if c["value"] is None else f"{c['value']:.2f} {c['unit']}"
        out.print(f"{c['name']}: {value} (target {c['target']}) {verdict(c['pass'])}")
    busy = [res[sc]["others_cpu_share"] for sc in scales if res[sc]["others_cpu_share"] is not None]
    if busy and max(busy) > 0.05:
        out.print(f"[red]Other processes used up to {max(busy):.0%} of the cores while measuring: "
                      "the numbers are noisy.[/]")
