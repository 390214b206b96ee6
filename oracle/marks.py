"""The game master's marks, read by their words, not their spelling.

GMs write the same mark a dozen ways: `# Secret and Clues`, `## 🔑 Secrets & Clues`, `### 4 Secrets
and Clues`, `Ten Secrets and Clues`, `GMNotes/`, `[!dmnotes]`, `#GM-only`, `DMNotes::`. Every heading,
callout type, tag, folder, file name, frontmatter key and Dataview field is first cut into words
(case, accents, Unicode forms, emoji, numbering, `&`, `/` and words written as one all normalised),
then read against the vault's lexicon (`oracle.lexicon`):

- a name made only of mark words (a marker such as `secrets`, `prep`, `gm`, with helpers such as
  `and clues`, `notes`, `define`, and numbers) is a mark: `Secrets and Clues`, `GM Notes`, `Prep`;
- a word for the game master beside a note word is a mark wherever it stands: `DM Notes on the cult`;
- a marker beside a word of the story is a title, not a mark: `Hidden Valley`, `The Secret Garden`,
  `#secret-service`, `gm-rowen` (a player's initials), `Session 5 - Planning the Heist`.

So a mark holds in the vault's language whatever its spelling, and story names that borrow a mark's
word stay readable. Titles that borrow one are listed for the game master (`oracle.conventions`).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from .lexicon import Lexicon, fold, lexicon, words

# Emoji and pictographs (and the joiners and variation selectors that build them) carry no words.
_SYMBOLS = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2300-\u23ff\u2b00-\u2bff\ufe0f\u200d\u20e3]")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2,})|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_LONGEST_JOINED = 40
_TABLE_TALK_MORE = 2  # words an out-of-game heading may add to its phrase: `Feedback from players`


def name_words(text: str, vocabulary: frozenset[str] = frozenset(), anchors: frozenset[str] = frozenset()) -> list[str]:
    """The words of a name as marks compare them: `🔑 GMNotes & Clues` → gm, notes, and, clues;
    `dm_notes` → dm, notes; `dmnotes` → dm, notes when both are in `vocabulary` and one is in
    `anchors` (`door` is not do + or); `Keeper's` → keeper."""
    text = unicodedata.normalize("NFC", _SYMBOLS.sub(" ", text))
    text = _CAMEL.sub(" ", text).replace("&", " and ").replace("+", " and ").replace("’", "'")
    words = []
    for token in _TOKEN.findall(fold(text)):
        token = re.sub(r"'s$|'$", "", token)
        words += _joined(token, vocabulary, anchors) if token not in vocabulary else [token]
    return words


def _joined(token: str, vocabulary: frozenset[str], anchors: frozenset[str]) -> list[str]:
    """A word written as several (`gmnotes`, `secretsandclues`), cut into words of `vocabulary` when
    it is made of nothing else and one of them is an anchor (a marker or a word for the game master);
    else the word itself."""
    if not anchors or len(token) > _LONGEST_JOINED or not token.isalpha():
        return [token]
    best: list[list[str] | None] = [[]] + [None] * len(token)  # the fewest words spelling token[:i]
    for end in range(1, len(token) + 1):
        for start in range(max(0, end - 16), end):
            head, known = best[start], best[end]
            if head is not None and token[start:end] in vocabulary and (known is None or len(head) + 1 < len(known)):
                best[end] = head + [token[start:end]]
    found = best[len(token)]
    return found if found is not None and len(found) > 1 and anchors.intersection(found) else [token]


def _grouped(words: list[str], phrases: frozenset[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Words with each phrase of the lexicon ("game master", "eyes only") taken as one."""
    longest = max((len(p) for p in phrases), default=1)
    out: list[tuple[str, ...]] = []
    i = 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 1, -1):
            if tuple(words[i : i + n]) in phrases:
                out.append(tuple(words[i : i + n]))
                i += n
                break
        else:
            out.append((words[i],))
            i += 1
    return out


_ENUMERATION = re.compile(r"^\s*(?:\d+|[ivx]+|[a-z])\s*[-.):]\s+", re.I)


@dataclass(frozen=True)
class Marks:
    """What marks text as the game master's in one vault: its lexicon's words and the headings the
    game master listed (ORACLE_GM_HEADINGS), each compared as `normalize_heading` gives it."""

    lexicon: Lexicon
    headings: frozenset[str] = frozenset()

    def heading(self, text: str) -> str:
        """The mark a heading opens a GM section with ("" if none): a listed heading, alone or before
        a colon or a dash (`DM Notes: Pointing to the island`), or a heading whose words mark it."""
        raw = re.sub(r"[*_`~]+", "", text).strip()
        head = re.split(r"\s*(?::|\s[-–—]\s|\()", _ENUMERATION.sub("", raw), maxsplit=1)[0]
        for candidate in (normalize_heading(text), normalize_heading(head)):
            if candidate in self.headings:
                return candidate
        return self.words(raw)

    def word(self, text: str) -> str:
        """The mark a callout type, Admonition type, Dataview key, frontmatter key or tag carries
        (`gm-only`, `GMNote`, `secret/plot`), or "": a nested tag marks when any of its parts does."""
        parts = [p for p in text.split("/") if p.strip()]
        return next((m for m in map(self.words, parts if len(parts) > 1 else [text]) if m), "")

    def name(self, text: str, *, session_title: bool = False) -> str:
        """The mark a folder's or file's name carries, or "". After a session's number (`Session 13 -
        The Abbot's Secret`) the words that also title stories mark nothing."""
        return self.words(text, story=self.lexicon.narrative if session_title else frozenset())

    def words(self, text: str, story: frozenset[str] = frozenset()) -> str:
        """The mark in `text`, read by the rules of the module docstring."""
        lex = self.lexicon
        groups = [g for g in _grouped(name_words(text, *self._vocabulary), lex.phrases)
                  if not (len(g) == 1 and (g[0].isdigit() or g[0] in lex.numbers))]
        if not groups:
            return ""
        for i, group in enumerate(groups):
            if group in lex.roles and _beside(groups, i, lex):
                return " ".join(group)
        markers = [g for g in groups if g in lex.markers and not (len(g) == 1 and g[0] in story)]
        if markers and all(g in lex.markers or g in lex.roles or g in lex.notes or (len(g) == 1 and g[0] in lex.helpers)
                           for g in groups):
            return " ".join(markers[0])
        return ""

    def table_talk(self, heading: str) -> str:
        """The out-of-game heading (`Feedback`, `Notas importantes de la sesión`, `Session zero`) a
        heading opens with, or "": what the table says to itself, never what happened in the game. Two
        more words may follow (`Feedback from players`); a longer heading is a title that opens with the
        word (`Feedback Circuit among INK4 Tumor Suppressors…`, `Schedule-dependent interaction…`)."""
        words = tuple(w for w in name_words(heading) if not w.isdigit())
        return next((" ".join(e) for e in sorted(self.lexicon.table_talk, key=len, reverse=True)
                     if words[: len(e)] == e and len(words) - len(e) <= _TABLE_TALK_MORE), "")

    def warning(self, text: str) -> str:
        """The "do not read" (`Spoilers!`, `No leer`, `GM eyes only`) a line says anywhere, or ""."""
        said = words(text)
        for phrase in sorted(self.lexicon.warnings, key=len, reverse=True):
            if any(said[i:i + len(phrase)] == phrase for i in range(len(said) - len(phrase) + 1)):
                return " ".join(phrase)
        return ""

    def story_title(self, text: str) -> str:
        """A marker used as part of a story's name ("Secrets of the Deep", "Hidden Valley"), or "":
        not a mark, but worth the game master's look."""
        if self.words(text):
            return ""
        groups = _grouped(name_words(text, *self._vocabulary), self.lexicon.phrases)
        return next((" ".join(g) for g in groups if g in self.lexicon.markers and g not in self.lexicon.roles), "")

    @cached_property
    def _vocabulary(self) -> tuple[frozenset[str], frozenset[str]]:
        """The words a name written as one is cut into, and those of which one must be among them."""
        lex = self.lexicon
        return lex.vocabulary, frozenset(p[0] for p in lex.markers | lex.roles if len(p) == 1)


def _beside(groups: list[tuple[str, ...]], i: int, lex: Lexicon) -> bool:
    """A word for the game master next to a note word: `GM notes`, `DM only`, `notes for the referee`."""
    after = groups[i + 1] if i + 1 < len(groups) else None
    before = [g for g in groups[:i] if not (len(g) == 1 and g[0] in lex.helpers)]
    return after in lex.notes or (bool(before) and before[-1] in lex.notes and groups.index(before[-1]) >= i - 3)


def normalize_heading(text: str) -> str:
    """A heading's words as a listed heading is compared with them: markup, emoji, numbering, `&`
    and case dropped (`### 4. **Secrets & Clues** 🔑` → `secrets and clues`)."""
    text = re.sub(r"%%.*?%%", " ", text)
    text = re.sub(r"[*_`~=]+", "", _SYMBOLS.sub(" ", text)).strip()
    text = _ENUMERATION.sub("", text).replace("&", " and ")
    return " ".join(w for w in re.split(r"[^\w']+", fold(unicodedata.normalize("NFC", text))) if w).strip()


def marks_of(code: str, headings: Iterable[str] = ()) -> Marks:
    """The marks of a vault written in `code` with the game master's listed `headings`."""
    return Marks(lexicon(code), frozenset(h for h in map(normalize_heading, headings) if h))
