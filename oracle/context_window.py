"""The context window: the tokens of prompt and reply the model reads in one request.

Every chat request carries the same `options.num_ctx` (Ollama keeps one runner per model and context
size, so a different size reloads the model) and a `num_predict`, the reply's budget. Without
`num_ctx` Ollama serves 2,048 tokens and cuts a longer prompt from the front. The window is the
configured ORACLE_NUM_CTX, lowered to the model's own context length, read once from `/api/show`
(`model_info["<architecture>.context_length"]`). Not to be confused with an embedding window
(`types.EmbeddingWindow`), a slice of a chunk the embedding model reads.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ContextWindow:
    """The context window every request is sent with, and why it differs from the setting."""

    num_ctx: int
    configured: int
    answer_tokens: int  # the answer's num_predict
    model_limit: int | None = None  # the model's context_length, when Ollama said it
    reason: str = ""  # why num_ctx is lower than configured, or why the model's limit is unknown

    @property
    def budget(self) -> int:
        """Tokens the answer prompt may take: the window less the reply's budget."""
        return self.num_ctx - self.answer_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "num_ctx": self.num_ctx,
            "configured": self.configured,
            "answer_tokens": self.answer_tokens,
            "model_limit": self.model_limit,
            "reason": self.reason,
        }

    def describe(self) -> str:
        """As a status line: the num_ctx every request carries, and why it is not the setting."""
        line = f"{self.num_ctx} tokens, {self.answer_tokens} of them for the answer"
        return f"{line} ({self.reason})" if self.reason else line


def context_length(model_info: Mapping[str, Any] | None) -> int | None:
    """The model's trained context length from `/api/show`'s model_info, e.g. `qwen2.context_length`."""
    info = model_info or {}
    arch = info.get("general.architecture")
    value = info.get(f"{arch}.context_length") if arch else None
    if value is None:  # an architecture key that does not match: take any *.context_length
        value = next((v for k, v in info.items() if k.endswith(".context_length")), None)
    return int(value) if isinstance(value, (int, float)) and value > 0 else None
