"""What the Oracle writes to a player itself, in the language the question was asked in.

The answers are the model's, in the question's language; the sentences around them (the notes hold
nothing on that, the passages instead of an answer, the recap that could not be written, the button
that shows the sources) are the Oracle's own. They live in the data files (`[texts]` of
`oracle/lexicon/<language>.toml`), and a language without one is written in English. A question's
language is told by its function words (`[keyword] stopwords` and `common` of each language) and
its punctuation (`¿`, `¡`); when they do not tell, it is the vault's.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import Any

from .lexicon import DEFAULT, fold, language, languages

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@dataclass(frozen=True)
class Texts:
    code: str
    not_found: str
    empty_question: str
    no_session: str
    no_session_matching: str  # {session}
    could_not_answer: str  # {reason}
    loading: str
    could_not_recap: str  # {reason}, {label}
    no_usable_answer: str
    model_loading: str
    no_model_running: str
    model_too_slow: str
    passages_title: str
    show_sources: str
    sources: str  # the footer of an answer's sources
    passages: str  # the same, when they are passages
    asked: str  # {name}
    lines: str  # {start}, {end}
    abstains: tuple[str, ...]  # how an answer in this language says the notes hold nothing (regexes)

    def unwritten(self, cause: str) -> str:
        """Why there is no written answer, as a player reads it (`writer.Cause`): what happened to
        the model, never a host or an error, and the same for a withheld answer as for an unusable one."""
        return {"unavailable": self.no_model_running, "loading": self.model_loading,
                "late": self.model_too_slow}.get(cause, self.no_usable_answer)

    @property
    def abstention(self) -> re.Pattern[str]:
        """An answer in this language (or in English) saying the notes hold nothing."""
        return _pattern(self.abstains)


@cache
def texts(code: str = DEFAULT) -> Texts:
    """The texts of a language, each one it lacks in English."""
    english = _read(DEFAULT)
    own = _read(code) if code in languages() else {}
    picked = {f.name: own.get(f.name, english[f.name]) for f in fields(Texts) if f.name != "code"}
    picked["abstains"] = tuple(dict.fromkeys([*own.get("abstains", ()), *english["abstains"]]))
    return Texts(code, **picked)


def _read(code: str) -> dict[str, Any]:
    raw = tomllib.loads(resources.files("oracle.lexicon").joinpath(f"{code}.toml").read_text(encoding="utf-8"))
    return dict(raw.get("texts", {}))


@cache
def _pattern(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


@cache
def _written() -> tuple[str, ...]:
    """The languages with texts of their own."""
    return tuple(c for c in languages() if _read(c))


def question_language(question: str, default: str = DEFAULT) -> str:
    """The language a question is asked in, among those with texts of their own; `default` (the
    vault's, when it has texts) when its words do not tell."""
    words = [fold(w) for w in _WORD.findall(question)]
    scores: dict[str, float] = {}
    for code in _written():
        lang = language(code)
        vocabulary = lang.stopwords | lang.common
        scores[code] = sum(1 for w in words if w in vocabulary)
    if "¿" in question or "¡" in question:
        scores["es"] = scores.get("es", 0) + 2
    fallback = default if default in _written() else DEFAULT
    best = max(scores, key=lambda c: (scores[c], c == fallback))
    return best if scores[best] > scores.get(fallback, 0) else fallback
