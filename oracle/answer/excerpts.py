"""Passages that answer: the sentences of a passage that best match the question.

Without the LLM, a player reads passages. A session is up to 1,200 words, and its opening is rarely
the part asked about, so each passage shows the few sentences that match the question best, in
note order, with an ellipsis where sentences were skipped, and cites only the lines they sit on.

How a sentence is chosen, for each passage:
1. Keyword overlap: the question's content words and the names of the entities it names (stop
   words out, accents folded, Porter-stemmed like the keyword path), each term weighted by its
   rarity among the sentences of all the passages shown, `idf = ln(1 + N / df)` (the term every
   passage repeats tells sentences apart the least). A sentence scores the sum over the distinct
   terms it holds.
2. The query embedding, over the few best of those (`shortlist` of them, never every sentence: each
   costs an encoding): the final score is the keyword score divided by the passage's best, plus the
   cosine between the sentence and the question.
3. The best sentence, then the one after it (what was asked about is often told in the sentence
   after the one that names it), then the next best, are taken while they fit the word budget (the
   one a passage showed before: 60 words), then put back in note order. A passage no term reaches
   shows its opening, as before.

Everything here is pure and synchronous; the similarity function (the embedding model) is passed
in, and the caller runs the whole thing off the event loop.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..retrieve.keyword import stem
from ..text import STOPWORDS, normalize_text
from ..types import Chunk

BUDGET_WORDS = 60
SHORTLIST = 4
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

    def to_json(self) -> dict:
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


def content_terms(text: str) -> list[str]:
    """Stems of the content words, in order: accents folded, case-folded, stop words and one-letter
    words out ("Vex's" gives "vex"), Porter-stemmed as the keyword path stems."""
    words = [w for w in _WORD.findall(normalize_text(text)) if w not in _STOPWORDS and (len(w) > 1 or w.isdigit())]
    return stem(words)


def query_terms(question: str, entity_names: Iterable[str] = ()) -> frozenset[str]:
    """What a sentence is matched on: the question's content terms and the names it was found to name."""
    terms = set(content_terms(question))
    for name in entity_names:
        terms.update(content_terms(name))
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
    shortlist: int = SHORTLIST,
) -> list[Excerpt]:
    """An excerpt of each chunk, in the chunks' order (see the module docstring).

    `similarity(texts)` gives the cosine of each text with the question (None: keyword scores only);
    it is called once, for the shortlisted sentences of all the chunks together.
    """
    split = [split_sentences(c.text, c.start_line) for c in chunks]
    held = [[frozenset(content_terms(s.text)) for s in sentences] for sentences in split]
    weights = idf([h for hs in held for h in hs], terms)
    lexical = [[math.fsum(weights.get(t, 0.0) for t in h) for h in hs] for hs in held]  # fsum: exact, in any order
    shortlists = [_best(scores, shortlist) for scores in lexical]
    texts = [split[c][i].text for c, picks in enumerate(shortlists) for i in picks]
    cosines = list(similarity(texts)) if similarity is not None and texts else [0.0] * len(texts)
    out: list[Excerpt] = []
    at = 0
    for chunk, sentences, scores, picks in zip(chunks, split, lexical, shortlists, strict=True):
        sims = cosines[at : at + len(picks)]
        at += len(picks)
        if picks:
            best = max(scores[i] for i in picks)
            final = {i: scores[i] / best + float(sim) for i, sim in zip(picks, sims, strict=True)}
            ranked = sorted(picks, key=lambda i: (-final[i], i))
            # What was asked about is often told in the sentence after the one that names it.
            follow = [ranked[0] + 1] if ranked[0] + 1 < len(sentences) else []
            order = list(dict.fromkeys([ranked[0], *follow, *ranked[1:]]))
        else:
            order = list(range(len(sentences)))  # nothing matched: the opening, as a passage shows it
        out.append(_excerpt(chunk, sentences, _fit(order, sentences, budget, in_order=not picks), budget))
    return out


def _fit(order: Sequence[int], sentences: Sequence[Sentence], budget: int, *, in_order: bool) -> list[int]:
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
