"""Annotations: a short description of each chunk and the names it mentions, written at ingest.

One call per chunk returns both. Results are cached by (text hash, model, prompt version), so a
re-ingest of unchanged text costs nothing, and they are never computed at question time. A public
chunk's text holds no secret (secrets are cut out at parse time), so neither does its annotation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ..llm import LLM
from ..text import normalize, normalize_text
from ..tokens import estimate_tokens, message_tokens, trim_to_tokens
from ..types import Chunk, EntitySource, Visibility

PROMPT_VERSION = "annotate-v1"
_MAX_CHARS = 12_000  # a chunk is at most ~1,200 words; this bounds a pathological one
# The reply: ~40 words of summary and the names with their aliases; a crowded session names ~40.
REPLY_TOKENS = 1024

SYSTEM = (
    "You index a game master's notes for a tabletop role-playing campaign. "
    "Describe the passage you are given and list the names in it. Use only the passage."
)


class NamedThing(BaseModel):
    name: str = Field(description="the name as written in the passage")
    aliases: list[str] = Field(default_factory=list, description="other names the passage uses for it")
    kind: str = Field("entity", description="person, place, faction, item, creature or event")


class AnnotationReply(BaseModel):
    summary: str = Field(description="one or two sentences, about 40 words: who, where, what happens")
    entities: list[NamedThing] = Field(default_factory=list)


@dataclass(frozen=True)
class Annotation:
    text: str  # one or two sentences: who, where, what happens
    entities: tuple[NamedThing, ...]


def annotation_messages(chunk: Chunk, max_tokens: int | None = None) -> list[dict[str, str]]:
    """The request; with `max_tokens`, the passage is cut at a paragraph so the prompt fits it."""

    def messages(text: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": (
                    f"Passage from {chunk.label}:\n\n{text}\n\n"
                    "Reply in JSON: a summary of one or two sentences (about 40 words) saying who is "
                    "involved, where, and what happens; and the named people, places, factions and "
                    "items, each with any other names the passage uses for it."
                ),
            },
        ]

    text = chunk.text[:_MAX_CHARS]
    if max_tokens is not None:
        over = message_tokens(messages(text)) - max_tokens
        if over > 0:
            text = trim_to_tokens(text, max(0, estimate_tokens(text) - over))
    return messages(text)


async def annotate(llm: LLM, chunk: Chunk) -> Annotation:
    """Raises LLMError when Ollama cannot give a valid annotation."""
    window = await llm.window()
    messages = annotation_messages(chunk, window.num_ctx - REPLY_TOKENS)
    reply = await llm.chat_model(messages, AnnotationReply, num_predict=REPLY_TOKENS)
    text = " ".join(reply.summary.split())  # "summary" is the field the model is asked for
    return Annotation(text, tuple(reply.entities))


def grounded_entities(chunk_text: str, named: list[dict[str, Any]], visibility: Visibility) -> list[EntitySource]:
    """Names the model extracted, kept only where the chunk really contains them."""
    text = normalize_text(chunk_text)
    sources = []
    for item in named:
        name = str(item.get("name", "")).strip()
        if not name or normalize(name) not in text:
            continue
        aliases = tuple(a for a in item.get("aliases", []) if isinstance(a, str) and normalize(a) in text)
        sources.append(EntitySource(name, aliases, str(item.get("kind", "entity")), "llm", None, visibility))
    return sources
