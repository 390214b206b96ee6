"""`python -m tests.fakes.hashed_cli ARGS`: the real command line (`oracle ARGS`) with the hashed
stand-in for the model (tests/fakes/embedder.py), for the tests of processes that judge no retrieval
(an ingest killed at any moment, an ingest found by another process). `use_stand_in()` does the same
for another entry point (the bot's, tests/bot/run_bot.py).

Such a process loads no torch and no model, so it starts in about a second instead of several, and
burns no CPU while it "embeds": `ORACLE_TEST_EMBED_SECONDS` (default 0) is slept per window
embedded, so the embedding still takes as long as a test needs to land a kill inside it; and each
batch embedded adds a line to the file `ORACLE_TEST_EMBED_LOG` names, if any, so a test sees when the
embedding is under way. Everything else (scanning, SQLite, Chroma, the lock, Ollama over its socket)
is the product's own code.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from oracle.cli import main
from oracle.index import index, library
from oracle.settings import Settings
from tests.fakes.embedder import HashEmbedder

PACE = "ORACLE_TEST_EMBED_SECONDS"
LOG = "ORACLE_TEST_EMBED_LOG"


class PacedEmbedder(HashEmbedder):
    """The stand-in, taking `seconds` per window embedded (asleep: no CPU), each batch logged to `log`."""

    def __init__(self, seconds: float, log: Path | None) -> None:
        super().__init__()
        self.seconds = seconds
        self.log = log

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        time.sleep(self.seconds * len(texts))
        if self.log is not None:
            with self.log.open("a") as f:
                f.write(f"{len(texts)}\n")
        return super().encode(texts, batch_size)


def load_stand_in(settings: Settings) -> HashEmbedder:
    log = os.environ.get(LOG)
    return PacedEmbedder(float(os.environ.get(PACE, "0")), Path(log) if log else None)


# The modules whose `load_embedder` loads a process's model: each index's, and a `Library` opened
# whole (the bot's). The embedding worker loads the real one: turn it off (ORACLE_EMBED_WORKER=false).
LOADERS = (index, library)


def use_stand_in() -> None:
    """Every model this process loads is the stand-in."""
    for module in LOADERS:
        module.load_embedder = load_stand_in


if __name__ == "__main__":
    use_stand_in()
    sys.exit(main(sys.argv[1:]))
