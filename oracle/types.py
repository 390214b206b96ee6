"""Boundary types passed between stages: frozen, plain, free of storage objects."""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .lexicon import session_spellings

# Whose text a row is: everyone's, or the game master's alone. Every row that can reach a player
# (chunk, window, name, alias, mention, annotation) carries one.
Visibility = Literal["public", "gm"]
PUBLIC: Final = "public"  # Final: a `Visibility` wherever one is expected
GM: Final = "gm"


class Clearance(enum.Enum):
    """Who reads: a player, or the game master. One value from the bot and the CLI down to SQL."""

    PLAYER = "player"
    GM = "gm"

    @classmethod
    def of(cls, gm: bool) -> Clearance:
        return cls.GM if gm else cls.PLAYER

    @property
    def gm(self) -> bool:
        return self is Clearance.GM

    @property
    def visibilities(self) -> tuple[Visibility, ...]:
        """The visibilities this reader may read: a player public text, the game master everything."""
        return (PUBLIC, GM) if self is Clearance.GM else (PUBLIC,)

    def sql(self, column: str = "visibility") -> str:
        """The SQL condition on `column` for this reader: a constant, no parameter to bind."""
        return f"{column} IN ({', '.join(repr(v) for v in self.visibilities)})"

    @property
    def compendium(self) -> Visibility:
        """The Compendium this reader reads (an entity row's `visibility`): the game master's, or the players'."""
        return GM if self is Clearance.GM else PUBLIC

    @property
    def windows(self) -> Visibility | None:
        """The visibility this reader's embedding windows have in Chroma; None: every window."""
        return None if self is Clearance.GM else PUBLIC


# What a retrieval path returns: (chunk id, score), best first.
Scored = list[tuple[str, float]]


@dataclass(frozen=True)
class Secret:
    """A game-master-only passage cut out of a public note (a comment, a callout, a section…)."""

    start_line: int  # 1-based, inclusive
    end_line: int
    text: str
    rule: str = ""  # what hid it, in the words `oracle visibility` shows


@dataclass(frozen=True)
class Link:
    target: str
    line: int


@dataclass(frozen=True)
class Aside:
    """A section of what the table says to itself, out of the game (lines, 1-based, inclusive)."""

    start_line: int
    end_line: int
    heading: str


@dataclass(frozen=True)
class Note:
    """One parsed Markdown file.

    `text` keeps the file's line structure (frontmatter and secrets blanked, wikilinks rendered as
    their shown text) so that a chunk's line range points at the right lines of the file.
    """

    path: str  # relative to the notes folder, POSIX separators
    kind: str  # session | sheet | world | note
    stem: str
    title: str
    text: str
    visibility: Visibility = PUBLIC
    aliases: tuple[str, ...] = ()
    secrets: tuple[Secret, ...] = ()
    links: tuple[Link, ...] = ()
    warnings: tuple[str, ...] = ()
    rule: str = ""  # why the note has its visibility ("" for a public note no rule names)
    name: str = ""  # unique in the vault (see notes/names.py); the stem when not given
    sessions: tuple[int, ...] = ()  # the sessions the note records, as its game master numbered them
    entity: bool = False  # a character, place or thing of its own (notes/conventions.py): the Compendium takes its name
    public_marks: tuple[tuple[int, str], ...] = ()  # (line, what) players read that carries a mark's word (notes/looks.py)
    asides: tuple[Aside, ...] = ()  # out-of-game sections, cut from `text` (notes/asides.py)


# A session word of any language (`lexicon/*.toml`), and a label that starts with a date.
_SESSION_WORD = "(?:" + "|".join(sorted(map(re.escape, session_spellings()), key=len, reverse=True)) + ")"
_DATED = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}(?!\d)")


@dataclass(frozen=True)
class Chunk:
    id: str
    path: str
    label: str  # the citation label, one per source: "Session 12", "Sheet: Kat", "Note: x", "Log › Session 3"
    kind: str
    part: int  # 1-based, for display only
    parts: int
    heading: str  # heading path: "Session 12 — The Fall > Part II"
    start_line: int
    end_line: int
    text: str  # exact source text: what the model reads and what is quoted
    text_hash: str
    visibility: Visibility = PUBLIC
    links: tuple[str, ...] = ()
    sessions: tuple[int, ...] = ()  # the session numbers this chunk records (metadata, never a label)

    @property
    def head(self) -> str:
        """What the index sees before the text: the label and the heading path, and the session
        numbers when neither says them (`021 - The Ashen Road (Session 21)`). A note named by its date
        is numbered by the Oracle, in date order, not by its game master: no number is written for it."""
        head = self._titled()
        if _DATED.match(self.label):
            return head
        if self.sessions and not re.search(rf"\b{_SESSION_WORD}\s*0*{self.sessions[0]}\b", head, re.I):
            first, last = self.sessions[0], self.sessions[-1]
            head += f" (Session {first})" if first == last else f" (Sessions {first}–{last})"
        return head

    def _titled(self) -> str:
        heading = self.heading.strip()
        if not heading or heading.lower() in self.label.lower():
            return self.label
        if heading.lower().startswith(self.label.lower()):
            return heading
        hub, _, section = self.label.rpartition(" › ")
        if hub and heading.lower().startswith(section.lower()):
            return f"{hub} › {heading}"  # "Log › Session 12 — The Fall"
        return f"{self.label} — {heading}"

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class EmbeddingWindow:
    """A slice of a chunk that fits the embedding model; a Chroma record points at its chunk.
    Its id is `<chunk id>:<n>`, so a search reads the chunk off the id without fetching metadata."""

    id: str
    chunk_id: str
    text: str
    visibility: Visibility

    @staticmethod
    def make_id(chunk_id: str, n: int) -> str:
        return f"{chunk_id}:{n}"

    @staticmethod
    def chunk_of(window_id: str) -> str:
        return window_id.rsplit(":", 1)[0]


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass(frozen=True)
class EntitySource:
    """A name and its aliases from one source, before the Compendium merges them."""

    name: str
    aliases: tuple[str, ...] = ()
    kind: str = "entity"
    source: str = "proper-noun"  # frontmatter | compendium | llm | proper-noun
    note_path: str | None = None
    visibility: Visibility = PUBLIC


# What each stage of an ingest is called where its progress is shown.
INGEST_STAGES = {"scan": "files", "embed": "windows embedded", "commit": "index", "annotate": "annotations"}


@dataclass(frozen=True)
class IngestProgress:
    stage: str  # scan | embed | commit | annotate | done
    done: int
    total: int
    detail: str = ""


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[Skipped] = field(default_factory=list)
    # Files read this run that hold game-master-only text: path -> secret blocks cut out of a
    # public note, or -1 for a note that is game-master-only as a whole.
    secrets: dict[str, int] = field(default_factory=dict)
    rules: dict[str, str] = field(default_factory=dict)  # path -> what kept its text from players
    chunks: int = 0
    windows_embedded: int = 0
    windows_repaired: int = 0  # chunks whose lost dense windows were embedded again
    windows_reused: int = 0  # windows stored again from a chunk that left with the same text (a new policy)
    annotations_done: int = 0
    annotations_missing: int = 0
    annotation_note: str = ""
    entities: int = 0
    seconds: float = 0.0
    vault: dict[str, Any] = field(default_factory=dict)  # what the Oracle made of the vault (`index.report.VaultReport`)

    def to_json(self) -> dict[str, Any]:
        return {
            "files": {
                "added": len(self.added),
                "changed": len(self.changed),
                "removed": len(self.removed),
                "unchanged": self.unchanged,
                "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
                "warnings": [{"path": s.path, "reason": s.reason} for s in self.warnings],
                "secrets": [
                    {"path": path, "blocks": max(n, 0), "whole_note": n < 0, "rule": self.rules.get(path, "")}
                    for path, n in self.secrets.items()
                ],
            },
            "chunks": self.chunks,
            "windows_embedded": self.windows_embedded,
            "windows_repaired": self.windows_repaired,
            "windows_reused": self.windows_reused,
            "annotations": {
                "done": self.annotations_done,
                "missing": self.annotations_missing,
                "note": self.annotation_note,
            },
            "entities": self.entities,
            "seconds": round(self.seconds, 3),
            "vault": self.vault,
        }


@dataclass(frozen=True)
class Mentioned:
    """Where an entity is mentioned: a chunk (or, in a dossier, every part of a label) and how
    many times it names the entity."""

    label: str
    path: str
    start_line: int
    end_line: int
    count: int
    sessions: tuple[int, ...] = ()


@dataclass(frozen=True)
class ChunkText:
    """A chunk as the Compendium and the secret guard read it: its text and whose it is."""

    id: str
    head: str  # label and heading path: searched for mentions, not for new names (it repeats)
    text: str
    visibility: Visibility
    links: tuple[str, ...] = ()
