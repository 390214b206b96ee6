"""Turning answers into Discord messages within Discord's limits. No retrieval logic here."""
from __future__ import annotations

import re

import discord

from oracle.answer.results import Answer
from oracle.dossier import Dossier

MESSAGE_LIMIT = 2000
EMBED_DESCRIPTION_LIMIT = 4096
THREAD_NAME_LIMIT = 100

PROGRESS = {
    "searching": "🔎 Searching the notes…",
    "queued": "⏳ Queued: other questions are being answered first…",
    "ranking": "📚 Ranking what the notes say…",
    "writing": "✍️ Writing the answer…",
}


def split_message(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Pieces of at most `limit` characters, cut at paragraphs, then sentences, then words."""
    text = text.strip()
    pieces: list[str] = []
    while len(text) > limit:
        window = text[:limit]
        cut = window.rfind("\n\n")
        if cut < limit // 3:
            ends = [m.end() for m in re.finditer(r"[.!?…][)\]\"'”]*\s", window)]
            spaces = [m.start() for m in re.finditer(r"\s", window)]
            cut = ends[-1] if ends and ends[-1] >= limit // 3 else (spaces[-1] if spaces else -1)
        if cut <= 0:
            cut = limit
        pieces.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        pieces.append(text)
    return pieces or ["…"]


def thread_name(question: str) -> str:
    name = " ".join(question.split()) or "Oracle"
    return name if len(name) <= THREAD_NAME_LIMIT else name[: THREAD_NAME_LIMIT - 1] + "…"


def _fit(lines: list[str], limit: int) -> str:
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        more = f"…and {len(lines) - i} more"
        if used + len(line) + 1 > limit - len(more) - 1:
            out.append(more)
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def _fit_joined(items: list[str], limit: int) -> str:
    """As many comma-separated items as fit, then how many were left out."""
    shown: list[str] = []
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        candidate = ", ".join([*shown, item]) + (f", …and {rest} more" if rest else "")
        if len(candidate) > limit:
            return ", ".join(shown) + f", …and {len(items) - i} more" if shown else f"…and {len(items)} more"
        shown.append(item)
    return ", ".join(shown)


def sources_embed(answer: Answer) -> discord.Embed | None:
    if not answer.citations:
        return None
    title = "Passages" if answer.mode == "passages" else "Sources"
    lines = [f"**{c.label}** — `{c.path}` lines {c.start_line}–{c.end_line}" for c in answer.citations]
    return discord.Embed(title=title, description=_fit(lines, EMBED_DESCRIPTION_LIMIT))


def answer_text(answer: Answer) -> str:
    if answer.mode == "passages":
        return f"**Passages, not an answer.** {answer.text}"
    return answer.text


def dossier_embed(dossier: Dossier) -> discord.Embed:
    data = dossier.to_json()
    embed = discord.Embed(title=dossier.name[:256], description=_fit(
        [f"**{m.label}** — `{m.path}` lines {m.start_line}–{m.end_line} ({m.count}×)" for m in dossier.mentions],
        EMBED_DESCRIPTION_LIMIT,
    ) or "No mentions in the notes.")
    if dossier.aliases:
        embed.add_field(name="Also called", value=_fit_joined(list(dossier.aliases), 1024), inline=False)
    if data["first"]:
        embed.add_field(name="First seen", value=data["first"], inline=True)
        embed.add_field(name="Last seen", value=data["last"], inline=True)
    embed.set_footer(text=f"{dossier.kind} · mentioned under {len(dossier.mentions)} labels")
    return embed
