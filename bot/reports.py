"""What the bot says about the index and the journal: reingest progress and summary, what is new for
players, the unanswered questions. Text only; the cog posts it and `formatting.split_message` cuts it."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from oracle import INGEST_STAGES, Fallbacks, IngestProgress, IngestReport, Titled, Unanswered, Watching

SHOWN_PER_LIST = 25  # files named per list (added, changed, ...) before "…and N more"
WHY = {"not_found": "nothing found", "abstained": "the notes do not say", "voted_down": "👎"}


def progress_line(latest: dict[str, IngestProgress]) -> str:
    names = INGEST_STAGES
    parts = [f"{names.get(stage, stage)} {p.done}/{p.total}" if p.total else names.get(stage, stage)
             for stage, p in latest.items() if stage != "done"]
    return "⚙️ Reingesting: " + ", ".join(parts)


def _named(paths: Sequence[str], titles: dict[str, list[str]]) -> list[str]:
    lines = []
    for path in paths[:SHOWN_PER_LIST]:
        named = titles.get(path, [])
        lines.append(f"• `{path}`" + (f": {', '.join(named[:6])}" + (" …" if len(named) > 6 else "") if named else ""))
    if len(paths) > SHOWN_PER_LIST:
        lines.append(f"• …and {len(paths) - SHOWN_PER_LIST} more (`oracle ingest` lists them all)")
    return lines


def ingest_summary(report: IngestReport, titles: Sequence[Titled] = ()) -> str:
    """The game master's summary: counts, then every note added, changed or removed (with the
    sessions and labels it holds now), every note skipped and every warning."""
    by_path: dict[str, list[str]] = {}
    for t in titles:
        by_path.setdefault(t.path, []).append(t.title)
    lines = [
        f"✅ Reingest done in {report.seconds:.1f} s: {len(report.added)} added, {len(report.changed)} changed, "
        f"{len(report.removed)} removed, {report.unchanged} unchanged, {len(report.skipped)} skipped.",
        f"{report.chunks} passages indexed, {report.windows_embedded} embedded, "
        f"annotations {report.annotations_done}/{report.annotations_done + report.annotations_missing}.",
    ]
    if report.annotation_note:
        lines.append(f"Annotations: {report.annotation_note}")
    if report.secrets:
        whole = sum(1 for n in report.secrets.values() if n < 0)
        blocks = sum(n for n in report.secrets.values() if n > 0)
        others = len(report.secrets) - whole
        lines.append(
            f"🔒 Kept from players: {whole} game-master-only {'note' if whole == 1 else 'notes'}, "
            f"{blocks} secret {'block' if blocks == 1 else 'blocks'} in {others} other {'note' if others == 1 else 'notes'}"
            " (per file: `oracle ingest`)."
        )
    for title, paths in (("**Added**", report.added), ("**Changed**", report.changed), ("**Removed**", report.removed)):
        if paths:
            lines.append(title)
            lines += _named(sorted(paths), by_path if title != "**Removed**" else {})
    if report.skipped:
        lines.append("**Skipped**")
        lines += [f"• `{s.path}`: {s.reason}" for s in report.skipped]
    if report.warnings:
        lines.append("**Warnings**")
        lines += [f"• `{w.path}`: {w.reason}" for w in report.warnings]
    return "\n".join(lines)


def announcement(new: Sequence[Titled]) -> str:
    """For players: what the notes they can read hold now that they did not before."""
    sessions = [t.title for t in new if t.kind == "session"]
    others = [t.title for t in new if t.kind != "session"]
    lines = []
    if sessions:
        lines.append("📜 New in the notes: " + "; ".join(sessions))
    if others:
        lines.append(("Also new: " if sessions else "📜 New in the notes: ") + "; ".join(others))
    return "\n".join(lines)


def unanswered_text(groups: Sequence[Unanswered]) -> str:
    if not groups:
        return "Every question asked so far found an answer in the notes. Nothing to write up."
    lines = ["**What the notes could not answer**, newest first (write these up before next session):"]
    for g in groups:
        asked = f" · asked {g.asked}×" if g.asked > 1 else ""
        why = ", ".join(WHY.get(w, w) for w in sorted(g.why))
        lines.append(f"• “{g.question[:300]}” — {why}{asked} · last {g.last} UTC")
    lines.append("(`oracle questions --unanswered` lists them all; `--bank FILE` exports confirmed questions.)")
    return "\n".join(lines)


def fallback_line(fallbacks: Fallbacks) -> str:
    """A game master's line of /oracle status: answers given as passages because the model failed
    (too slow for ORACLE_FIRST_WORDS_SECONDS, down, cut) since the bot started, and why the last."""
    if not fallbacks.count or fallbacks.last is None:
        return "**Model fallbacks:** none since the bot started"
    question, reason, at = fallbacks.last
    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"**Model fallbacks:** {fallbacks.count} answers given as passages since the bot started "
            f"(last: “{question[:200]}”, {when}: {reason[:300]})")


def watching_line(state: Watching | None) -> str:
    """A game master's line of /oracle status with ORACLE_WATCH: whether the notes are watched, or
    why the watch stopped and when it tries again."""
    if state is None or not (state.since or state.stopped):
        return "**Watching the notes:** starting"
    if state.stopped:
        return f"⚠️ **Watching the notes:** stopped: {state.stopped[:300]}; watching again in {state.again_in:.0f} s"
    return f"**Watching the notes:** yes, since {state.since}"
