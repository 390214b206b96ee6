"""A deterministic stand-in for the bundled embedding model, for tests that judge no retrieval.

`HashEmbedder` is an `oracle.index.embed.Embedder` (so `Index(settings, embedder=...)` and
`Library.open(..., embedder=...)` take it as they take the real model) that loads nothing: a text's
vector is the normalised sum of its hashed word features (blake2b, never Python's salted `hash`), so
the same text gives the same unit vector in every process and run, and texts sharing words are
near. Windows are cut as the real model cuts them (`embed._token_windows`), with words and
punctuation marks as its "tokens". Its fingerprint names its own vector space: a collection it
fills is never mistaken for the real model's.

Tests whose assertions depend on which passages the semantic path ranks first keep the real model
(the `embedder` fixture, marked `integration` automatically); see tests/conftest.py.
"""
from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence

import numpy as np

from oracle.index import embed
from oracle.index.embed import Embedder
from oracle.types import Chunk, EmbeddingWindow

DIMENSION = 384
MAX_TOKENS = 256
_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"\w+")


class HashEmbedder(Embedder):
    """The `Embedder` interface, instant to build, thread-safe, without torch or a tokenizer."""

    def __init__(self, dimension: int = DIMENSION, max_tokens: int = MAX_TOKENS) -> None:  # noqa: D107
        # Deliberately not Embedder.__init__: that loads the real model.
        self.ref = "hash-embedder"
        self.source = "hash-embedder"
        self.query_backend = "hash"
        self.cache_dir = None
        self.model = None
        self.tokenizer = None
        self.dim = dimension
        self.max_tokens = max_tokens
        self._query_encoder = None
        self._query_prepared = True
        self._query_lock = threading.Lock()
        self._batch_lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        return hashlib.sha1(f"hash-embedder|{self.dim}|{self.max_tokens}".encode()).hexdigest()[:12]

    @property
    def query_runtime(self) -> str:
        return "hash"

    def prepare_queries(self) -> None:
        return None

    def token_count(self, text: str) -> int:
        return len(_TOKEN.findall(text)) + 2  # the two special tokens the real model adds

    def _windows(self, chunks: Sequence[Chunk], overlap_tokens: int, limit: int) -> list[EmbeddingWindow]:
        out: list[EmbeddingWindow] = []
        for chunk in chunks:
            head = chunk.head
            budget = limit - 2 - embed._MARGIN - (self.token_count(head) - 2)
            if budget < limit // 2:  # a long heading: keep the label alone
                head = chunk.label
                budget = limit - 2 - embed._MARGIN - self.token_count(head)
            offsets = [m.span() for m in _TOKEN.finditer(chunk.text)]
            for n, (start, end) in enumerate(embed._token_windows(chunk.text, offsets, budget, overlap_tokens)):
                text = f"{head}\n{chunk.text[start:end]}"
                out.append(EmbeddingWindow(EmbeddingWindow.make_id(chunk.id, n), chunk.id, text, chunk.visibility))
            if not offsets:
                out.append(EmbeddingWindow(EmbeddingWindow.make_id(chunk.id, 0), chunk.id, head, chunk.visibility))
        return out

    def vector(self, text: str) -> np.ndarray:
        """The unit vector of `text`: one hashed, signed feature per word (lower-cased), plus a
        constant one so that a text without words still has a direction."""
        v = np.zeros(self.dim, dtype=np.float32)
        v[0] = 0.1
        for word in _WORD.findall(text.casefold()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.dim
            v[slot] += 1.0 if digest[4] & 1 else -1.0
        return v / np.linalg.norm(v)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        return self.vector(text)
