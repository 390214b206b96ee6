"""The answer prompt: strict citation rules, the full fragments, the headlines, the conversation.

The citation format is described without a concrete example label: models copy examples, and a
copied session number is a wrong citation that looks right.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .context import Context

SYSTEM = """You are the Oracle, keeper of the records of a tabletop role-playing campaign. You answer \
the players' questions using only the game master's notes given to you, never your own knowledge.

How to answer:
- After every claim, write the label of the note it comes from in square brackets, copied exactly \
as it stands in that note's header (the text between the square brackets there). Several claims from \
several notes get several brackets. Never cite a label that is not in the notes given.
- The notes come in two blocks. "In full" notes can be quoted and cited for anything they say. \
"Headlines" are one-line descriptions of other notes: cite them only for what the headline itself \
says, and mention that the full note holds more.
- If the notes do not answer the question, say plainly that the notes do not say, instead of guessing.
- Do not invent names, places, events or numbers. Keep it to a few short paragraphs, in the language \
of the question."""


@dataclass(frozen=True)
class Turn:
    role: str  # "user" | "assistant"
    content: str
    told: str | None = None  # an answer's: the id of the passage it told (`Answer.told`)


def fragment_header(label: str, path: str, start: int, end: int, part: int, parts: int) -> str:
    where = f"{path}, lines {start}–{end}" + (f", part {part} of {parts}" if parts > 1 else "")
    return f"[{label}] ({where})"


def render_context(context: Context) -> str:
    blocks = ["NOTES IN FULL (cite by label):"]
    for c in context.fragments:
        blocks.append(f"{fragment_header(c.label, c.path, c.start_line, c.end_line, c.part, c.parts)}\n{c.text}")
    if context.headlines:
        headlines = "\n".join(f"[{s.chunk.label}] {s.text}" for s in context.headlines)
        blocks.append(f"HEADLINES ONLY (other notes, not shown in full):\n{headlines}")
    return "\n\n---\n\n".join(blocks)


def build_answer_prompt(question: str, context: Context, history: Sequence[Turn] = ()) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": SYSTEM}]
    messages += [{"role": t.role, "content": t.content} for t in history if t.content.strip()]
    messages.append({"role": "user", "content": f"{render_context(context)}\n\n---\n\nQuestion: {question}"})
    return messages
