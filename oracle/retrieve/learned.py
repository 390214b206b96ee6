"""The learned fusion: the candidates' evidence (`evidence.py`) scored by a small model trained on the
dev question banks (`tools.train_fusion`), instead of a fixed formula.

The model is a JSON file in the repository, never a pickle: a linear scorer over standardised
features, score = Σ wᵢ · (xᵢ − μᵢ) / σᵢ, trained pairwise (a relevant chunk against an irrelevant one
of the same question: RankSVM's idea with a logistic loss, Joachims 2002). Scoring a few dozen
candidates is one small matrix product: nothing needs scikit-learn at run time.

A model that is missing, unreadable, or trained on other features than this Oracle computes is not
used: `load_ranker` logs a warning and the Oracle keeps the current fusion's order.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .evidence import FEATURES, Evidence
from .fusion import Fused

FORMAT = "oracle-learned-fusion"
VERSION = 1
# The model trained on the dev banks, shipped with the Oracle.
DEFAULT_MODEL = Path(__file__).with_name("fusion_model.json")

log = logging.getLogger(__name__)


class ModelError(ValueError):
    pass


@dataclass(frozen=True)
class LearnedRanker:
    weights: np.ndarray  # per feature, over standardised values
    mean: np.ndarray
    scale: np.ndarray
    source: str = ""

    @classmethod
    def from_json(cls, data: object, source: str = "") -> LearnedRanker:
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ModelError(f"not a {FORMAT} model, version {VERSION}")
        if data.get("kind") != "linear":
            raise ModelError(f"unknown model kind {data.get('kind')!r}")
        if list(data.get("features", [])) != list(FEATURES):
            raise ModelError("trained on other features than this Oracle computes; retrain it")
        try:
            arrays = [np.asarray(data[key], dtype=np.float64) for key in ("weights", "mean", "scale")]
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"unreadable coefficients ({exc})") from exc
        if any(a.shape != (len(FEATURES),) or not np.all(np.isfinite(a)) for a in arrays):
            raise ModelError(f"coefficients must be {len(FEATURES)} finite numbers each")
        weights, mean, scale = arrays
        if np.any(scale <= 0):
            raise ModelError("every scale must be positive")
        return cls(weights, mean, scale, source)

    @classmethod
    def load(cls, path: Path) -> LearnedRanker:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"cannot read {path}: {exc}") from exc
        return cls.from_json(data, str(path))

    def score(self, features: np.ndarray) -> np.ndarray:
        """One score per row of `features` (higher is better)."""
        if features.size == 0:
            return np.zeros(len(features))
        return ((features - self.mean) / self.scale) @ self.weights

    def rank(self, evidence: Evidence, fused: Sequence[Fused], limit: int | None = None) -> list[Fused]:
        """The candidates by the model's score; ties keep the current fusion's order. Each keeps its
        per-path ranks; its score becomes the model's."""
        scores = self.score(evidence.features).tolist()
        rounded = [-round(score, 9) for score in scores]
        by_id = {f.id: f for f in fused}
        order = sorted(range(len(scores)), key=rounded.__getitem__)  # stable: ties stay in order
        ids = evidence.ids
        out = [Fused(ids[i], scores[i], by_id[ids[i]].ranks if ids[i] in by_id else ()) for i in order]
        return out[:limit] if limit is not None else out


def load_ranker(path: Path | None) -> LearnedRanker | None:
    """The model at `path` (the shipped one when None), or None with a warning: the Oracle then keeps
    the current fusion and still answers."""
    path = path or DEFAULT_MODEL
    try:
        return LearnedRanker.load(path)
    except ModelError as exc:
        log.warning("ORACLE_FUSION=learned: %s; using the current fusion (dbsf) instead", exc)
        return None
