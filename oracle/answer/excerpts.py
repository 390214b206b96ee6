"""Passages that answer: the sentences of the passages that best match the question.

Without the LLM, a player reads passages. A session is up to 1,200 words, and its opening is rarely
the part asked about, so each passage shows the sentences that match the question best, in note
order, with an ellipsis where sentences were skipped, and cites only the lines they sit on.

How sentences are chosen:
1. Keyword overlap: the question's content words and the names of the entities it names (the
   vault language's stop words out, accents folded, stemmed by that language's stemmer), each term
   weighted by its rarity among the sentences of all the passages shown, `idf = ln(1 + N / df)`.
   A sentence scores the sum over the distinct terms it holds, divided by its passage's best.
2. The query embedding, over the few best of those and the two sentences after each (never every
   sentence: each costs an encoding), adds the cosine between the sentence and the question.
3. What was asked about is often told in the sentences after the one that names it, so a
   sentence also takes a share of the score of the two before it (`CARRY`, fading by `DECAY`).
4. The words are shared by all the passages (`budget` each, on average): each passage shows its
   best sentence, then the best sentences left, from whichever passage, while they fit, so the
   passage that holds the answer can show more of it. A passage no term reaches shows its opening.

Everything here is pure and synchronous; the similarity function (the embedding model) is passed
in, and the caller runs the whole thing off the event loop.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..lexicon import lexicon
from ..retrieve.keyword import stem
from ..stems import Stemming
from ..text import STOPWORDS, normalize_text
from ..types import Chunk

BUDGET_WORDS = 60  # a passage's share of the words shown, and the most one sentence shows
ANCHORS = 3  # the best sentences by keywords of each passage, matched by the embedding too…
AFTER = 2  # …with the sentences after each
CARRY = 1.0
DECAY = 0.7
ELLIPSIS = "…"

Similarity = Callable[[Sequence[str]], Sequence[float]]

# Words that end in a full stop without ending a sentence ("Mr. Voss", "St. Ander", "e.g. a").
ABBREVIATIONS = frozenset(
    "mr mrs ms dr st mt ft lt col gen capt sgt cpt prof sr jr rev fr hon vs cf no nos vol ch pp approx "
    "e.g i.e a.m p.m".split()
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_LABEL = re.compile(r"^\s*\*\*[^*\n]{1,40}:\*\*")  # "**Role:** …", a fact on a line of its own
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}")
_END = re.compile(r"[.!?…]+[\"'”’)\]*_]*(?=\s)")
_OPENS = re.compile(r"[\"'“‘(\[*_]*[A-Z0-9À-Ý]")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Sentence:
    text: str
    start_line: int  # lines of the note, 1-based, inclusive
    end_line: int

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class Excerpt:
    """What a passage shows: its chosen sentences, in note order."""

    chunk: Chunk
    sentences: tuple[Sentence, ...]
    text: str  # the sentences, an ellipsis wherever the passage goes on unseen

    @property
    def start_line(self) -> int:
        return self.sentences[0].start_line if self.sentences else self.chunk.start_line

    @property
    def end_line(self) -> int:
        return self.sentences[-1].end_line if self.sentences else self.chunk.end_line

    def to_json(self) -> dict[str, Any]:
        return {"label": self.chunk.label, "lines": [[s.start_line, s.end_line] for s in self.sentences]}


# ---------------------------------------------------------------------------------------------
# sentences


def split_sentences(text: str, first_line: int = 1) -> list[Sentence]:
    """The sentences of Markdown text whose first line is `first_line` of its note.

    A heading, a horizontal rule, a table's separator row, a line of tags and a blank line end a
    block and are never shown; each list item, each table row, each line that opens with a bold
    label ("**Role:** …") and each blockquote starts a block of its own; a blockquote's marker is
    dropped. Inside a block, a sentence ends at `.`, `!`, `?` or `…` (and any closing quote or
    bracket) followed by a space and a capital, a digit or an opening quote, except after an
    abbreviation ("Mr.") or an initial ("J."), and never inside a double quotation.
    """
    sentences: list[Sentence] = []
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if block:
            sentences.extend(_split_block(block))
            block.clear()

    quoted = False
    for n, line in enumerate(text.split("\n"), first_line):
        skip = _HEADING.match(line) or _RULE.match(line) or _TABLE_RULE.match(line) or _tags_only(line)
        if not line.strip() or skip:
            flush()
            continue
        if bool(_QUOTE.match(line)) != quoted:  # a blockquote begins or ends
            flush()
            quoted = not quoted
        stripped = _QUOTE.sub("", line, count=1)
        if _ITEM.match(stripped):
            flush()
            stripped = _ITEM.sub("", stripped, count=1)
        elif stripped.lstrip().startswith("|"):
            flush()
            cells = [c.strip() for c in stripped.strip().strip("|").split("|")]
            block.append((n, " | ".join(c for c in cells if c)))
            flush()
            continue
        elif _LABEL.match(stripped):
            flush()
        block.append((n, stripped.strip()))
    flush()
    return [s for s in sentences if _WORD.search(s.text)]


def _tags_only(text: str) -> bool:
    """An Obsidian tag line ("Tags: #arc/lantern #npc/liss"): words for search, not for reading."""
    words = text.split()
    return bool(words) and sum(w.startswith("#") for w in words) * 2 >= len(words)


def _split_block(lines: Sequence[tuple[int, str]]) -> list[Sentence]:
    text = ""
    starts: list[tuple[int, int]] = []  # (offset in text, line number)
    for n, line in lines:
        if not line:
            continue
        if text:
            text += " "
        starts.append((len(text), n))
        text += line
    if not text:
        return []

    def line_at(offset: int) -> int:
        return max(n for start, n in starts if start <= offset)

    # Quotation marks decide "inside a quotation" only when they pair up; else they are ignored.
    straight = text.count('"') % 2 == 0
    cuts: list[int] = []
    for m in _END.finditer(text):
        after = text[m.end() :].lstrip()
        if not after or not _OPENS.match(after):
            continue
        word = re.search(r"(\S+)$", text[: m.start() + 1])
        token = word.group(1).rstrip(".").strip("\"'“‘(*_").casefold() if word else ""
        if text[m.start()] == "." and (token in ABBREVIATIONS or re.fullmatch(r"[^\W\d_]", token)):
            continue
        before = text[: m.end()]
        if straight and before.count('"') % 2 == 1 and not before.endswith('"'):
            continue
        if before.count("“") > before.count("”"):
            continue
        cuts.append(m.end())
    out: list[Sentence] = []
    begin = 0
    for end in [*cuts, len(text)]:
        piece = text[begin:end]
        lead = len(piece) - len(piece.lstrip())
        piece = piece.strip()
        if piece:
            first = begin + lead
            out.append(Sentence(piece, line_at(first), line_at(first + len(piece) - 1)))
        begin = end
    return out


# ---------------------------------------------------------------------------------------------
# terms


# Beside the keyword path's stop words: "help us", "let us", which a player writes and a note does not.
_STOPWORDS = STOPWORDS | {"us"}


def content_terms(text: str, language: str | None = None) -> list[str]:
    """Stems of the content words, in order: accents folded, case-folded, stop words and one-letter
    words out ("Vex's" gives "vex").

    `language` None: English and Spanish stop words out, Porter stems as the keyword path stems
    English, whatever the vault: the one fixed form `oracle eval` measures answers in. A language's
    code: that language's stop words (and English's: players mix it in) and its own stemmer, as
    sentences are matched to a question in that vault."""
    if language is None:
        return stem(_content_words(text, _STOPWORDS))
    return Stemming(language).own(_content_words(text, _stopwords(language)))


@cache
def _stopwords(language: str) -> frozenset[str]:
    """A vault language's stop words and English's (and "us"), made once, not for every sentence."""
    return lexicon(language).stopwords | {"us"}


def _content_words(text: str, stopwords: frozenset[str]) -> list[str]:
    return [w for w in _WORD.findall(normalize_text(text)) if w not in stopwords and (len(w) > 1 or w.isdigit())]


def query_terms(question: str, entity_names: Iterable[str] = (), language: str | None = None) -> frozenset[str]:
    """What a sentence is matched on: the question's content terms and the names it was found to name."""
    terms = set(content_terms(question, language))
    for name in entity_names:
        terms.update(content_terms(name, language))
    return frozenset(terms)


# ---------------------------------------------------------------------------------------------
# choosing


def idf(sentence_terms: Sequence[frozenset[str]], terms: Iterable[str]) -> dict[str, float]:
    """`ln(1 + N / df)` of each term over the sentences (N of them); a term in none is left out."""
    n = len(sentence_terms)
    out = {}
    for term in terms:
        df = sum(1 for held in sentence_terms if term in held)
        if df:
            out[term] = math.log(1 + n / df)
    return out


def choose_excerpts(
    chunks: Sequence[Chunk],
    terms: frozenset[str],
    similarity: Similarity | None = None,
    *,
    budget: int = BUDGET_WORDS,
    language: str | None = None,
) -> list[Excerpt]:
    """An excerpt of each chunk, in the chunks' order, showing `budget` words per chunk on average
    (see the module docstring); `language`: the vault's, as in `content_terms`.

    `similarity(texts)` gives the cosine of each text with the question (None: keyword scores only);
    it is called once, for the chosen sentences of all the chunks together.
    """
    split = [split_sentences(c.text, c.start_line) for c in chunks]
    held = [[frozenset(content_terms(s.text, language)) for s in sentences] for sentences in split]
    weights = idf([h for hs in held for h in hs], terms)
    lexical = [[math.fsum(weights.get(t, 0.0) for t in h) for h in hs] for hs in held]  # fsum: exact, in any order
    near = [_near(scores) for scores in lexical]
    texts = [split[c][i].text for c, picks in enumerate(near) for i in picks]
    cosines = iter(list(similarity(texts)) if similarity is not None and texts else [0.0] * len(texts))
    scores = [_scores(lex, {i: float(next(cosines)) for i in picks}) for lex, picks in zip(lexical, near, strict=True)]

    taken: list[list[int]] = [[] for _ in chunks]
    used = 0
    for c, sentences in enumerate(split):  # a passage no term reaches: its opening, as a passage shows it
        if not near[c]:
            taken[c] = _fit(range(len(sentences)), sentences, budget, in_order=True)
            used += sum(sentences[i].words for i in taken[c])
    for c, sentences in enumerate(split):  # each other passage: its best sentence, whatever its size
        if near[c]:
            best = min(range(len(sentences)), key=lambda i: (-scores[c][i], i))
            taken[c].append(best)
            used += min(sentences[best].words, budget)
    rest = sorted(
        ((c, i) for c, picks in enumerate(near) if picks for i in range(len(split[c])) if i not in taken[c]),
        key=lambda ci: (-scores[ci[0]][ci[1]], ci),
    )
    total = budget * len(chunks)
    for c, i in rest:  # then the best sentences left, from any passage, while they fit
        words = split[c][i].words
        if used + words <= total:
            taken[c].append(i)
            used += words
    return [_excerpt(chunk, sentences, sorted(t), budget) for chunk, sentences, t in zip(chunks, split, taken, strict=True)]


def going_on(excerpt: Excerpt, budget: int = BUDGET_WORDS, *, back: bool = False) -> Excerpt | None:
    """What a passage shows to a player who read `excerpt` of it and asks what came next: the
    sentences after the last one shown, in note order, up to `budget` words; asked what came before
    (`back`), the nearest sentences before the first one shown (None: it showed its end, or start)."""
    sentences = split_sentences(excerpt.chunk.text, excerpt.chunk.start_line)
    edge = excerpt.sentences[0 if back else -1] if excerpt.sentences else None
    if edge is None or edge not in sentences:
        return None
    at = sentences.index(edge)
    beyond = range(at - 1, -1, -1) if back else range(at + 1, len(sentences))
    if not beyond:
        return None
    return _excerpt(excerpt.chunk, sentences, _fit(beyond, sentences, budget, in_order=True), budget)


def _near(lexical: Sequence[float]) -> list[int]:
    """The sentences the embedding reads: the `ANCHORS` best by keywords and the `AFTER` after each."""
    anchors = _best(lexical, ANCHORS)
    return sorted({j for i in anchors for j in range(i, min(i + AFTER + 1, len(lexical)))})


def _scores(lexical: Sequence[float], cosines: dict[int, float]) -> list[float]:
    """Each sentence's own score (keywords over the passage's best, plus its cosine where read),
    plus `CARRY` of the best of the two before it, fading by `DECAY` a sentence."""
    best = max(lexical, default=0.0) or 1.0
    own = [lex / best + cosines.get(i, 0.0) for i, lex in enumerate(lexical)]
    return [
        score + CARRY * max((own[j] * DECAY ** (i - j) for j in range(max(0, i - AFTER), i)), default=0.0)
        for i, score in enumerate(own)
    ]


def _fit(order: Iterable[int], sentences: Sequence[Sentence], budget: int, *, in_order: bool) -> list[int]:
    """Sentences taken best first while they fit `budget` words; the first is taken whatever its size.
    `in_order` (the opening): stop at the first that does not fit rather than skip it."""
    taken: list[int] = []
    used = 0
    for i in order:
        words = sentences[i].words
        if taken and used + words > budget:
            if in_order:
                break
            continue
        taken.append(i)
        used += words
    return sorted(taken)


def _excerpt(chunk: Chunk, sentences: Sequence[Sentence], taken: Sequence[int], budget: int) -> Excerpt:
    if not taken:
        return Excerpt(chunk, (), _clip(chunk.text, budget))
    parts: list[str] = []
    if taken[0] > 0:
        parts.append(ELLIPSIS)
    for j, i in enumerate(taken):
        if j and i != taken[j - 1] + 1:
            parts.append(ELLIPSIS)
        parts.append(_clip(sentences[i].text, budget))
    if taken[-1] < len(sentences) - 1:
        parts.append(ELLIPSIS)
    # A clipped sentence already ends in the ellipsis that would follow it.
    parts = [p for j, p in enumerate(parts) if not (p == ELLIPSIS and j and parts[j - 1].endswith(ELLIPSIS))]
    return Excerpt(chunk, tuple(sentences[i] for i in taken), " ".join(parts))


def _clip(text: str, budget: int) -> str:
    words = text.split()
    return " ".join(words[:budget]) + (f" {ELLIPSIS}" if len(words) > budget else "")


def _best(scores: Sequence[float], n: int) -> list[int]:
    """The positions of the `n` highest positive scores, best first (the earlier one on a tie)."""
    return sorted((i for i, score in enumerate(scores) if score > 0), key=lambda i: (-scores[i], i))[:n]
