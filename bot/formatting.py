"""Turning answers into Discord messages within Discord's limits. No retrieval logic here."""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import discord

from oracle import Answer, Dossier, VaultReport, texts

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


EMBED_TITLE_LIMIT = 256
EMBED_TOTAL_LIMIT = 6000
EXCERPT_LIMIT = 900  # characters of one cited excerpt: six of them fit Discord's 6,000 per message


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Asker:
    """Who asked and what, shown on a public answer (Discord itself shows only "X used /oracle ask")."""

    name: str
    title: str  # the question, or what the answer is about
    icon: str | None = None
    url: str | None = None  # where the title links (the message asked about)


def sources_embed(answer: Answer, asker: Asker | None = None) -> discord.Embed | None:
    """The answer's embed: who asked and the question (public answers), and the sources cited."""
    if not answer.citations and asker is None:
        return None
    words = texts(answer.language)
    lines = [f"**{c.label}** — `{c.path}` {words.lines.format(start=c.start_line, end=c.end_line)}"
             for c in answer.citations]
    embed = discord.Embed(description=_fit(lines, EMBED_DESCRIPTION_LIMIT) or None)
    if asker is not None:
        embed.title = clip(asker.title, EMBED_TITLE_LIMIT)
        embed.url = asker.url
        embed.set_author(name=clip(words.asked.format(name=asker.name), EMBED_TITLE_LIMIT), icon_url=asker.icon)
    if answer.citations:
        embed.set_footer(text=words.passages if answer.mode == "passages" else words.sources)
    return embed


def excerpt_embeds(cited: Sequence[tuple[str, str, int, int, str]]) -> list[discord.Embed]:
    """What each citation points at, as the clicker may read it: (label, path, start, end, text)."""
    embeds: list[discord.Embed] = []
    total = 0
    for label, path, start, end, text in cited[:10]:
        body = clip_lines(text, EXCERPT_LIMIT) if text else "*Not in the notes you can read now (they may have changed).*"
        embed = discord.Embed(title=clip(label, EMBED_TITLE_LIMIT), description=body)
        embed.set_footer(text=clip(f"{path} · lines {start}–{end}", 2048))
        size = len(embed.title or "") + len(body) + len(embed.footer.text or "")
        if total + size > EMBED_TOTAL_LIMIT:
            break
        total += size
        embeds.append(embed)
    return embeds


def clip_lines(text: str, limit: int) -> str:
    """At most `limit` characters of text, cut at a line, then a word, with an ellipsis."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit - 1)
    if cut < limit // 2:
        cut = text.rfind(" ", 0, limit - 1)
    return text[: cut if cut > 0 else limit - 1].rstrip() + "…"


async def deliver(
    answer: Answer,
    first: Callable[[str, Any, Any], Awaitable[Any]],
    more: Callable[[str, Any, Any], Awaitable[Any]],
    *,
    asker: Asker | None = None,
    view: discord.ui.View | None = None,
) -> Any:
    """An answer as Discord messages within their limits: the first piece through `first` (an edit
    of what is already shown, or a new message), the others through `more`, each called with
    (text, embed, view); the embed (who asked, the sources) and the buttons go on the last piece.
    Returns what `first` returned: the message a thread opens on."""
    pieces = split_message(answer_text(answer))
    embed = sources_embed(answer, asker)
    buttons: Any = view if view is not None else discord.utils.MISSING
    last = len(pieces) - 1
    shown = await first(pieces[0], embed if last == 0 else None, buttons if last == 0 else discord.utils.MISSING)
    for i, piece in enumerate(pieces[1:], 1):
        await more(piece, embed if i == last and embed else discord.utils.MISSING,
                   buttons if i == last else discord.utils.MISSING)
    return shown


def answer_text(answer: Answer) -> str:
    if answer.mode == "passages":
        return f"**{texts(answer.language).passages_title}** {answer.text}"
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


def vault_lines(report: VaultReport, room: int) -> list[str]:
    """What the Oracle made of the notes, for the game master's status: as many of the report's lines
    as fit in `room` characters, then where the rest is."""
    out = ["**What the Oracle made of your notes:**"]
    rest = "… the whole report: `oracle status --gm`"
    used = len(out[0]) + len(rest) + 2
    for line in report.lines():
        shown = f"- {line.strip()}" if not line.startswith(" ") else f"  - {line.strip()}"
        if used + len(shown) + 1 > room:
            out.append(rest)
            return out
        out.append(shown)
        used += len(shown) + 1
    return out
