"""The tables a load run prints: the run's (time to answer per phase against idle, stalls, latency,
memory) and, with --campaigns, the several campaigns'."""
from __future__ import annotations

from bench.load.phases import ALL_PHASES, ANSWER_RATIO_TARGET, ANSWERS_IDLE, ATTRIBUTE_MS, PHASES
from bench.load.report import failed_phases
from bench.printing import console, new_table, print_machine, verdict


def _f(x, nd: int = 1) -> str:
    return "" if x is None else f"{x:,.{nd}f}"


def print_table(r: dict) -> None:
    out = console(170)
    m = r["machine"]
    print_machine(out, m, f"; GIL switch interval {m['switch_interval_ms']:g} ms")
    if m.get("machine_pauses") is not None:
        out.print(f"A process of its own saw the machine pause {m['machine_pauses']} times for 30 ms or more "
                      f"(longest {m['machine_pause_max_ms']:g} ms); a late wake-up inside one says so below")
    out.print(
        f"Notes: {r['notes_dir']}; {r['questions']} questions from {r['questions_from']}; "
        f"{r['concurrency']} at once; LLM: fake Ollama answering instantly (llm_concurrency {r['llm_concurrency']}); "
        f"searches at once: {r.get('search_concurrency', '?')}; "
        f"model loaded + warmed in {r['model_load_seconds']:.1f} s"
        + ("; [yellow]asyncio debug mode on: latencies inflated[/]" if r["asyncio_debug"] else "")
        + (f"; [yellow]gc.freeze() after startup ({r['gc_frozen_objects']:,} objects)[/]" if r.get("gc_freeze") else "")
    )

    t = new_table("Oracle load benchmark", [("Measure", "left"), ("n", "right"), ("p50", "right"), ("p95", "right"),
                                            ("p99", "right"), ("max", "right"), ("Target", "right"),
                                            ("Result", "center")])
    n = r["concurrency"]

    # 1. The time to answer while notes are indexed, against idle
    t.add_row(f"[bold]1. Time to answer without a model (retrieval + passages), ms: one question at a time, "
              f"{r['answer_gap']:g} s apart[/]", "asks", "", "", "", "", "", "")
    idle = r["answers_idle"]
    t.add_row(f"   {ANSWERS_IDLE} (nothing indexed)", str(idle["n"]), _f(idle["p50"]), _f(idle["p95"]), _f(idle["p99"]),
              _f(idle["max"]), "", "")

    def retrieval_row(q: dict) -> None:
        """The retrieval's share (the trace's total: the three paths to the linked notes), for information."""
        v, base = q["stages_ms"].get("total"), idle["stages_ms"].get("total")
        if v:
            ratio = f"[dim]{v['p95'] / base['p95']:.2f}×[/]" if base and base["p95"] else ""
            t.add_row("     [dim]of which retrieval[/]", f"[dim]{v['n']}[/]", f"[dim]{_f(v['p50'])}[/]",
                      f"[dim]{_f(v['p95'])}[/]", f"[dim]{_f(v['p99'])}[/]", f"[dim]{_f(v['max'])}[/]", "", ratio)

    retrieval_row(idle)
    for name, data in r["ingests"].items():
        q = data["questions"]
        what = f"{data['seconds']:.1f} s, {data.get('windows_embedded', '?')} windows"
        if data.get("runs"):
            what += f", {data['runs']} reingests"
        if name.endswith("another process"):
            what += f", nice {r['other_nice']}"
        ratio = data.get("p95_vs_idle")
        result = f"{ratio:.2f}× {verdict(data['pass'])}" if ratio is not None else verdict(False)
        t.add_row(f"   {name} ({what})", str(q["n"]), _f(q["p50"]), _f(q["p95"]), _f(q["p99"]), _f(q["max"]),
                  f"p95 ≤ {ANSWER_RATIO_TARGET:g}× idle", result)
        retrieval_row(q)
        for err, count in q["errors"].items():
            t.add_row(f"     [red]error ×{count}: {err}[/]", "", "", "", "", "", "", "")
    found = r.get("other_process_edit_found")
    if found is not None:
        ok = bool(found) and all(found.values())
        paths = ", ".join(f"{path} {'yes' if hit else 'no'}" for path, hit in found.items())
        t.add_row(f"   the next question after another process's reingest finds its edit ({paths})", "", "", "", "",
                  "", "every path", verdict(ok))
    for label, error in failed_phases(r):
        t.add_row(f"   [red]{label} failed: {error}[/]", "", "", "", "", "", "", "")

    # 2. Stalls, for information
    t.add_row("[bold]2. Event-loop stall, ms (10 ms sleep, lateness), for information[/]", "ticks", "", "", "", "", "", "")
    for name in ALL_PHASES:
        s = r["stall"].get(name)
        if s is None:
            continue
        extra = ""
        if name == PHASES[1]:
            fi = r["full_ingest"]
            extra = f" ({fi['seconds']:.0f} s, {fi.get('windows_embedded', '?')} windows, {fi['asked']} waves of {n})"
        elif name in (PHASES[0], ANSWERS_IDLE):
            extra = f" ({s['seconds']:.0f} s)"
        t.add_row(f"   {name}{extra}", f"{s['ticks']:,}", _f(s["stall_p50_ms"]), "", _f(s["stall_p99_ms"]),
                  _f(s["stall_max_ms"]), "", "")
        g = s["gc"]
        if g["gen2"]:
            t.add_row(f"     [dim]full (gen 2) garbage collections ×{g['gen2']} ({g['gen2_on_loop']} on the loop thread), "
                      f"pause p50 {g['gen2_p50_ms']:.0f} ms (CPU {g.get('gen2_cpu_p50_ms', 0):.0f}, max "
                      f"{g.get('gen2_cpu_max_ms', 0):.0f}); all GC {g['total_ms']:,.0f} ms in {g['count']:,} runs[/]",
                      "", "", "", "", f"[dim]{g['gen2_max_ms']:.0f}[/]", "", "")
        if s["late_ticks"]:
            what = "; ".join(f"{k} ×{v}" for k, v in list(s["late_ticks_overlapping"].items())[:4])
            t.add_row(f"     [dim]wake-ups ≥ {ATTRIBUTE_MS:.0f} ms late ×{s['late_ticks']}, running meanwhile: {what}[/]",
                      "", "", "", "", "", "", "")
        for b in s["blockers"][:3]:
            gcn = f", GC {b['gc_ms_of_max']:.0f}" if b["gc_ms_of_max"] >= 1 else ""
            t.add_row(f"     [dim]slow step ×{b['count']} (worst: CPU {b['cpu_ms_of_max']:.0f} ms{gcn}): {b['where']}[/]",
                      "", "", "", "", f"[dim]{b['max_ms']:.0f}[/]", "", "")
        for st in s["stacks"][:1]:
            t.add_row(f"     [dim]stack sampled ×{st['samples']}: {st['where']}[/]", "", "", "", "",
                      f"[dim]{st['max_late_ms']:.0f}[/]", "", "")
        if s["select_overshoot_max_ms"] and s["select_overshoot_max_ms"] >= 20:
            t.add_row(f"     [dim]idle poll woke late by up to {s['select_overshoot_max_ms']:.0f} ms (GIL/CPU wait)[/]",
                      "", "", "", "", "", "", "")
    a = r["stall"]["all phases"]
    t.add_row("   all phases", f"{a['n']:,}", _f(a["p50"]), _f(a["p95"]), _f(a["p99"]), _f(a["max"]), "", "")

    # 3. Latency
    t.add_row("[bold]3. Oracle.ask wall time, ms (LLM instant)[/]", "asks", "", "", "", "", "", "")
    for name, groups in r["latency"].items():
        for key in ("x1", f"x{n}"):
            g = groups[key]
            modes = ", ".join(f"{k} {v}" for k, v in sorted(g["modes"].items()))
            tp = f", {groups['throughput_qps']:.1f} q/s" if key != "x1" else ""
            t.add_row(f"   reranker={name}, {key[1:]} at a time ({modes}{tp})", str(g["n"]), _f(g["p50"]), _f(g["p95"]),
                      _f(g["p99"]), _f(g["max"]), "", "")
        reasons = groups["x1"]["rerank_reasons"]
        if name == "llm" and reasons:
            t.add_row(f"     [dim]rerank: {next(iter(reasons))}[/]", "", "", "", "", "", "", "")
    g = r["full_ingest"]["questions"]
    modes = ", ".join(f"{k} {v}" for k, v in sorted(g["modes"].items()))
    t.add_row(f"   reranker=none, {n} at a time during the full ingest ({modes})", str(g["n"]), _f(g["p50"]), _f(g["p95"]),
              _f(g["p99"]), _f(g["max"]), "", "")
    for err, count in g["errors"].items():
        t.add_row(f"     [red]error ×{count}: {err}[/]", "", "", "", "", "", "", "")
    order = ["expand", "keyword", "semantic", "entity", "fusion", "load", "rerank", "answer", "total"]
    for key in ("x1", f"x{n}"):
        stages = r["latency"]["none"][key]["stages_ms"]
        t.add_row(f"   [dim]stages (trace timings_ms), reranker=none, {key[1:]} at a time:[/]", "", "", "", "", "", "", "")
        for st in sorted(stages, key=lambda s: order.index(s) if s in order else 99):
            v = stages[st]
            t.add_row(f"     [dim]{st}[/]", f"[dim]{v['n']}[/]", f"[dim]{_f(v['p50'], 2)}[/]", f"[dim]{_f(v['p95'], 2)}[/]",
                      f"[dim]{_f(v['p99'], 2)}[/]", f"[dim]{_f(v['max'], 2)}[/]", "", "")

    # 4. Memory
    t.add_row("[bold]4. Peak RSS, MiB (ru_maxrss; current RSS in brackets)[/]", "", "", "", "", "", "", "")
    names = {"start_before_torch": "at start, before torch", "after_model_load": "after the bundled model loads",
             "after_full_ingest": "after the full ingest", "after_load_phase": "after the answering phase",
             "end": "after the answers alone",
             "end_with_second_campaigns": "at the end (after the reingests and the second campaigns)",
             "worker_after_model_load": "embedding worker process, after its model loads",
             "worker_end": "embedding worker process, at the end"}
    for key, label in names.items():
        p = r["rss"].get(key)
        if p:
            t.add_row(f"   {label} [dim](current {p['current_mib']:,.0f})[/]", "", "", "", "", f"{p['peak_mib']:,.0f}", "", "")

    e = r.get("edit")
    edited = f" Edit: {e['path']} line {e['line']} ({e['session']})." if e else ""
    t.caption = (
        f"Time to answer = `answer_without_model`: the three paths, fusion, linked notes, selection (reranker none) "
        f"and the passages a reply shows, in one snapshot. Stall = how late a 10 ms sleep wakes. 'slow step' = a task "
        f"step or callback inside a loop iteration whose callbacks took ≥ the slow threshold (file:line "
        f"resumed→stopped, max ms). 'stack' = the main thread's stack (sampled by a watchdog thread) while the loop "
        f"was overdue, max = how late.{edited}"
    )
    out.print(t)


def print_campaigns_table(r: dict) -> None:
    out = console(170)
    n = r["concurrency"]
    tpl = r["template"]
    t = new_table(f"Campaigns in one process: {r['notes_dir']} each ({tpl['chunks']} chunks, {tpl['windows']} windows)",
                  [(name, "right") for name in (
                      "campaigns", "Chroma", "models loaded (bot process)", "open s", "peak RSS after open, MiB",
                      "peak RSS at the end, MiB", "RSS at the end, MiB", "embedding worker peak RSS, MiB",
                      "Chroma server RSS now / peak, MiB", "ask p50 / p95 ms, 1 at a time",
                      f"ask p50 / p95 ms, {n} at once")])
    for run in r["runs"]:
        w = run["worker_rss"]
        server = run.get("chroma_server_rss") or {}
        t.add_row(str(run["campaigns"]), run.get("store", "embedded"), str(run["models_loaded_in_process"]),
                  f"{run['open_seconds']:.1f}",
                  f"{run['rss']['after_open']['peak_mib']:,.0f}", f"{run['rss']['end']['peak_mib']:,.0f}",
                  f"{run['rss']['end']['current_mib']:,.0f}",
                  f"{w['peak_mib']:,.0f}" if w and w["peak_mib"] else "—",
                  f"{server['current_mib']:,.0f} / {server['peak_mib']:,.0f}" if server.get("peak_mib") else "—",
                  f"{_f(run['x1']['p50'])} / {_f(run['x1']['p95'])}", f"{_f(run[f'x{n}']['p50'])} / {_f(run[f'x{n}']['p95'])}")
    runs = r["runs"]
    if any(run.get("ingest_beside") for run in runs):
        t2 = new_table(f"One more campaign built from cold while the others answer {n} questions at once, a second apart",
                       [(name, "right") for name in (
                           "campaigns answering", "Chroma", "windows", "seconds", "stall p50 / p99 / max, ms",
                           "wake-ups ≥ 50 ms late", "machine pauses (max ms) / late wake-ups in one",
                           "full GCs, longest ms", "questions p50 / p95, ms", "bot RSS before → after, MiB",
                           "worker RSS now / peak, MiB")])
        for run in runs:
            d = run.get("ingest_beside")
            if not d:
                continue
            st, q, w = d["stall"], d["questions"], d.get("worker_rss") or {}
            t2.add_row(str(run["campaigns"]), run.get("store", "embedded"), f"{d['windows']:,}", f"{d['seconds']:.0f}",
                       f"{_f(st['p50'])} / {_f(st['p99'])} / {_f(st['max'])}", f"{d['late_50ms']} of {st['n']:,}",
                       f"{d.get('machine_pauses', '?')} ({_f(d.get('machine_pause_max_ms'))}) / "
                       f"{d.get('late_ticks_in_machine_pause', '?')}",
                       f"{d.get('full_collections', '?')}, {_f(d.get('full_collection_max_ms', 0))}",
                       f"{_f(q['p50'])} / {_f(q['p95'])}",
                       f"{d['rss_before']['current_mib']:,.0f} → {d['rss_after']['current_mib']:,.0f}",
                       f"{w.get('current_mib') or 0:,.0f} / {w.get('peak_mib') or 0:,.0f}")
        out.print(t2)
    captions = []
    for store in dict.fromkeys(run.get("store", "embedded") for run in runs):
        same = [run for run in runs if run.get("store", "embedded") == store]
        a, b = same[0], same[-1]
        if b["campaigns"] > a["campaigns"]:
            per = (b["rss"]["end"]["current_mib"] - a["rss"]["end"]["current_mib"]) / (b["campaigns"] - a["campaigns"])
            captions.append(f"With {store} Chroma each further campaign adds about {per:,.0f} MiB to the bot process "
                            f"(RSS at the end, {a['campaigns']} → {b['campaigns']} campaigns).")
    if captions:
        t.caption = " ".join(captions) + " The model is loaded once in the bot and once in the embedding worker."
    out.print(t)
