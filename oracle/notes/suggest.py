"""A policy of who reads what, proposed from the vault's own folders (`oracle visibility --suggest`).

Real game masters publish by folder ("players read `Session Notes/`; the rest is mine") as often as
they mark secrets. The proposal sorts what the vault already says:

- sessions, and the folders of characters, places and things: players read them (their marked
  passages stay hidden as always);
- a folder or a note named like the game master's preparation (`Encounters/`, `Plot/`, `Statblocks/`,
  `tables/`, `potential-npcs.md`, `Player Motivations.md`): the game master's (ORACLE_GM_NOTES);
- a folder or note named like what is no part of the story (`Rules/`, `compendium/`, `README.md`):
  players may read it, and it is named for the game master, who may keep it out of answers;
- when the note the vault opens on warns its readers of spoilers, the whole vault is the game master's
  but for its sessions (ORACLE_PLAYER_NOTES).

The words come from the vault's lexicon (`oracle/lexicon/*.toml`, `[vault]`). Nothing is applied:
the game master reads the proposal, checks it with `oracle visibility --players` and pastes it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ..lexicon import Lexicon, fold
from ..marks import name_words
from ..types import GM
from .conventions import ENTITY_KINDS, Conventions


@dataclass(frozen=True)
class Finding:
    """A folder (`Plot/`) or a note, and why the proposal puts it where it does."""

    path: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "why": self.why}


@dataclass(frozen=True)
class Suggestion:
    player_notes: tuple[str, ...]  # ORACLE_PLAYER_NOTES, or () for none
    gm_notes: tuple[str, ...]  # ORACLE_GM_NOTES, or () for none
    players: tuple[Finding, ...]  # what players read, by folder
    game_master: tuple[Finding, ...]  # what the proposal keeps from them
    warning: str = ""  # the vault's own spoiler warning, when it decided
    reference: tuple[Finding, ...] = ()  # no part of the story: players may read it

    @property
    def needed(self) -> bool:
        return bool(self.player_notes or self.gm_notes)

    def to_json(self) -> dict[str, Any]:
        return {"player_notes": list(self.player_notes), "gm_notes": list(self.gm_notes),
                "players": [f.to_json() for f in self.players], "game_master": [f.to_json() for f in self.game_master],
                "reference": [f.to_json() for f in self.reference], "warning": self.warning}

    def lines(self, notes_dir: str) -> list[str]:
        """The proposal as it is printed: comments, then the settings to paste."""
        out = [f"# Who reads what in {notes_dir}, proposed from its folders by `oracle visibility --suggest`.",
               "# Check it with `oracle visibility --players`, then paste it into .env (or the campaign's table"
               " in ORACLE_CAMPAIGNS)."]
        if self.warning:
            out.append(f"# The vault warns its readers: “{self.warning}”")
        width = max((len(f.path) for f in self.players + self.game_master + self.reference), default=0)
        if self.players:
            out.append("# players read:")
            out += [f"#   {f.path.ljust(width)}  {f.why}" for f in self.players]
        if self.game_master:
            out.append("# the game master's:")
            out += [f"#   {f.path.ljust(width)}  {f.why}" for f in self.game_master]
        if self.reference:
            out.append("# no part of the story (players may read it; add it to ORACLE_GM_NOTES to keep it out of answers):")
            out += [f"#   {f.path.ljust(width)}  {f.why}" for f in self.reference]
        if not self.needed:
            out.append("# Nothing here looks like the game master's beyond what is marked already: no policy is needed.")
        if self.player_notes:
            out.append("ORACLE_PLAYER_NOTES=" + ", ".join(self.player_notes))
        if self.gm_notes:
            out.append("ORACLE_GM_NOTES=" + ", ".join(self.gm_notes))
        return out


def propose(conventions: Conventions, visibility: Mapping[str, str], hubs: Mapping[str, str]) -> Suggestion:
    """The proposal for a vault: `visibility` of each note as the current rules read it (a folder every
    note of which is hidden already needs no policy), `hubs`: the text of each note at the top."""
    lex = conventions.lexicon
    players = _players(conventions)
    warning = _spoiler_warning(hubs, lex)
    if warning:
        sessions = sorted({_top(rel) for rel, f in conventions.facts.items() if f.sessions})
        players = [Finding(top, f"{n} sessions") for top, n in
                   sorted(Counter(_top(rel) for rel, f in conventions.facts.items() if f.sessions).items())]
        allowed = tuple(s.rstrip("/") for s in sessions)
        kept = (Finding("everything else", "the vault's own warning: its pages hold spoilers"),)
        return Suggestion(allowed, (), tuple(f for f in players if f.path in sessions), kept, warning)
    found: dict[str, list[Finding]] = {PREP: [], REFERENCE: []}
    taken = found[PREP]

    def named_already(path: str) -> bool:  # a folder named whole: nothing under it is named again
        return any(path.startswith(f.path) for f in found[PREP] + found[REFERENCE] if f.path.endswith("/"))

    def place(path: str, name: str) -> None:
        named = _named(name, lex)
        if named:
            found[named[0]].append(Finding(path, named[1]))

    folders = sorted({str(p) for rel in visibility for p in PurePosixPath(rel).parents if str(p) != "."},
                     key=lambda f: (f.count("/"), f))
    for folder in folders:
        beneath = [rel for rel in visibility if rel.startswith(folder + "/")]
        if named_already(folder + "/") or all(visibility[rel] == GM for rel in beneath):
            continue
        if folder not in conventions.session_folders and conventions.kind_folders.get(folder) not in ENTITY_KINDS:
            place(folder + "/", PurePosixPath(folder).name)
    for rel, seen in sorted(visibility.items()):
        facts = conventions.of(rel)
        if seen == GM or facts.sessions or facts.kind in ENTITY_KINDS or named_already(rel):
            continue
        place(rel, PurePosixPath(rel).stem)
    read = tuple(f for f in players if not any(f.path.startswith(g.path) for g in taken))
    return Suggestion((), tuple(f.path.rstrip("/") for f in taken), read, tuple(taken), reference=tuple(found[REFERENCE]))


PREP, REFERENCE = "prep", "reference"


def _named(name: str, lex: Lexicon) -> tuple[str, str] | None:
    """(PREP or REFERENCE, why) when a folder's or note's name is the game master's preparation or no
    part of the story, made of such words and helpers alone; else None."""
    text = " ".join(w for w in name_words(name) if not w.isdigit())
    found: tuple[str, str] | None = None
    for what, label, vocabulary in ((PREP, "named like the game master's preparation", lex.prep),
                                    (REFERENCE, "not the campaign's story", lex.reference)):
        for phrase in sorted(vocabulary, key=len, reverse=True):
            joined = " ".join(phrase)
            if f" {joined} " in f" {text} ":
                found = found or (what, f"{label} ({joined})")
                text = f" {text} ".replace(f" {joined} ", " ").strip()
    kinds = {w for key in lex.folder_kinds for w in key}
    rest = [w for w in text.split() if w not in lex.helpers and w not in kinds]
    return found if found and not rest else None


def _players(conventions: Conventions) -> list[Finding]:
    """What players read, a line per folder of sessions and per folder of characters, places and things."""
    sessions: Counter[str] = Counter()
    entities: Counter[str] = Counter()
    for rel, facts in conventions.facts.items():
        if facts.sessions:
            sessions[_folder(rel, conventions.session_folders)] += 1
        elif facts.kind in ENTITY_KINDS:
            entities[_folder(rel, conventions.kind_folders)] += 1
    out = [Finding(where, f"{n} session{'s' if n != 1 else ''}") for where, n in sorted(sessions.items())]
    out += [Finding(where, f"{n} characters, places and things" if n != 1 else "1 character, place or thing")
            for where, n in sorted(entities.items())]
    return out


def _folder(rel: str, named: Iterable[str]) -> str:
    """The outermost of `named` folders holding `rel` (its own folder if none), as `folder/`."""
    parents = [str(p) for p in reversed(PurePosixPath(rel).parents) if str(p) != "."]
    chosen = next((p for p in parents if p in set(named)), parents[-1] if parents else "")
    return chosen + "/" if chosen else rel


def _top(rel: str) -> str:
    parts = PurePosixPath(rel).parts
    return parts[0] + "/" if len(parts) > 1 else rel


def _spoiler_warning(hubs: Mapping[str, str], lex: Lexicon) -> str:
    """A line of the note the vault opens on that warns of spoilers, or ""."""
    for rel, text in sorted(hubs.items()):
        if "/" in rel or fold(PurePosixPath(rel).stem) not in lex.hubs:
            continue
        for line in text.split("\n"):
            if {"spoiler", "spoilers"} & set(name_words(line)):
                return " ".join(line.replace("*", "").split())[:200]
    return ""
