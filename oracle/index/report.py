"""What the Oracle made of a vault: the report an ingest ends with, for the game master.

No list of conventions foresees every vault, so the game master sees what was learned and can
correct it: the vault's language; the sessions found (their numbers, and from which notes); the
characters, places and things `oracle who` knows; what is kept from players and by which rule; and
what looks like the game master's but players read (a heading with a secret's word in a title, a
callout titled "DM's Note", a folder named like prep). With no policy set and GM material in sight,
it points to `oracle visibility --suggest`. Kept in the index (meta `vault_report`), so `oracle
status --gm` and the game master's `/oracle status` show it again.
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ..lexicon import language
from ..notes.conventions import INDEX_LINKS, SHEET, WORLD, Conventions
from ..notes.names import number_ranges
from ..notes.suggest import propose
from ..policy import Policy
from ..types import GM, Note
from .scan import entity_name
from .store import FileRecord

EXAMPLES = 3


@dataclass(frozen=True)
class Group:
    """Notes that share one finding: what, how many, and a few of them."""

    what: str
    count: int
    examples: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "count": self.count, "examples": list(self.examples)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Group:
        return cls(str(data["what"]), int(data["count"]), tuple(data.get("examples", ())))

    def line(self) -> str:
        shown = ", ".join(self.examples)
        more = f", … ({self.count} in all)" if self.count > len(self.examples) else ""
        return f"{self.what}: {shown}{more}"


@dataclass(frozen=True)
class VaultReport:
    language: str
    sessions: tuple[int, ...]
    session_sources: tuple[Group, ...]  # how the sessions were found, with the notes
    characters: tuple[str, ...]
    places: tuple[str, ...]  # places, groups and things
    other_entities: tuple[str, ...]  # names of their own found by links and tags
    hidden: tuple[Group, ...]  # by rule
    looks_gm: tuple[Group, ...]  # read by players, though it looks like the game master's
    suggest: bool  # no policy, and the vault looks like it holds GM material
    asides: tuple[Group, ...] = ()  # out of the game: never searched (notes/asides.py)
    session_indexes: tuple[str, ...] = ()  # notes beside the sessions that link to many: not sessions

    def to_json(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "sessions": list(self.sessions),
            "session_sources": [g.to_json() for g in self.session_sources],
            "characters": list(self.characters),
            "places": list(self.places),
            "other_entities": list(self.other_entities),
            "hidden": [g.to_json() for g in self.hidden],
            "looks_gm": [g.to_json() for g in self.looks_gm],
            "suggest": self.suggest,
            "asides": [g.to_json() for g in self.asides],
            "session_indexes": list(self.session_indexes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VaultReport:
        return cls(
            language=str(data.get("language", "")),
            sessions=tuple(int(n) for n in data.get("sessions", ())),
            session_sources=tuple(Group.from_json(g) for g in data.get("session_sources", ())),
            characters=tuple(data.get("characters", ())),
            places=tuple(data.get("places", ())),
            other_entities=tuple(data.get("other_entities", ())),
            hidden=tuple(Group.from_json(g) for g in data.get("hidden", ())),
            looks_gm=tuple(Group.from_json(g) for g in data.get("looks_gm", ())),
            suggest=bool(data.get("suggest", False)),
            asides=tuple(Group.from_json(g) for g in data.get("asides", ())),
            session_indexes=tuple(data.get("session_indexes", ())),
        )

    def lines(self) -> list[str]:
        """The report as a game master reads it, a line each."""
        name = language(self.language).name if self.language else "?"
        out = [f"language: {name} ({self.language})"]
        if self.sessions:
            out.append(f"sessions: {len(self.sessions)} ({number_ranges(self.sessions)}); the last is {max(self.sessions)}")
            out += [f"  {g.line()}" for g in self.session_sources]
            if self.session_indexes:
                out.append(f"  not sessions, indexes of them (each links to {INDEX_LINKS} sessions or more; `session: 12` in"
                           f" a note's frontmatter makes it that session): {', '.join(self.session_indexes)}")
        else:
            out.append("sessions: none found (name them `Session 12`, put them in a folder named Sessions, or give"
                       " them `session: 12` in their frontmatter)")
        for title, names in (("characters", self.characters), ("places and things", self.places),
                             ("other names (linked to, or tagged)", self.other_entities)):
            if names:
                shown = "; ".join(names[:8]) + (f"; … ({len(names)} in all)" if len(names) > 8 else "")
                out.append(f"{title}: {shown}")
        if self.hidden:
            out.append("kept from players:")
            out += [f"  {g.line()}" for g in self.hidden]
        else:
            out.append("kept from players: nothing")
        if self.asides:
            out.append("out of the game, never searched for what happened (players still read them in their notes):")
            out += [f"  {g.line()}" for g in self.asides]
        if self.looks_gm:
            out.append("players read these, though they look like the game master's:")
            out += [f"  {g.line()}" for g in self.looks_gm]
        if self.suggest:
            out.append("no policy is set, and folders here look like the game master's:"
                       " `oracle visibility --suggest` proposes one")
        return out


def note_facts(note: Note) -> str:
    """What the report tells of one note, as the index keeps it (`FileRecord.facts`)."""
    facts: dict[str, Any] = {}
    if note.visibility == GM:
        facts["rule"] = note.rule
    if note.secrets:
        facts["hidden"] = [[s.start_line, s.end_line, s.rule] for s in note.secrets]
    if note.public_marks:
        facts["public_marks"] = [list(m) for m in note.public_marks]
    if note.asides:
        facts["asides"] = [[a.start_line, a.end_line, a.heading] for a in note.asides]
    return json.dumps(facts, ensure_ascii=False, sort_keys=True)


def vault_report(conventions: Conventions, files: Iterable[FileRecord], policy: Policy,
                 chunk_sessions: Mapping[str, Iterable[int]], hubs: Mapping[str, str]) -> VaultReport:
    """The report of a vault from what the ingest read (`conventions`, `hubs`: the notes at its top),
    what the index keeps of each note (`files`) and the sessions its chunks record (`chunk_sessions`:
    a log's sections too)."""
    records = sorted((f for f in files if f.status == "ok"), key=lambda f: f.path)
    numbers: set[int] = set()
    sources: dict[str, list[str]] = defaultdict(list)
    for path, found in sorted(chunk_sessions.items()):
        found = sorted(set(found))
        if not found:
            continue
        numbers.update(found)
        how = conventions.of(path).how or "session headers inside the note"
        folder = str(PurePosixPath(path).parent)
        sources[f"{how}, in {folder + '/' if folder != '.' else 'the top folder'}"].append(PurePosixPath(path).name)
    entities: dict[str, list[str]] = defaultdict(list)
    for f in records:
        facts = conventions.of(f.path)
        if f.entity or facts.entity:
            kind = f.kind if f.kind in (SHEET, WORLD) else "other"
            entities[kind].append(entity_name(f.title))
    hidden: dict[str, list[str]] = defaultdict(list)
    looks: dict[str, list[str]] = defaultdict(list)
    asides: dict[str, list[str]] = defaultdict(list)
    for f in records:
        facts = json.loads(f.facts or "{}")
        if f.visibility == GM and facts.get("rule"):
            hidden[f"the whole note: {facts['rule']}"].append(f.path)
        for rule in dict.fromkeys(h[2] for h in facts.get("hidden", ())):
            hidden[_rule_group(rule)].append(f.path)
        for line, what in facts.get("public_marks", ()):
            looks[what].append(f"{f.path}:{line}")
        for heading in dict.fromkeys(a[2] for a in facts.get("asides", ())):
            asides[f"sections under the heading {heading!r}"].append(f.path)
    marks = policy.speaking(conventions.language).marks
    for folder in sorted({str(p) for f in records for p in PurePosixPath(f.path).parents if str(p) != "."}):
        word = marks.story_title(PurePosixPath(folder).name)
        if word:
            looks[f"the folder name {PurePosixPath(folder).name!r} has {word!r} in a title"].append(folder + "/")
    for f in records:
        word = marks.story_title(PurePosixPath(f.path).stem)
        if word and f.visibility != GM:
            looks[f"the note's name has {word!r} in a title"].append(f.path)
    no_policy = not policy.player_notes and not policy.gm_notes
    proposal = propose(conventions, {f.path: f.visibility for f in records}, hubs) if no_policy else None
    return VaultReport(
        language=conventions.language,
        sessions=tuple(sorted(numbers)),
        session_sources=_groups(sources),
        characters=tuple(entities[SHEET]),
        places=tuple(entities[WORLD]),
        other_entities=tuple(entities["other"]),
        hidden=_groups(hidden),
        looks_gm=_groups(looks),
        suggest=proposal is not None and proposal.needed,
        asides=_groups(asides),
        session_indexes=conventions.session_indexes,
    )


def _rule_group(rule: str) -> str:
    """Passages hidden by one rule ("sections under the heading 'Prep'", "%% comments")."""
    return "sections" + rule[len("section"):] if rule.startswith("section ") else f"passages: {rule}"


def _groups(found: Mapping[str, list[str]]) -> tuple[Group, ...]:
    ordered = sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return tuple(Group(what, len(paths), tuple(paths[:EXAMPLES])) for what, paths in ordered)
