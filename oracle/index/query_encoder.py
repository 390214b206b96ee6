"""One question embedded fast: the bundled model run by ONNX Runtime instead of torch.

A question is one short text, so nothing batches and torch's per-call overhead dominates: on the
2-core machines measured here torch takes ~14 ms for a question, ONNX Runtime ~4 ms for the same
vector (cosine 1.0). The graph is exported from the loaded weights with torch's own exporter
(nothing is downloaded), cached next to the index, and checked against torch before it is used;
any failure leaves questions on torch, which is only slower.

Only a plain [Transformer, mean Pooling, optional Normalize] pipeline is exported, a question's
prompt (e5's "query: ") read with it: anything else (CLS pooling as bge-m3's, dense layers, pooling
that leaves the prompt out) stays on torch rather than risk a different vector space.
"""
from __future__ import annotations

import io
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OracleError

log = logging.getLogger(__name__)

_OPSET = 17
# A vector that differs from torch's by more than float noise means a broken export.
_MIN_AGREEMENT = 0.9999
_PROBE = "Who guards the archive beneath Vel Dara, and what did the party promise them?"


class QueryEncoderUnavailable(OracleError, RuntimeError):
    pass


class OnnxQueryEncoder:
    """Embeds single questions exactly as `SentenceTransformer.encode(..., normalize_embeddings=True)`."""

    def __init__(self, model: Any, tokenizer: Any, max_tokens: int, *, cache: Path | None = None,
                 prompt: str = "") -> None:
        """`prompt`: put before every question, as `encode(..., prompt=prompt)` does."""
        transformer = _plain_mean_pooled(model)
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.prompt = prompt
        self.inputs = self._input_names()
        session = self._load(cache) if cache is not None and cache.exists() else None
        if session is None:
            graph = _export(transformer, self._tokens(_PROBE, "pt"), self.inputs)
            # From the file when it could be written: ONNX Runtime then holds one copy of the
            # weights (+100 MB), where a session made from bytes holds two (+210 MB).
            written = cache is not None and _write_atomically(cache, graph)
            session = _session(str(cache) if written else graph)
        self.session = session
        torch_vector = model.encode([_PROBE], prompt=prompt, normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)[0]
        agreement = float(np.dot(self.encode(_PROBE), torch_vector))
        if agreement < _MIN_AGREEMENT:
            raise QueryEncoderUnavailable(f"the exported graph disagrees with torch (cosine {agreement:.6f})")

    def encode(self, text: str) -> np.ndarray:
        tokens = self._tokens(text, "np")
        hidden = self.session.run(None, {name: tokens[name].astype(np.int64) for name in self.inputs})[0]
        mask = tokens["attention_mask"][..., None].astype(np.float32)
        vector = (hidden * mask).sum(axis=1)[0] / max(float(mask.sum()), 1e-9)
        return (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)

    def _tokens(self, text: str, tensors: str) -> Any:
        return self.tokenizer([self.prompt + text], truncation=True, max_length=self.max_tokens, return_tensors=tensors)

    def _input_names(self) -> list[str]:
        names = self.tokenizer(["probe"], return_tensors="np").keys()
        return [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in names]

    def _load(self, cache: Path) -> Any:
        try:
            return _session(str(cache))
        except Exception as exc:  # a truncated or foreign file: export again over it
            log.warning("re-exporting the query encoder: %s is unreadable (%s)", cache, exc)
            return None


def _plain_mean_pooled(model: Any) -> Any:
    names = [type(module).__name__ for module in model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise QueryEncoderUnavailable(f"only Transformer + mean Pooling is exported, not {names}")
    modes = model[1].pooling_mode
    if (modes if isinstance(modes, str) else tuple(modes)) not in ("mean", ("mean",)):
        raise QueryEncoderUnavailable(f"only mean pooling is exported, not {modes}")
    if getattr(model[1], "include_prompt", True) is False:
        raise QueryEncoderUnavailable("pooling that leaves out a prompt is not exported")
    return model[0].auto_model


def _export(transformer: Any, example: Any, inputs: list[str]) -> bytes:
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = transformer

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(inputs, args, strict=True))).last_hidden_state

    axes = {name: {0: "batch", 1: "tokens"} for name in [*inputs, "last_hidden_state"]}
    buffer = io.BytesIO()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about shapes the dynamic axes cover
            torch.onnx.export(
                LastHiddenState().eval(),
                tuple(example[name] for name in inputs),
                buffer,  # type: ignore[arg-type]  # torch annotates paths only; its TorchScript exporter writes a BytesIO
                input_names=inputs,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=_OPSET,
                dynamo=False,
            )
    except Exception as exc:
        raise QueryEncoderUnavailable(f"cannot export the model to ONNX: {exc}") from exc
    return buffer.getvalue()


def _session(graph: bytes | str) -> Any:
    import onnxruntime as ort
    import torch

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, torch.get_num_threads())
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    # ONNX Runtime's pool threads spin on a core after each run, waiting for the next one: CPU taken
    # from the event loop and the ingest, for no faster question (docs/decisions.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def _write_atomically(path: Path, data: bytes) -> bool:
    """Two processes exporting at once each write their own file and the last rename wins."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the index's other files are readable
        os.replace(tmp, path)
        return True
    except OSError as exc:  # a full or read-only disk costs the next start an export, nothing more
        log.warning("cannot cache the query encoder at %s: %s", path, exc)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False
