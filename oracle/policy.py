"""Who reads a whole note: the game master's own policy, then what looks like GM material.

A game master says who reads what in one of two ways, or both: an allowlist (`ORACLE_PLAYER_NOTES`,
"players read only these") and a denylist (`ORACLE_GM_NOTES`, "these are mine"). With no allowlist,
a note whose folder or file name carries a game master's word (prep, todo, GM, secret, spoiler…), a
Templater template, or a note that opens by warning of spoilers is kept from players: when the Oracle
cannot tell, the text is the game master's. Every such decision carries its rule, in words, so the
ingest summary and `oracle visibility` can say why a note is hidden.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import PurePosixPath

from .lexicon import DEFAULT as DEFAULT_LANGUAGE
from .lexicon import Lexicon, default_gm_headings, lexicon
from .marks import Marks, marks_of, name_words
from .types import GM, PUBLIC, Visibility

AUTO = "auto"  # ORACLE_LANGUAGE: read the vault's own language

# Headings whose section is the game master's, down to the next heading of the same or a higher level,
# besides every heading whose words mark it (`oracle.marks`): the default of ORACLE_GM_HEADINGS.
DEFAULT_GM_HEADINGS = default_gm_headings()
_TEMPLATER_TAG = re.compile(r"<%[-_*~]?[\s\S]*?%>")
# A fenced block (a dataview query, say): tags left in one are code a written note kept, not a form.
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n[\s\S]*?^[ \t]*\1[ \t]*$", re.M)

# The rule of a note kept only because the allowlist does not name it: an embed in a note the game
# master publishes may still show its sections (he chose to show them).
UNLISTED = "not listed in ORACLE_PLAYER_NOTES"


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over POSIX paths relative to the notes folder: `*` within a name, `**` across folders,
    `?` one character, `[…]` a class. Case-insensitive, as the file systems vaults sync to are."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.I)


@dataclass(frozen=True)
class Glob:
    """One pattern of a policy. It matches a note by its path, or by any folder above it, so
    `Session Notes`, `Session Notes/` and `Session Notes/**` all mean the whole folder."""

    pattern: str

    @cached_property
    def _regex(self) -> re.Pattern[str]:
        # Composed: a name typed with composed accents matches the same name stored decomposed on disk
        # (macOS, some sync tools), and the other way round.
        text = unicodedata.normalize("NFC", self.pattern).strip().replace("\\", "/").lstrip("/")
        while text.startswith("./"):
            text = text[2:]
        return _glob_regex(text.rstrip("/") or "**")

    def matches(self, path: str) -> bool:
        path = unicodedata.normalize("NFC", path)
        parts = PurePosixPath(path).parts
        candidates = [path] + ["/".join(parts[:n]) for n in range(1, len(parts))]
        if not path.lower().endswith(".md"):
            return any(self._regex.fullmatch(c) for c in candidates)
        return any(self._regex.fullmatch(c) for c in candidates + [path[:-3]])


def _globs(patterns: Iterable[str]) -> tuple[Glob, ...]:
    return tuple(Glob(p.strip()) for p in patterns if p and p.strip())


@dataclass(frozen=True)
class Decision:
    """Who reads a whole note, and the rule that decided, in the words the summary shows."""

    visibility: Visibility
    rule: str
    guessed: bool = False  # by the note's name or opening, not by anything the game master set

    @property
    def public(self) -> bool:
        return self.visibility == PUBLIC


@dataclass(frozen=True)
class Policy:
    """The game master's choice of who reads what. Empty: every note is public unless it is marked,
    or looks like GM material. Marks are read in `language` (ORACLE_LANGUAGE), or with "auto" in
    the vault's own once it is known (`speaking`)."""

    player_notes: tuple[str, ...] = ()
    gm_notes: tuple[str, ...] = ()
    gm_headings: tuple[str, ...] = DEFAULT_GM_HEADINGS
    language: str = AUTO
    spoken: str = field(default=DEFAULT_LANGUAGE, compare=False)  # the vault's language, when `language` is auto

    @cached_property
    def _players(self) -> tuple[Glob, ...]:
        return _globs(self.player_notes)

    @cached_property
    def _gm(self) -> tuple[Glob, ...]:
        return _globs(self.gm_notes)

    @cached_property
    def marks(self) -> Marks:
        return marks_of(self.spoken if self.language == AUTO else self.language, self.gm_headings)

    def speaking(self, code: str) -> Policy:
        """This policy reading a vault written in `code` (the setting wins when it names a language)."""
        return self if code == self.spoken else replace(self, spoken=code)

    @property
    def key(self) -> str:
        """Changes whenever a note's visibility could: an index built under another policy is re-read,
        and a process under another policy does not serve its players from it."""
        raw = repr((sorted(self.player_notes), sorted(self.gm_notes), sorted(self.marks.headings), self.language,
                    POLICY_VERSION))
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """The policy in one line, for a game master's status."""
        parts = []
        if self.player_notes:
            parts.append("players read only " + ", ".join(self.player_notes) + " (ORACLE_PLAYER_NOTES)")
        if self.gm_notes:
            parts.append("game master only: " + ", ".join(self.gm_notes) + " (ORACLE_GM_NOTES)")
        if not self.player_notes:
            parts.append("everything else is public unless marked or named like GM material")
        return "; ".join(parts)

    def decide(self, path: str, text: str = "") -> Decision:
        """Who reads the note at `path` (relative to the notes folder), by the policy and its name;
        `text` (its body, frontmatter blanked) for a template's tags and a spoiler warning."""
        for glob in self._gm:
            if glob.matches(path):
                return Decision(GM, f"ORACLE_GM_NOTES: {glob.pattern}")
        gm_folder = next((f for f in PurePosixPath(path).parts[:-1] if is_gm_folder(f, self.marks.lexicon)), None)
        if gm_folder is not None:  # the documented GM folders hold even inside an allowlisted one
            return Decision(GM, f"folder {gm_folder!r} is a game master's folder")
        if self._players:
            for glob in self._players:
                if glob.matches(path):
                    return Decision(PUBLIC, f"ORACLE_PLAYER_NOTES: {glob.pattern}")
            return Decision(GM, UNLISTED)
        return looks_like_gm(path, text, self.marks)

    def unmatched(self, paths: Sequence[str]) -> list[str]:
        """Patterns that match no note: most likely a typo, which would hide or show more than meant."""
        out = []
        for name, globs in (("ORACLE_PLAYER_NOTES", self._players), ("ORACLE_GM_NOTES", self._gm)):
            out += [f"{name}: {g.pattern!r} matches no note" for g in globs if not any(g.matches(p) for p in paths)]
        return out


# Bumped when the rules that file a note change: an index filed under older rules is filed again.
POLICY_VERSION = "7"


def is_gm_folder(name: str, words_of: Lexicon) -> bool:
    """A folder of the documented GM names (`gm/`, `_GM`, `01 - Secrets`, `Secretos`), numbering and
    case dropped: the lexicon's `[gm] folders`."""
    words = [w for w in name_words(name) if not w.isdigit()]
    return len(words) == 1 and words[0] in words_of.gm_folders


def in_templates(path: str) -> bool:
    """A note in a templates folder: a form to fill in, whose names and aliases are placeholders."""
    return any(_is_templates(folder) for folder in PurePosixPath(path).parts[:-1])


def _is_templates(folder: str) -> bool:
    """A templates folder (`Templates`, `_templates`, `99 - Plantillas`), numbering dropped, in any
    language: folder names mean nothing else in another."""
    return tuple(w for w in name_words(folder) if not w.isdigit()) in lexicon().templates


def looks_like_gm(path: str, text: str, marks: Marks) -> Decision:
    """With no allowlist: a note that looks like the game master's is his (see the module docstring)."""
    parts = PurePosixPath(path).parts
    for folder in parts[:-1]:
        word = marks.name(folder)
        if word:
            return Decision(GM, f"folder {folder!r} is named like GM material ({word})", True)
        if _is_templates(folder):
            return Decision(GM, f"folder {folder!r} holds templates", True)
    stem = PurePosixPath(path).stem
    word = marks.name(stem, session_title=marks.lexicon.session_titled(stem))
    if word:
        return Decision(GM, f"file name {stem!r} is named like GM material ({word})", True)
    if "<%" in text and _TEMPLATER_TAG.search(_FENCED.sub("", text)):
        return Decision(GM, "a Templater template (<% … %> tags)", True)
    opening = _opening(text)
    if opening and marks.warning(opening):
        return Decision(GM, f"it opens with a spoiler warning ({opening[:60]!r})", True)
    return Decision(PUBLIC, "")


def _opening(text: str) -> str:
    """The note's first heading or first line of text, whichever comes first."""
    for line in text.split("\n"):
        line = line.strip()
        if line:
            return re.sub(r"^(?:#{1,6}\s+|>\s*(?:\[![^\]]*\][-+]?\s*)?)", "", line).strip(" *_")
    return ""
