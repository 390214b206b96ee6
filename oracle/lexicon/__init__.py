"""The words the Oracle reads a vault by, one data file per language (`en.toml`, `es.toml`, …).

Game masters name sessions, folders and secrets in their own language, so no word list lives in
code. Each file gives, for its language: frequent words (which language a vault is written in),
session words, the words that mark a heading, folder, file, tag, callout or field as the game
master's, and the folder and tag names of characters and places. `international.toml` holds the
role-playing words GMs borrow from English whatever their language (GM, DM, NPC, spoilers).

Session words and the names of character and place folders are read in every language at once:
they name notes and folders, and none means anything else in another language. The game master's
marks are read in the vault's own language and the international words only: Spanish "todos"
(all) is not English "todos".
"""
from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any

DEFAULT = "en"
INTERNATIONAL = "international"


def fold(text: str) -> str:
    """A word as lists compare it: Unicode-composed, case and accents folded (`Sesión` → `sesion`)."""
    text = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFC", "".join(ch for ch in text if not unicodedata.combining(ch)))


def _phrase(entry: str) -> tuple[str, ...]:
    return tuple(fold(entry).split())


def words(entry: str) -> tuple[str, ...]:
    """A heading or phrase, as they are compared: its folded words, punctuation dropped."""
    return tuple(re.findall(r"[^\W_]+", fold(entry)))


_words = words


def _data(code: str) -> dict[str, Any]:
    """One language's data file as TOML gives it."""
    return tomllib.loads(resources.files(__name__).joinpath(f"{code}.toml").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Lexicon:
    """Word lists, folded. `language(code)` is one data file as written; `lexicon(code)` the words
    in effect for a vault: its language's marks with the international ones, every language's
    session words (folded, plurals included) and folder and tag names."""

    code: str
    name: str
    common: frozenset[str]
    session_words: frozenset[str]
    session_plurals: frozenset[str]
    session_letters: frozenset[str]
    markers: frozenset[tuple[str, ...]]
    roles: frozenset[tuple[str, ...]]
    notes: frozenset[tuple[str, ...]]
    helpers: frozenset[str]
    numbers: frozenset[str]
    narrative: frozenset[str]
    folder_kinds: Mapping[tuple[str, ...], str]
    tag_kinds: Mapping[str, str]
    hubs: frozenset[str]
    prep: frozenset[tuple[str, ...]]
    reference: frozenset[tuple[str, ...]]
    stopwords: frozenset[str]  # a question's words the keyword path does without
    table_talk: frozenset[tuple[str, ...]]  # headings of what the table says to itself, out of the game
    recap_previous: frozenset[tuple[str, ...]]  # headings of a retelling of the session before
    recap_happened: frozenset[tuple[str, ...]]  # headings of what happened in the session
    connectives: frozenset[str]  # words that open a question continuing the last one ("and", "y")
    interjections: frozenset[str]  # said before a question ("ok so…", "vale, y…")
    openers: frozenset[tuple[str, ...]]  # elliptical openings ("what about", "y después")
    same: tuple[tuple[tuple[str, ...], str], ...]  # "the same" and the word that says as what
    pronouns: frozenset[str]  # third-person pronouns for a person
    next: frozenset[tuple[str, ...]]  # words saying "after what was told" ("then", "after that", "luego")
    happen: frozenset[str]  # the verbs a question asking what came next is made of ("happened", "did", "pasó")
    before: frozenset[tuple[str, ...]]  # words saying "before what was told" ("before that", "earlier", "antes")
    warnings: frozenset[tuple[str, ...]]  # a note opening with one of these is kept from players ("do not read")
    gm_folders: frozenset[str]  # a folder of one of these names is the game master's whatever the policy says
    templates: frozenset[tuple[str, ...]]  # names of template folders: forms, never campaign facts
    # Table talk in a thread (bot/listening.py):
    acknowledgements: frozenset[str]  # whole messages of these are thanks, laughter, agreement
    questions: frozenset[str]  # question words and requests a question opens with ("who", "dime")
    you: frozenset[str]  # "you": "are you coming?" is put to someone at the table...
    you_asks: frozenset[str]  # ...opening with one of these auxiliaries...
    telling: frozenset[str]  # ...unless a verb of telling follows ("can you remind me")

    @classmethod
    def read(cls, code: str) -> Lexicon:
        """One data file; its session words as written (accents kept), the rest folded."""
        raw = _data(code)
        gm, kinds, tags, vault, keyword = raw["gm"], raw["kinds"], raw["tags"], raw["vault"], raw["keyword"]
        table, recap, follow = raw["table"], raw["recap"], raw["followup"]
        listening = raw.get("listening", {})
        return cls(
            code=raw["language"],
            name=raw["name"],
            common=frozenset(fold(w) for w in raw["common"]),
            session_words=frozenset(w.casefold() for w in raw["sessions"]["words"]),
            session_plurals=frozenset(w.casefold() for w in raw["sessions"]["plurals"]),
            session_letters=frozenset(fold(w) for w in raw["sessions"]["letters"]),
            markers=frozenset(_phrase(w) for w in gm["markers"]),
            roles=frozenset(_phrase(w) for w in gm["roles"]),
            notes=frozenset(_phrase(w) for w in gm["notes"]),
            helpers=frozenset(fold(w) for w in gm["helpers"]),
            numbers=frozenset(fold(w) for w in gm["numbers"]),
            narrative=frozenset(fold(w) for w in gm["narrative"]),
            warnings=frozenset(_words(w) for w in gm["warnings"]),
            gm_folders=frozenset(fold(w) for w in gm["folders"]),
            templates=frozenset(_words(w) for w in vault["templates"]),
            folder_kinds={_phrase(w): kind for kind in ("sheet", "world") for w in kinds[kind]},
            tag_kinds={fold(w): kind for kind in ("sheet", "world") for w in tags[kind]},
            hubs=frozenset(fold(w) for w in vault["hubs"]),
            prep=frozenset(_phrase(w) for w in vault["prep"]),
            reference=frozenset(_phrase(w) for w in vault["reference"]),
            stopwords=frozenset(fold(w) for w in keyword["stopwords"]),
            table_talk=frozenset(_words(w) for w in table["headings"]),
            recap_previous=frozenset(_words(w) for w in recap["previous"]),
            recap_happened=frozenset(_words(w) for w in recap["happened"]),
            connectives=frozenset(fold(w) for w in follow["connectives"]),
            interjections=frozenset(fold(w) for w in follow["interjections"]),
            openers=frozenset(_words(w) for w in follow["openers"]),
            same=tuple((_words(word), fold(as_what)) for word, as_what in follow["same"]),
            pronouns=frozenset(fold(w) for w in follow["pronouns"]),
            next=frozenset(_words(w) for w in follow["next"]),
            happen=frozenset(fold(w) for w in follow["happen"]),
            before=frozenset(_words(w) for w in follow["before"]),
            **{key: frozenset(fold(w) for w in listening.get(key, ()))
               for key in ("acknowledgements", "questions", "you", "you_asks", "telling")},
        )

    @property
    def phrases(self) -> frozenset[tuple[str, ...]]:
        """Every word group of the marks that is more than one word ("game master", "eyes only")."""
        return frozenset(p for p in self.markers | self.roles | self.notes if len(p) > 1)

    @cached_property
    def session_name(self) -> re.Pattern[str]:
        """A session's number in a (folded) name, wherever it stands: `tempus session 05 (2023-04-05)`,
        `s05`, `ep. 12`, `session_8-9`, `sessao 02.1` (a part: session 2)."""
        words = "|".join(sorted(map(re.escape, self.session_words), key=len, reverse=True))
        letters = "|".join(sorted(map(re.escape, self.session_letters)))
        number = r"0*(?P<num>\d{1,4})(?:\s*[-–&+]\s*0*(?P<to>\d{1,4}))?(?:[.,](?P<part>\d{1,2}))?(?!\d)"
        word = rf"(?:{words})(?![^\W\d_])[\s_.\-#:]*(?:n[o°º]\.?\s*)?"
        letter = rf"(?:{letters})" if letters else "(?!)"
        date = r"(?!\d{4}[-_.]\d{1,2}[-_.]\d{1,2})"
        return re.compile(rf"(?<![^\W\d_])(?:{word}|{letter}(?=\d)){date}{number}")

    def session_titled(self, stem: str) -> bool:
        """A name that numbers a session before its title (`Session 13 - The Abbot's Secret`,
        `013 - The Fall`)."""
        return bool(self.session_name.search(fold(stem)) or re.match(r"^\s*\d{1,4}\s*[-–—.:]\s", stem))

    @property
    def vocabulary(self) -> frozenset[str]:
        """Every single word the marks are made of: a name written as one word (`GMNotes`,
        `dmnotes`) is cut into these."""
        words = {w for group in (self.markers, self.roles, self.notes) for p in group for w in p}
        return frozenset(words | self.helpers)


def languages() -> tuple[str, ...]:
    """The languages with a data file, English first."""
    codes = sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".toml"))
    codes = [c for c in codes if c not in (DEFAULT, INTERNATIONAL)]
    return (DEFAULT, *codes)


@cache
def language(code: str) -> Lexicon:
    """One language's data file, as written."""
    return Lexicon.read(code)


@cache
def lexicon(code: str = DEFAULT) -> Lexicon:
    """The lexicon of a vault written in `code` (one of `languages()`)."""
    if code not in languages():
        raise ValueError(f"no word lists for the language {code!r}: one of {', '.join(languages())}")
    own, shared, english = language(code), language(INTERNATIONAL), language(DEFAULT)
    every = [language(c) for c in languages()]
    folder_kinds: dict[tuple[str, ...], str] = {}
    tag_kinds: dict[str, str] = {}
    for lang in [own, shared] + every:  # the vault's own language first, where two disagree
        for phrase, kind in lang.folder_kinds.items():
            folder_kinds.setdefault(phrase, kind)
        for tag, kind in lang.tag_kinds.items():
            tag_kinds.setdefault(tag, kind)
    return Lexicon(
        code=code,
        name=own.name,
        common=own.common,
        session_words=frozenset(fold(w) for lang in every for w in lang.session_words | lang.session_plurals),
        session_plurals=frozenset(fold(w) for lang in every for w in lang.session_plurals),
        session_letters=frozenset().union(*(lang.session_letters for lang in every)),
        markers=own.markers | shared.markers,
        roles=own.roles | shared.roles,
        notes=own.notes | shared.notes,
        helpers=own.helpers | shared.helpers,
        numbers=own.numbers | shared.numbers,
        narrative=own.narrative | shared.narrative,
        warnings=own.warnings | shared.warnings | english.warnings,  # an English warning warns in any vault
        gm_folders=own.gm_folders | shared.gm_folders | english.gm_folders,  # likewise a folder named so
        templates=frozenset().union(*(lang.templates for lang in [shared, *every])),  # folder names, as the kinds'
        folder_kinds=folder_kinds,
        tag_kinds=tag_kinds,
        hubs=own.hubs | shared.hubs,
        prep=own.prep | shared.prep,
        reference=own.reference | shared.reference,
        stopwords=own.stopwords | language(DEFAULT).stopwords,  # players ask in English too
        table_talk=own.table_talk | shared.table_talk,
        # A session's recap and its story are headed alike whatever the vault's language.
        recap_previous=frozenset().union(*(lang.recap_previous for lang in every)),
        recap_happened=frozenset().union(*(lang.recap_happened for lang in every)),
        # A player may ask in English whatever the vault's language.
        connectives=own.connectives | shared.connectives | english.connectives,
        interjections=own.interjections | shared.interjections | english.interjections,
        openers=own.openers | english.openers,
        same=own.same + (english.same if code != DEFAULT else ()),
        pronouns=own.pronouns | english.pronouns,
        next=own.next | english.next,
        happen=own.happen | english.happen,
        before=own.before | english.before,
        # Table talk: the vault's language, the words every table says, and English.
        **{key: getattr(own, key) | getattr(shared, key) | getattr(english, key)
           for key in ("acknowledgements", "questions", "you", "you_asks", "telling")},
    )


@dataclass(frozen=True)
class FrontmatterWords:
    """The properties that say whose a note is (`international.toml`'s `[frontmatter]`), lower case."""

    gm_values: frozenset[str]
    public_values: frozenset[str]
    gm_flags: tuple[str, ...]  # in the order they are asked
    public_flags: tuple[str, ...]
    true: frozenset[str]
    false: frozenset[str]


@cache
def frontmatter_words() -> FrontmatterWords:
    fm = {key: [w.casefold() for w in words] for key, words in _data(INTERNATIONAL)["frontmatter"].items()}
    return FrontmatterWords(frozenset(fm["gm_values"]), frozenset(fm["public_values"]), tuple(fm["gm_flags"]),
                            tuple(fm["public_flags"]), frozenset(fm["true"]), frozenset(fm["false"]))


def default_gm_headings() -> tuple[str, ...]:
    """The default of ORACLE_GM_HEADINGS, as written (`en.toml`'s `[gm] headings`)."""
    return tuple(_data(DEFAULT)["gm"]["headings"])


def session_spellings(plural: bool = False) -> frozenset[str]:
    """Every language's session words (or their plurals), as written and with accents folded
    (`sesión`, `sesion`): a note's header or text is read in any of them."""
    written = {w for code in languages() for w in (language(code).session_plurals if plural else language(code).session_words)}
    return frozenset(written | {fold(w) for w in written})


_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Words read per note, at most: the language shows in the first few hundred.
_SAMPLE = 400


def detect_language(texts: Iterable[str]) -> str:
    """The language a vault is written in: the one whose frequent words its text uses most, English
    when no language's are frequent (a vault of names and numbers)."""
    counts = dict.fromkeys(languages(), 0)
    total = 0
    common = {code: language(code).common for code in counts}
    for text in texts:
        words = [fold(w) for w in _WORD.findall(text[: _SAMPLE * 12])][:_SAMPLE]
        total += len(words)
        for code, frequent in common.items():
            counts[code] += sum(1 for w in words if w in frequent)
    best = max(counts, key=lambda c: (counts[c], c == DEFAULT))
    return best if total and counts[best] >= 0.05 * total else DEFAULT
