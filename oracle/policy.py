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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import PurePosixPath

from .types import GM, PUBLIC, Visibility

# Words that make a folder or file name look like the game master's, as whole words of the name.
GM_NAME_WORDS = frozenset({
    "gm", "gms", "dm", "dms", "secret", "secrets", "spoiler", "spoilers", "private", "hidden", "prep",
    "planning", "todo", "todos",
})
GM_NAME_PHRASES = ("game master", "dungeon master", "gamemaster", "dungeonmaster", "to do")
# Words a played session's title may carry as part of its story (`Session 13 - The Abbot's Secret`).
NARRATIVE_WORDS = frozenset({"secret", "secrets", "hidden", "private"})
_SESSION_TITLE = re.compile(r"^\s*(?:session|sesi[oó]n|episode|chapter)\s*\d+\b|^\s*\d{1,4}\s*[-–—.:]\s", re.I)
HEADING_GM_WORDS = GM_NAME_WORDS - NARRATIVE_WORDS - {"planning"}
HEADING_GM_PHRASES = tuple(p for p in GM_NAME_PHRASES if p != "to do")
# Headings whose section is the game master's, down to the next heading of the same or a higher level.
DEFAULT_GM_HEADINGS = (
    "GM", "DM", "GM Notes", "DM Notes", "GM Only", "DM Only", "GM Secrets", "DM Secrets", "Game Master Notes",
    "Dungeon Master Notes", "Prep", "Session Prep", "Planning", "Secrets", "Secret", "Secrets and Clues",
    "Spoilers", "Spoiler", "TODO", "To Do", "Beats", "Story Beats", "Plot Beats",
)
# A note under a folder of one of these names, at any depth, is GM-only whatever the policy says.
GM_FOLDERS = frozenset({"gm", "dm", "secret", "secrets", "private"})
# Folders of Templater (and core Templates) templates: prep scaffolding, never campaign facts.
TEMPLATE_FOLDERS = frozenset({"templates", "template", "_templates", "templater"})
_TEMPLATER_TAG = re.compile(r"<%[-_*~]?[\s\S]*?%>")
_SPOILER_WARNING = re.compile(
    r"\bspoilers?\b|\bdo\s+not\s+read\b|\bdon[’']?t\s+read\b|\b(?:gm|dm)(?:'s)?\s+eyes\s+only\b",
    re.I,
)

# The rule of a note kept only because the allowlist does not name it: an embed in a note the game
# master publishes may still show its sections (he chose to show them).
UNLISTED = "not listed in ORACLE_PLAYER_NOTES"


def name_words(name: str) -> list[str]:
    """The words of a file or folder name: `Z - DM Only` → z, dm, only; `_gm` → gm; `GM-only` → gm, only."""
    return [w for w in re.split(r"[^0-9a-z]+", name.casefold()) if w]


def gm_word_in(name: str) -> str:
    """The game master's word a name carries, or ""."""
    words = name_words(name)
    for word in words:
        if word in GM_NAME_WORDS:
            return word
    joined = " ".join(words)
    for phrase in GM_NAME_PHRASES:
        if re.search(rf"(?:^| ){re.escape(phrase)}(?: |$)", joined):
            return phrase
    return ""


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
        text = self.pattern.strip().replace("\\", "/").lstrip("/")
        while text.startswith("./"):
            text = text[2:]
        return _glob_regex(text.rstrip("/") or "**")

    def matches(self, path: str) -> bool:
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
    or looks like GM material."""

    player_notes: tuple[str, ...] = ()
    gm_notes: tuple[str, ...] = ()
    gm_headings: tuple[str, ...] = DEFAULT_GM_HEADINGS

    @cached_property
    def _players(self) -> tuple[Glob, ...]:
        return _globs(self.player_notes)

    @cached_property
    def _gm(self) -> tuple[Glob, ...]:
        return _globs(self.gm_notes)

    @cached_property
    def headings(self) -> frozenset[str]:
        return frozenset(normalize_heading(h) for h in self.gm_headings if normalize_heading(h))

    @property
    def key(self) -> str:
        """Changes whenever a note's visibility could: an index built under another policy is re-read."""
        raw = repr((sorted(self.player_notes), sorted(self.gm_notes), sorted(self.headings), POLICY_VERSION))
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
        gm_folder = next((f for f in PurePosixPath(path).parts[:-1] if f.casefold() in GM_FOLDERS), None)
        if gm_folder is not None:  # the documented GM folders hold even inside an allowlisted one
            return Decision(GM, f"folder {gm_folder!r} is a game master's folder")
        if self._players:
            for glob in self._players:
                if glob.matches(path):
                    return Decision(PUBLIC, f"ORACLE_PLAYER_NOTES: {glob.pattern}")
            return Decision(GM, UNLISTED)
        return looks_like_gm(path, text)

    def unmatched(self, paths: Sequence[str]) -> list[str]:
        """Patterns that match no note: most likely a typo, which would hide or show more than meant."""
        out = []
        for name, globs in (("ORACLE_PLAYER_NOTES", self._players), ("ORACLE_GM_NOTES", self._gm)):
            out += [f"{name}: {g.pattern!r} matches no note" for g in globs if not any(g.matches(p) for p in paths)]
        return out


POLICY_VERSION = "3"


def in_templates(path: str) -> bool:
    """A note in a templates folder: a form to fill in, whose names and aliases are placeholders."""
    return any(folder.casefold() in TEMPLATE_FOLDERS for folder in PurePosixPath(path).parts[:-1])


def looks_like_gm(path: str, text: str = "") -> Decision:
    """With no allowlist: a note that looks like the game master's is his (see the module docstring)."""
    parts = PurePosixPath(path).parts
    for folder in parts[:-1]:
        word = gm_word_in(folder)
        if word:
            return Decision(GM, f"folder {folder!r} is named like GM material ({word})", True)
        if folder.casefold() in TEMPLATE_FOLDERS:
            return Decision(GM, f"folder {folder!r} holds templates", True)
    stem = PurePosixPath(path).stem
    word = gm_word_in(stem)
    if word in NARRATIVE_WORDS and _SESSION_TITLE.match(stem):
        word = ""  # "Session 37 - Secrets of Brokenveil Peak" is a played session's title
    if word:
        return Decision(GM, f"file name {stem!r} is named like GM material ({word})", True)
    if _TEMPLATER_TAG.search(text):
        return Decision(GM, "a Templater template (<% … %> tags)", True)
    opening = _opening(text)
    if opening and _SPOILER_WARNING.search(opening):
        return Decision(GM, f"it opens with a spoiler warning ({opening[:60]!r})", True)
    return Decision(PUBLIC, "")


def _opening(text: str) -> str:
    """The note's first heading or first line of text, whichever comes first."""
    for line in text.split("\n"):
        line = line.strip()
        if line:
            return re.sub(r"^(?:#{1,6}\s+|>\s*(?:\[![^\]]*\][-+]?\s*)?)", "", line).strip(" *_")
    return ""


_HEADING_NUMBER = re.compile(r"^(?:\d+|[ivx]+|[a-z])[.):]\s+", re.I)


def normalize_heading(text: str) -> str:
    """A heading's words as a list entry is compared with them: markup, numbering and case dropped
    (`### 4. **Secrets and Clues**:` → `secrets and clues`)."""
    text = re.sub(r"%%.*?%%", " ", text)
    text = re.sub(r"[*_`~=]+", "", text).strip()
    text = _HEADING_NUMBER.sub("", text)
    text = text.replace("&", "and")
    return " ".join(re.split(r"[^\w']+", text.casefold())).strip()


def gm_heading(text: str, headings: frozenset[str]) -> str:
    """The list entry a heading opens a GM section with, or "": the heading is an entry, or an entry
    followed by a colon or a dash and more words (`DM Notes: Pointing to the island`), or the GM word
    its words carry (`Prep work TODO` → prep)."""
    raw = re.sub(r"[*_`~]+", "", text).strip()
    raw = _HEADING_NUMBER.sub("", raw)
    head = re.split(r"\s*(?::|\s[-–—]\s|\()", raw, maxsplit=1)[0]
    for candidate in (normalize_heading(text), normalize_heading(head)):
        if candidate in headings:
            return candidate
    # Fail closed on a heading no list names but whose words are the game master's ("Prep work TODO",
    # "GM Tips"). Words that also tell stories or titles do not count alone: "The Secret Door",
    # "Planning the Heist", "there is still much to do".
    words = name_words(raw)
    joined = " ".join(words)
    return next((w for w in words if w in HEADING_GM_WORDS), "") or next(
        (p for p in HEADING_GM_PHRASES if re.search(rf"(?:^| ){p}(?: |$)", joined)), ""
    )
