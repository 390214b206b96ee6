"""The pure parts of bench/baselines.py: a vault's notes as whole documents, the FTS5 keyword baselines,
Reciprocal Rank Fusion, and the measures by note path. Nothing here loads a model."""
from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

RRF_K = 60
# Snowball's stemmer per language code of `oracle.lexicon`.
SNOWBALL = {"en": "english", "es": "spanish", "pt": "portuguese", "fr": "french", "de": "german",
            "it": "italian", "nl": "dutch", "pl": "polish"}
_FTS_WORD = re.compile(r"\w+", re.UNICODE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Doc:
    path: str  # relative to the vault's notes folder, POSIX, NFC
    title: str  # the file name's stem
    text: str

    @property
    def body(self) -> str:
        """What every baseline reads of the note: its title line, then its whole text."""
        return f"{self.title}\n{self.text}"


def vault_docs(notes: Path) -> list[Doc]:
    """One document per Markdown note of `notes` (hidden files and folders skipped, as the Oracle does),
    sorted by path."""
    out = []
    for path in sorted(notes.rglob("*.md")):
        rel = path.relative_to(notes)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        out.append(Doc(unicodedata.normalize("NFC", rel.as_posix()), path.stem, text))
    return out


# ---------------------------------------------------------------------------------------------
# Keyword baselines: SQLite FTS5, whole notes


def fold(text: str) -> str:
    """Lower-cased, accents dropped (NFKD, combining marks removed): `Mantícora` → `manticora`."""
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


class Snowball:
    """Words folded, then stemmed by Snowball in the vault's language (only folded where it has none)."""

    def __init__(self, code: str) -> None:
        import snowballstemmer

        self.code = code
        self.stemmer = snowballstemmer.stemmer(SNOWBALL[code]) if code in SNOWBALL else None

    def words(self, text: str) -> list[str]:
        words = _WORD.findall(fold(text))
        return self.stemmer.stemWords(words) if self.stemmer else words

    def __call__(self, text: str) -> str:
        return " ".join(self.words(text))


def fts_query(question: str) -> str:
    """An FTS5 OR query of the question's word tokens, each quoted: none of FTS5's syntax (quotes,
    `*`, parentheses, `NEAR`, `AND`, `-`, `:`) survives. Empty when the question has no word."""
    seen = dict.fromkeys(t.lower() for t in _FTS_WORD.findall(question))
    return " OR ".join(f'"{t}"' for t in seen)


class Fts:
    """An in-memory FTS5 table of whole notes, ranked by `bm25()`. `rewrite` turns a note's body and a
    question into what the table holds (None: as written)."""

    def __init__(self, docs: Sequence[Doc], tokenize: str, rewrite=None) -> None:
        self.paths = [d.path for d in docs]
        self.rewrite = rewrite or (lambda text: text)
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE notes USING fts5(body, tokenize={_sql(tokenize)})")
        self.db.executemany("INSERT INTO notes(rowid, body) VALUES (?, ?)",
                            ((i, self.rewrite(d.body)) for i, d in enumerate(docs)))

    def search(self, question: str) -> list[str]:
        """Note paths, best first; notes sharing no word with the question are not ranked."""
        query = fts_query(self.rewrite(question))
        if not query:
            return []
        rows = self.db.execute("SELECT rowid FROM notes WHERE notes MATCH ? ORDER BY bm25(notes), rowid",
                               (query,)).fetchall()
        return [self.paths[r] for (r,) in rows]


def _sql(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def porter_index(docs: Sequence[Doc]) -> Fts:
    return Fts(docs, "porter unicode61 remove_diacritics 2")


def snowball_index(docs: Sequence[Doc], code: str) -> Fts:
    return Fts(docs, "unicode61 remove_diacritics 2", Snowball(code))


# ---------------------------------------------------------------------------------------------
# Fusion and measures


def rrf(*rankings: Sequence[str], k: int = RRF_K) -> list[str]:
    """Reciprocal Rank Fusion: a note scores the sum of 1/(k + rank) over the rankings holding it; ties
    go to the note found earliest in any ranking, then by path."""
    score: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, path in enumerate(ranking, 1):
            score[path] = score.get(path, 0.0) + 1.0 / (k + rank)
            best[path] = min(rank, best.get(path, rank))
    return sorted(score, key=lambda p: (-score[p], best[p], p))


def _key(path: str) -> str:
    path = unicodedata.normalize("NFC", " ".join(path.split())).lower()
    return path.removesuffix(".md")


def gold_ranks(ranking: Sequence[str], relevant: Iterable[str]) -> list[int | None]:
    """Per gold entry, the 1-based rank of the first note whose path it names (case-insensitive, with or
    without `.md`), None when no ranked note is it. Notes are counted once, at their first place."""
    first: dict[str, int] = {}
    for path in ranking:
        first.setdefault(_key(path), len(first) + 1)
    return [first.get(_key(e)) for e in dict.fromkeys(relevant)]


def measures(ranking: Sequence[str], relevant: Sequence[str]) -> dict[str, float]:
    """recall@8 (share of gold notes in the top 8), hit@5 (any gold in the top 5), rr (1 / rank of the
    first gold, 0 when none is ranked)."""
    ranks = gold_ranks(ranking, relevant)
    found = [r for r in ranks if r is not None]
    return {
        "recall@8": sum(r <= 8 for r in found) / len(ranks),
        "hit@5": float(any(r <= 5 for r in found)),
        "rr": 1.0 / min(found) if found else 0.0,
    }


def bank_measures(rows: Iterable[tuple[dict, Sequence[str]]]) -> dict:
    """Means over the answerable questions of (question, ranking) rows: recall@8, hit@5, MRR, and
    recall@8 and MRR over kind "paraphrase" only (None when there is none)."""
    got = [(q, measures(ranking, q["relevant"])) for q, ranking in rows if q.get("relevant")]
    para = [m for q, m in got if q.get("kind") == "paraphrase"]
    n = len(got) or 1
    return {
        "questions": len(got),
        "recall@8": sum(m["recall@8"] for _, m in got) / n,
        "hit@5": sum(m["hit@5"] for _, m in got) / n,
        "MRR": sum(m["rr"] for _, m in got) / n,
        "paraphrase recall@8": sum(m["recall@8"] for m in para) / len(para) if para else None,
        "paraphrase MRR": sum(m["rr"] for m in para) / len(para) if para else None,
        "paraphrase": len(para),
    }


def search_text(question: dict) -> str:
    """What a baseline searches: the question, after the last turn of its history when it is a follow-up."""
    history = [h for h in question.get("history") or () if isinstance(h, str) and h.strip()]
    return f"{history[-1]} {question['question']}" if history else question["question"]


def oracle_rankings(run: dict, bank: str) -> list[tuple[dict, list[str]]] | None:
    """(question, the fused places' note paths, each at its first place) of a saved `bench.banks` run's
    current version, None when the run has no such bank."""
    from bench.first_place import current_questions, notes

    found = next((b for b in run.get("banks", []) if b.get("name") == bank and not b.get("skipped")), None)
    if found is None:
        return None
    out = []
    for q in current_questions(found):
        if q.get("fused") is not None:
            out.append((q, [n["path"] for n in notes(q["fused"])]))
    return out
