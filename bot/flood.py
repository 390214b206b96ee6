"""Flood control: a token bucket per member, so a conversation flows and a flood does not.

Each member holds up to `burst` questions' worth of tokens and gets one back every `every` seconds.
A question takes a token when it starts; when none is left it takes one ahead of time and waits
until that token would have come back, so a member over the limit is answered later, never refused
in public. At most `max_waiting` of a member's questions wait at once; past that they are dropped
(the bot marks the message), and that is what stops a flood. A question that was not delivered
(it failed) gives its token back: the count is of answers delivered.

The clock is passed in, so the arithmetic is tested without waiting.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    at: float


class FloodGate:
    def __init__(self, burst: int, every: float, max_waiting: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.every = every
        self.max_waiting = max_waiting
        self.clock = clock
        self._buckets: dict[int, _Bucket] = {}

    def _bucket(self, member: int) -> _Bucket:
        now = self.clock()
        bucket = self._buckets.get(member)
        if bucket is None:
            bucket = self._buckets[member] = _Bucket(float(self.burst), now)
        elif self.every > 0:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.every)
            bucket.at = now
        else:
            bucket.tokens, bucket.at = float(self.burst), now
        return bucket

    def reserve(self, member: int) -> float | None:
        """Take a token: the seconds to wait before answering (0: at once), or None when too many of
        the member's questions already wait."""
        bucket = self._bucket(member)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        waiting = math.ceil(-bucket.tokens) if bucket.tokens < 0 else 0
        if waiting >= self.max_waiting:
            return None
        bucket.tokens -= 1
        # The member now owes `-tokens`: this question's token is back when the level is back at 0.
        return -bucket.tokens * self.every

    def refund(self, member: int) -> None:
        """A question that was not answered gives its token back."""
        bucket = self._bucket(member)
        bucket.tokens = min(float(self.burst), bucket.tokens + 1)
