"""One deadline per question, on the monotonic clock from the moment it is asked.

Its first words are due a fixed time after the question, whatever the rerank, the wait for a model
slot or a model still loading took; once words flow, only a pause between two of them (or the whole
answer's bound) ends the reply.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from .settings import Settings, setting_name

# How the reason of an answer whose first words were not written in time begins (`Deadline.missed`).
MISSED = "the model did not start answering within"

# The rerank's share of the first-words deadline: the answer needs the other half to read its prompt
# (thousands of tokens of notes) and write a first word, on the same model.
RERANK_SHARE = 0.5


class Deadline:
    """One question's time, on the monotonic clock from the moment it was asked: its first words
    are due within `first_words` seconds (the rerank may take `RERANK_SHARE` of them), then a pause
    between two pieces of the reply may last `token_gap`, and the whole reply ends by `whole`."""

    def __init__(self, first_words: float, token_gap: float, whole: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # The first words cannot come after the whole answer's end: the shorter bound is theirs.
        self.bound_by = setting_name("first_words" if first_words <= whole else "answer_timeout")
        self.first_words = min(first_words, whole)
        self.token_gap = token_gap
        self.whole = whole
        self.clock = clock
        self.start = clock()

    @classmethod
    def of(cls, settings: Settings, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """A question's deadline as ORACLE_FIRST_WORDS_SECONDS, ORACLE_TOKEN_GAP_SECONDS and
        ORACLE_ANSWER_TIMEOUT set it, starting now."""
        return cls(settings.first_words, settings.token_gap, settings.answer_timeout, clock)

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float:
        """Seconds left until the first words are due (0 once past)."""
        return max(0.0, self.first_words - self.elapsed())

    def rerank_left(self) -> float:
        """Seconds left of the rerank's share (0 once past)."""
        return max(0.0, RERANK_SHARE * self.first_words - self.elapsed())

    def whole_left(self) -> float:
        """Seconds left until the whole answer must end (0 once past)."""
        return max(0.0, self.whole - self.elapsed())

    @property
    def missed(self) -> str:
        """Why the player got the passages when the first words did not come in time."""
        return f"{MISSED} {self.first_words:g} s ({self.bound_by})"
