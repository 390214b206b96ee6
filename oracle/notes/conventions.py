"""What a vault's own conventions say of each note, learned from the vault as a whole.

No list of spellings foresees the next game master (`Tempus Session 05 (2023-04-05).md` in
`01 - session-notes/`, characters under `02 - characters/allies/`), so each question is asked of the
whole vault, not of one file:

- **Its language**: the one whose frequent words its text uses most (ORACLE_LANGUAGE overrides).
- **Sessions**: a session word and a number anywhere in a note's name (`Session 05`, `S05`, `Ep. 12`,
  `Sessão 02.1` — a part of session 2) or its frontmatter. A folder is one of sessions when its name
  (or a folder above it) says so in any language, or when most of its notes carry such a number; there,
  a bare number (`05 - The Fall`) or a date (in date order) numbers a session too, and a note without
  a number is a session's record unless it links to three sessions or more (a session log). A vault that
  numbers no session that way has its sessions in whatever names start with a number or are dates,
  outside the folders of characters and places.
- **Kinds**: a folder names characters or places when its words do, numbering and decoration
  dropped (`02 - Characters`, `10-Personajes`, `📜 Places`), and it counts for every folder below it.
- **Entities**: a note is a character, place or thing `oracle who` finds when its folder says so, when
  its tags do (`person`, `place/city`, `Pessoa/Inimigo`), or when other notes link to it and its name is
  a name (a word of it is never written in lower case in the vault).

Pure: it reads the bytes it is given. What it made of the vault is reported to the game master
(`report.py`), so a convention it missed can be corrected.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ..lexicon import Lexicon, detect_language, fold, lexicon
from ..marks import name_words
from ..policy import in_templates
from .frontmatter import split_frontmatter, strings
from .names import DATE, Names, leading_number, sessions_from_frontmatter, sessions_in_name

AUTO = "auto"
SHEET, WORLD, SESSION, NOTE = "sheet", "world", "session", "note"
ENTITY_KINDS = frozenset({SHEET, WORLD})

# A note of a folder of sessions that numbers no session of its own and links to this many of them is
# an index of them (a session log, a list of recaps), not one more session's record.
INDEX_LINKS = 3
# A wikilink, or a Markdown link to a note, its heading and title (`[➹](sessions/s1.md "tg")`) allowed.
_LINK = re.compile(r"\[\[([^\[\]\n|#]*)[^\[\]\n]*\]\]"
                   r"|\]\(<?([^()\n<>#]+?\.md)(?:#[^()\n\"']*)?>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\)")
_TOKENS = re.compile(r"[^\W\d_][\w'’-]*")


@dataclass(frozen=True)
class NoteFacts:
    """What the vault says of one note."""

    kind: str = NOTE
    sessions: tuple[int, ...] = ()
    entity: bool = False
    how: str = ""  # how its sessions were found ("its name", "frontmatter", "a date in a sessions folder")
    why_entity: str = ""  # "its folder", "its tags", "links to it"


@dataclass(frozen=True)
class Conventions:
    language: str
    names: Names
    facts: Mapping[str, NoteFacts]
    session_folders: tuple[str, ...]  # folders read as folders of sessions
    kind_folders: Mapping[str, str]  # folder → the kind its name gives
    session_indexes: tuple[str, ...] = ()  # notes of those folders read as indexes of sessions, not sessions

    @property
    def lexicon(self) -> Lexicon:
        return lexicon(self.language)

    def of(self, rel: str) -> NoteFacts:
        return self.facts.get(rel, NoteFacts())

    def key(self, rel: str) -> str:
        """What of the vault beyond the note's own bytes its index entry depends on: its name, what the
        vault makes of it, the vault's language."""
        f = self.of(rel)
        return f"{self.names.name(rel)}\0{f.kind}\0{f.sessions}\0{f.entity}\0{self.language}"

    @classmethod
    def read(cls, files: Mapping[str, bytes], folder_kinds: Mapping[str, str] | None = None,
             language: str = AUTO) -> Conventions:
        texts = {rel: data.decode("utf-8", "replace") for rel, data in files.items()}
        code = detect_language(texts.values()) if language == AUTO else language
        lex = lexicon(code)
        kinds = Kinds(lex, folder_kinds or {})
        names = Names.of(files)
        fronts = {rel: split_frontmatter(t)[0] if t.startswith("---") else {} for rel, t in texts.items()}
        sessions, how, session_folders = _sessions(list(files), fronts, kinds, lex)
        links = {rel: _link_targets(text, rel, names) for rel, text in texts.items()}
        indexes = {rel for rel in files if rel not in sessions and _under(rel, session_folders)
                   and len(links[rel] & sessions.keys()) >= INDEX_LINKS}
        kind = {rel: kinds.of(rel) or (SESSION if rel in sessions or (_under(rel, session_folders)
                                                                      and rel not in indexes) else NOTE)
                for rel in files}
        overviews = {rel for rel in files if kinds.folder(PurePosixPath(rel).stem)}  # `npcs/npcs.md`: a list of them
        entities = {rel: why for rel, why in _entities(texts, links, fronts, kind, sessions, lex).items()
                    if rel not in overviews}
        facts = {
            rel: NoteFacts(kind[rel], sessions.get(rel, ()), rel in entities, how.get(rel, ""), entities.get(rel, ""))
            for rel in files
        }
        return cls(code, names, facts, tuple(sorted(session_folders)), kinds.seen, tuple(sorted(indexes)))


class Kinds:
    """The kind a folder's name gives, the nearest folder that gives one deciding (`characters/allies/`)."""

    def __init__(self, lex: Lexicon, setting: Mapping[str, str]) -> None:
        own = {_words(k): v for k, v in setting.items() if _words(k)}
        self.map = {**lex.folder_kinds, **own}
        self.seen: dict[str, str] = {}

    def folder(self, name: str) -> str | None:
        words = _words(name)
        if not words:
            return None
        for key in (words, words[:1], words[-1:]):
            if key in self.map:
                return self.map[key]
        return None

    def of(self, rel: str) -> str | None:
        parts = PurePosixPath(rel).parts[:-1]
        for depth in range(len(parts), 0, -1):
            kind = self.folder(parts[depth - 1])
            if kind:
                self.seen.setdefault("/".join(parts[:depth]), kind)
                return kind
        return None


def _words(name: str) -> tuple[str, ...]:
    return tuple(w for w in name_words(name) if not w.isdigit())


def _under(rel: str, folders: set[str]) -> bool:
    parent = PurePosixPath(rel).parent
    return any(str(p) in folders for p in [parent, *parent.parents] if str(p) != ".")


def _sessions(paths: list[str], fronts: Mapping[str, Mapping[str, Any]], kinds: Kinds,
              lex: Lexicon) -> tuple[dict[str, tuple[int, ...]], dict[str, str], set[str]]:
    """(session numbers, how each was found, the folders of sessions) of every note."""
    sessions: dict[str, tuple[int, ...]] = {}
    how: dict[str, str] = {}
    by_folder: dict[str, list[str]] = defaultdict(list)
    for rel in paths:
        path = PurePosixPath(rel)
        by_folder[str(path.parent)].append(rel)
        found = sessions_from_frontmatter(fronts.get(rel, {}))
        if found:
            sessions[rel], how[rel] = found, "frontmatter"
        elif kinds.of(rel) not in ENTITY_KINDS and (found := sessions_in_name(path.stem)):
            sessions[rel], how[rel] = found, "its name"
    named = {str(PurePosixPath(p).parent) for p in sessions}
    worded = {str(p) for f in by_folder for p in [PurePosixPath(f), *PurePosixPath(f).parents]
              if str(p) != "." and set(_words(p.name)) & lex.session_words}
    folders = {f for f in by_folder if f != "." and any(f == n or f.startswith(n + "/") for n in worded)}
    folders |= worded
    folders |= {f for f, notes in by_folder.items()
                if f in named and len(notes) >= 2 and 2 * sum(n in sessions for n in notes) >= len(notes)}
    implicit = not sessions and not folders  # the vault numbers no session by word: numbers and dates do
    for folder, notes in by_folder.items():
        in_sessions = folder in folders or _under(f"{folder}/x", folders)
        if not (in_sessions or implicit):
            continue
        dated: list[tuple[tuple[int, int, int], str]] = []
        for rel in notes:
            stem = PurePosixPath(rel).stem
            if rel in sessions or kinds.of(rel) in ENTITY_KINDS:
                continue
            number = leading_number(stem)
            bare = in_sessions or re.match(r"^\s*\d{1,4}\s*[-–—_.:]+\s*\S", stem)
            if number is not None and bare:
                sessions[rel], how[rel] = (number,), "a number in a folder of sessions" if in_sessions else "its number"
            elif m := DATE.match(stem):
                dated.append(((int(m[1]), int(m[2]), int(m[3])), rel))
        if len(dated) >= (1 if in_sessions else 2) and not any(n in sessions for n in notes):
            for n, (_, rel) in enumerate(sorted(dated), 1):
                sessions[rel], how[rel] = (n,), "its date, in date order"
    return sessions, how, folders


def _entities(texts: Mapping[str, str], links: Mapping[str, set[str]], fronts: Mapping[str, Mapping[str, Any]],
              kind: Mapping[str, str], sessions: Mapping[str, tuple[int, ...]], lex: Lexicon) -> dict[str, str]:
    """Each note that is a character, place or thing, with why (`links`: the notes each note links to)."""
    out: dict[str, str] = {}
    for rel, k in kind.items():
        if in_templates(rel):
            continue
        if k in ENTITY_KINDS:
            out[rel] = "its folder"
        elif rel not in sessions and _tagged(fronts.get(rel, {}), lex):  # a session tags the places it visits
            out[rel] = "its tags"
    linked: dict[str, int] = defaultdict(int)
    for targets in links.values():
        for target in targets:
            linked[target] += 1
    candidates = [rel for rel in linked if rel not in out and rel not in sessions and not in_templates(rel)
                  and not DATE.match(PurePosixPath(rel).stem)]
    if candidates:
        lower = _lowercase_words(texts.values())
        for rel in candidates:
            words = [fold(w) for w in _TOKENS.findall(_title(rel, fronts.get(rel, {})))]
            if any(w not in lower for w in words):
                out[rel] = "links to it"
    return out


def _link_targets(text: str, rel: str, names: Names) -> set[str]:
    """The other notes of the vault a note links to."""
    if "[[" not in text and "](" not in text:
        return set()
    written = (m.group(1) if m.group(1) is not None else m.group(2) for m in _LINK.finditer(text))
    return {t for w in written if w.strip() and (t := names.resolve(w, rel)) is not None and t != rel}


def _title(rel: str, front: Mapping[str, Any]) -> str:
    titles = strings(front.get("title")) or strings(front.get("name"))
    return titles[0] if titles else PurePosixPath(rel).stem.replace("_", " ").replace("-", " ")


def _tagged(front: Mapping[str, Any], lex: Lexicon) -> bool:
    tags = [t for key in ("tags", "tag") for t in _tag_list(front.get(key))]
    return any(fold(t.lstrip("#").split("/")[0]) in lex.tag_kinds for t in tags)


def _tag_list(value: object) -> list[str]:
    if isinstance(value, str):
        return [t for t in re.split(r"[\s,]+", value) if t]
    return list(strings(value))


def _lowercase_words(texts) -> set[str]:
    """Every word the vault writes in lower case somewhere: a common word, not a name."""
    return {fold(w) for text in texts for w in _TOKENS.findall(text) if w[0].islower()}
