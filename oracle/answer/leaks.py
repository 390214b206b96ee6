"""The second line of defence: an answer to a player that repeats game-master-only text is withheld.

Retrieval already keeps secrets out of a player's context, so this should never fire; it guards
against what retrieval cannot see (a model that knows more than it was given, a note mislabelled
later). A run of `RUN_WORDS` consecutive words that occurs in a GM-only passage and in no public one
counts as secret text.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..text import normalize_text
from ..types import GM, ChunkText

RUN_WORDS = 8
_WORD = re.compile(r"\w+")


def runs(text: str, n: int = RUN_WORDS) -> set[tuple[str, ...]]:
    words = _WORD.findall(normalize_text(text))
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


class SecretGuard:
    def __init__(self, chunks: Iterable[ChunkText], n: int = RUN_WORDS) -> None:
        self.n = n
        secret: set[tuple[str, ...]] = set()
        public: set[tuple[str, ...]] = set()
        for chunk in chunks:
            (secret if chunk.visibility == GM else public).update(runs(chunk.text, n))
        self.secret_runs = secret - public

    def leaks(self, answer: str) -> bool:
        return not self.secret_runs.isdisjoint(runs(answer, self.n))
