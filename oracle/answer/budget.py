"""Fit the answer prompt into the context window, so the server never cuts it.

A prompt longer than the window is cut by Ollama from the front, and the front is the system prompt
with the citation rules. So the prompt is made to fit before it is sent: the estimated prompt
(`tokens.message_tokens`, an over-estimate) must fit `num_ctx` less the reply's budget. What goes,
in order, until it fits:
1. headlines (one-line annotations), the last first;
2. thread history, the oldest turn first;
3. fragments, the lowest-ranked first, down to one;
4. the last fragment is trimmed at a paragraph boundary (else a line, else a word) and marked `[…]`.
The system prompt and the question are never touched.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..tokens import MESSAGE_OVERHEAD, estimate_tokens, message_tokens, trim_to_tokens
from ..types import Chunk
from .context import Context, Headline
from .prompt import SYSTEM, Turn, build_answer_prompt, fragment_header

TRIMMED = "[…]"


@dataclass(frozen=True)
class Dropped:
    """What left the prompt to make it fit: labels, in the order they went."""

    headlines: list[str]
    fragments: list[str]
    trimmed: str | None  # the one fragment cut short, if any


@dataclass(frozen=True)
class PromptTokens:
    """The answer trace's "tokens": the prompt's estimated parts and what was dropped, then Ollama's
    own counts once it has answered (None until then, and left out of the JSON)."""

    num_ctx: int
    budget: int
    system: int
    question: int
    history: int
    fragments: int
    headlines: int
    total: int
    dropped: Dropped
    prompt_eval_count: int | None = None
    eval_count: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["dropped"] = vars(self.dropped).copy()
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Fitted:
    context: Context
    history: tuple[Turn, ...]
    messages: list[dict[str, str]]
    tokens: PromptTokens


def fit_answer_prompt(
    question: str, context: Context, history: Sequence[Turn], *, num_ctx: int, reply_tokens: int
) -> Fitted:
    budget = num_ctx - reply_tokens
    fragments = list(context.fragments)
    headlines: list[Headline] = list(context.headlines)
    turns = [t for t in history if t.content.strip()]
    dropped_headlines: list[str] = []
    dropped_fragments: list[str] = []
    trimmed: str | None = None

    def build() -> tuple[Context, list[dict[str, str]]]:
        ctx = Context(tuple(fragments), tuple(headlines))
        return ctx, build_answer_prompt(question, ctx, turns)

    fitted, messages = build()
    total = message_tokens(messages)
    while total > budget:
        if headlines:
            dropped_headlines.append(headlines.pop().chunk.label)
        elif turns:
            turns.pop(0)
        elif len(fragments) > 1:
            dropped_fragments.append(fragments.pop().label)
        elif fragments:
            chunk = fragments[0]
            shorter = _trim(chunk, estimate_tokens(chunk.text) - (total - budget))
            if shorter is None:
                dropped_fragments.append(fragments.pop().label)
            else:
                fragments[0], trimmed = shorter, chunk.label
        else:
            break  # the system prompt and the question alone are over: sent as they are
        fitted, messages = build()
        total = message_tokens(messages)

    tokens = PromptTokens(
        num_ctx=num_ctx,
        budget=budget,
        system=MESSAGE_OVERHEAD + estimate_tokens(SYSTEM),
        question=estimate_tokens(f"Question: {question}"),
        history=sum(MESSAGE_OVERHEAD + estimate_tokens(t.content) for t in turns),
        fragments=sum(estimate_tokens(_block(c)) for c in fragments),
        headlines=sum(estimate_tokens(f"[{h.chunk.label}] {h.text}") for h in headlines),
        total=total,
        dropped=Dropped(dropped_headlines, dropped_fragments, trimmed),
    )
    return Fitted(fitted, tuple(turns), messages, tokens)


def _block(c: Chunk) -> str:
    return f"{fragment_header(c.label, c.path, c.start_line, c.end_line, c.part, c.parts)}\n{c.text}"


def _trim(chunk: Chunk, max_tokens: int) -> Chunk | None:
    """The chunk cut to `max_tokens` of text (its end line follows), or None when nothing is left."""
    text = chunk.text[: -len(TRIMMED)].rstrip() if chunk.text.endswith(TRIMMED) else chunk.text
    head = trim_to_tokens(text, max_tokens - estimate_tokens("\n" + TRIMMED))
    if not head or len(head) >= len(text):
        return None
    return replace(chunk, text=f"{head}\n{TRIMMED}", end_line=chunk.start_line + head.count("\n"))
