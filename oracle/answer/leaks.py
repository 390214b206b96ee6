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
        """The secret runs, less those public text also holds. Public text is only read where a
        secret run could start (its first word), and not at all when nothing is secret: the guard is
        rebuilt after every ingest, on a thread that holds the interpreter lock while it works."""
        self.n = n
        chunks = list(chunks)
        secret: set[tuple[str, ...]] = set()
        for chunk in chunks:
            if chunk.visibility == GM:
                secret.update(runs(chunk.text, n))
        if secret:
            starts = {run[0] for run in secret}
            for chunk in chunks:
                if chunk.visibility == GM:
                    continue
                words = _WORD.findall(normalize_text(chunk.text))
                for i in range(len(words) - n + 1):
                    if words[i] in starts:
                        secret.discard(tuple(words[i : i + n]))
        self.secret_runs = secret

    def leaks(self, answer: str) -> bool:
        return bool(self.secret_runs) and not self.secret_runs.isdisjoint(runs(answer, self.n))
