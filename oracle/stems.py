"""Words stemmed in the vault's language, alike in the index and in the question.

SQLite's FTS5 stems with Porter, an English stemmer: Spanish `atacado` and `ataca`, or Portuguese
`atacou` and `ataque`, stay apart. So the keyword path searches a copy of each chunk written as its
words' stems in the vault's language (Snowball's stemmers, accents folded first, `mantícora` =
`manticora`), and a question's words are stemmed the same way before FTS5 reads them. FTS5's own
Porter then runs on both alike. An English vault keeps its text as it is: nothing changes for it.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import version

import snowballstemmer

from .lexicon import DEFAULT, fold

# The Snowball stemmer of each language the Oracle has word lists for (`oracle/lexicon/`).
SNOWBALL = {"es": "spanish", "pt": "portuguese", "fr": "french", "de": "german", "it": "italian", "nl": "dutch",
            "pl": "polish"}
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_local = threading.local()


def _stemmer(name: str):
    """A Snowball stemmer keeps state while it works: one per thread and language."""
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    if name not in stemmers:
        stemmers[name] = snowballstemmer.stemmer(name)
    return stemmers[name]


def porter(words: Sequence[str]) -> list[str]:
    """Porter stems of lower-cased words, as FTS5's tokenizer stems the index (Snowball's Porter
    differs from FTS5's on a few words in a thousand)."""
    return _stemmer("porter").stemWords(list(words))


@dataclass(frozen=True)
class Stemming:
    """How the keyword path writes words in one vault's language."""

    code: str = DEFAULT

    @property
    def key(self) -> str:
        """What the keyword copies were written with: an index written otherwise is written again. A
        language whose text is kept as written is its code alone, as an earlier release recorded it."""
        return f"{self.code}/{SNOWBALL[self.code]}/snowball {version('snowballstemmer')}" if self.rewrites else self.code

    @property
    def rewrites(self) -> bool:
        """Whether the index keeps a stemmed copy of the text: in a language with a stemmer of its own."""
        return self.code in SNOWBALL

    def text(self, text: str) -> str:
        """What the keyword index holds of `text`: the text itself in English, else its words' stems."""
        if not self.rewrites:
            return text
        return " ".join(self._own(_WORD.findall(fold(text))))

    def term(self, term: str) -> str:
        """A question's term as the keyword index holds its words, before FTS5's own Porter."""
        if not self.rewrites:
            return term
        return _WORD.sub(lambda m: self._own([fold(m.group())])[0], term)

    def stems(self, words: Iterable[str]) -> list[str]:
        """Each word as FTS5 stores it: Porter over `term`, the key of the index's term counts."""
        words = list(words)
        return porter([self.term(w) for w in words] if self.rewrites else words)

    def own(self, words: Iterable[str]) -> list[str]:
        """Each lower-cased word by its language's stemmer alone, for matching words outside FTS5:
        Snowball's where the language has one, else Porter (as `stems` leaves English)."""
        words = list(words)
        return self._own(words) if self.rewrites else porter(words)

    def _own(self, words: list[str]) -> list[str]:
        return _stemmer(SNOWBALL[self.code]).stemWords([w.lower() for w in words])
