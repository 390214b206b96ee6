"""The embedding trick: the enlarged indexes reuse the 1× windows' vectors instead of encoding again."""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np

NOISE_SIGMA = 0.01


def _embedder_class():
    from oracle.index.embed import Embedder

    class ReuseEmbedder(Embedder):
        """Shares a loaded Embedder; serves each window the 1× vector of the window at the same place."""

        def __init__(self, base: Embedder, source: dict[tuple[str, str, int, str], list[np.ndarray]],
                     origin: dict[str, dict[int, int]]) -> None:  # noqa: D107 - no super(): the model is shared
            self.__dict__.update(base.__dict__)
            self._base = base
            self._source = source  # (original file stem, label, part, visibility) -> window vectors by n
            self._origin = origin  # file -> {session number: original number}
            self._by_text: dict[str, np.ndarray] = {}
            self.reused = 0
            self.encoded = 0

        def origin_key(self, chunk) -> tuple[str, str, int, str] | None:
            m = re.fullmatch(r"(.*)-(\d{3})\.md", Path(chunk.path).name)
            if not m:
                return None
            stem, copy = m.group(1), int(m.group(2))
            # Labels carry the copy's title ("campaign-log-003 › Session 361"): map both back to 1×.
            label = chunk.label.replace(f"{stem}-{copy:03d}", stem)
            session = re.search(r"\bSession (\d+)\b", label)  # a label's form in any language: split_sessions
            if session:
                original = self._origin.get(chunk.path, {}).get(int(session.group(1)))
                if original is None:
                    return None
                label = f"{label[:session.start(1)]}{original}{label[session.end(1):]}"
            return (stem, label, chunk.part, chunk.visibility)

        def windows(self, chunks, overlap_tokens: int = 32, size: int | None = None):
            out = super().windows(chunks, overlap_tokens, size)
            by_id = {c.id: c for c in chunks}
            for w in out:
                chunk = by_id[w.chunk_id]
                vectors = self._source.get(self.origin_key(chunk) or ("",))
                if not vectors:
                    continue
                n = int(w.id.rsplit(":", 1)[1])
                vector = vectors[min(n, len(vectors) - 1)]
                if not chunk.path.endswith("-000.md"):  # copy 0 keeps the exact 1× vectors
                    rng = np.random.default_rng(zlib.crc32(w.id.encode()))
                    vector = vector + rng.normal(0.0, NOISE_SIGMA, vector.shape).astype(np.float32)
                    vector = (vector / np.linalg.norm(vector)).astype(np.float32)
                self._by_text[w.text] = vector
            return out

        def encode(self, texts, batch_size: int = 32) -> np.ndarray:
            found = [self._by_text.get(t) for t in texts]
            missing = [i for i, v in enumerate(found) if v is None]
            if missing:
                real = self._base.encode([texts[i] for i in missing], batch_size=batch_size)
                for i, v in zip(missing, real, strict=True):
                    found[i] = v
            self.reused += len(texts) - len(missing)
            self.encoded += len(missing)
            return np.stack(found).astype(np.float32) if found else np.zeros((0, self.dim), np.float32)

    return ReuseEmbedder


async def source_vectors(index) -> dict[tuple[str, str, int, str], list[np.ndarray]]:
    """The 1× windows' vectors, keyed by (file stem, label, part, visibility), ordered by window number."""
    store = await index.store()
    vectors = await index.vectors()
    ids, chunk_ids, matrix = await vectors.vectors()
    chunks = {c.id: c for c in await store.chunks_by_ids(sorted(set(chunk_ids)))}
    grouped: dict[tuple[str, str, int, str], list[tuple[int, np.ndarray]]] = {}
    for wid, cid, vec in zip(ids, chunk_ids, matrix, strict=True):
        c = chunks.get(cid)
        if c is None:
            continue
        grouped.setdefault((Path(c.path).stem, c.label, c.part, c.visibility), []).append((int(wid.rsplit(":", 1)[1]), vec))
    return {k: [v for _, v in sorted(pairs, key=lambda p: p[0])] for k, pairs in grouped.items()}
