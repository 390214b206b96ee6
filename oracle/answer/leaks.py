"""The second line of defence: an answer to a player that repeats game-master-only text is withheld.

Retrieval already keeps secrets out of a player's context, so this should never fire; it guards
against what retrieval cannot see (a model that knows more than it was given, a note mislabelled
later). A run of `RUN_WORDS` consecutive words that occurs in a GM-only passage and in no public one
counts as secret text. An answer shown while it is written is checked as it grows (`StreamCheck`),
so a player never sees the run before the finished answer is withheld.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable

from ..index.store import Store
from ..offload import question_step
from ..text import normalize_text
from ..types import GM, ChunkText
from .citations import without_citations

RUN_WORDS = 8
_WORD = re.compile(r"\w+")
_BRACKETED = re.compile(r"\[[^\[\]\n]*(?:\]|$)")  # a bracket, or one still open at the end


def _words(text: str) -> list[str]:
    """The words of `text`, normalized; a citation's are none (an answer's citations, checked or
    not, never split a run)."""
    return _WORD.findall(normalize_text(without_citations(text)))


def runs(text: str, n: int = RUN_WORDS) -> set[tuple[str, ...]]:
    words = _words(text)
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
                words = _words(chunk.text)
                for i in range(len(words) - n + 1):
                    if words[i] in starts:
                        secret.discard(tuple(words[i : i + n]))
        self.secret_runs = secret

    def leaks(self, answer: str) -> bool:
        return bool(self.secret_runs) and not self.secret_runs.isdisjoint(runs(answer, self.n))


class StreamCheck:
    """`SecretGuard.leaks` for a text that grows (an answer while the model writes it), reading each
    part once: a run not yet read must end in the new text, so only the last `n` words of what was
    read are read again. Once it has leaked, it stays leaked."""

    def __init__(self, guard: SecretGuard) -> None:
        self.guard = guard
        self.text = ""
        self.start = 0  # where the unread runs may begin: after a whitespace, or the text's start
        self.leaked = False

    def leaks(self, text: str) -> bool:
        if self.leaked:
            return True
        if not text.startswith(self.text):  # not the same text grown: read it whole
            self.start = 0
        self.text = text
        window = text[self.start :]
        if self.guard.leaks(window):
            self.leaked = True
            return True
        # Keep the last n words (one more than a run's unread part; the last may be cut mid-word),
        # from a whitespace, where normalizing cannot join or split a word, and outside brackets: a
        # citation's words are no run's, and one still open may become a citation.
        brackets = [m.span() for m in _BRACKETED.finditer(window)]
        starts = [m.start() for m in _WORD.finditer(window) if not any(a <= m.start() < b for a, b in brackets)]
        if len(starts) >= self.guard.n:
            cut = starts[-self.guard.n]
            while cut > 0 and (not window[cut - 1].isspace() or any(a < cut < b for a, b in brackets)):
                cut -= 1
            self.start += cut
        return False


class Guards:
    """The guard of an index as of its last committed ingest: built once per generation, off the
    event loop, by one question while the others wait."""

    def __init__(self) -> None:
        self._guard: tuple[str, SecretGuard] | None = None
        self._lock = asyncio.Lock()

    async def of(self, store: Store) -> SecretGuard:
        async with self._lock:
            generation = await store.generation()
            if self._guard is None or self._guard[0] != generation:
                self._guard = (generation, await question_step(SecretGuard, await store.chunk_texts()))
            return self._guard[1]
