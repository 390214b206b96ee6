"""Embeds, as Obsidian renders them: `![[Note]]`, `![[Note#Heading]]`, `![[Note#^block]]` and
`![](Note.md#Heading)` show the embedded note's text in the embedding one.

An embed publishes exactly what it embeds: the section's public text, never the rest of the note nor
the secrets inside the section. A note kept from players only because the allowlist does not name it
may be embedded so (its game master chose to show that part); a note kept by any other rule renders
as nothing, not even its name. The embedded text is flattened onto the embed's own line, so every
line of the embedding note keeps its number. Embeds are followed `MAX_DEPTH` deep, cycles guarded.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..marks import normalize_heading
from ..policy import UNLISTED, Decision, Policy
from ..types import GM, Secret
from .code import drop_code
from .conventions import Conventions
from .decode import NoteError, decode
from .frontmatter import frontmatter_visibility, loose_frontmatter, split_frontmatter
from .names import Names
from .secrets import code_ranges, extract_secrets, headings

MAX_DEPTH = 3
# `![[target#section|alt]]` and `![alt](target#section)`.
WIKI_EMBED = re.compile(r"!\[\[([^\[\]\n|#]*)(#[^\[\]\n|]*)?(?:\|([^\[\]\n]*))?\]\]")
MD_EMBED = re.compile(r"!\[([^\[\]\n]*)\]\(<?([^()\n<>]*?)>?\)")
_SIZE = re.compile(r"^\s*\d+(?:\s*x\s*\d+)?\s*$")
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_UNDERLINE = re.compile(r"^[ \t]{0,3}(?:=+|-+)[ \t]*$")
_BLOCK_ID = re.compile(r"(?:^|\s)\^[\w-]+\s*$")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


@dataclass(frozen=True)
class Body:
    """A note read up to its secrets: its public text and who may read the whole of it."""

    text: str  # the public text (frontmatter and secrets blanked, lines kept)
    gm: bool  # the whole note is the game master's
    rule: str
    frontmatter: Mapping[str, Any]
    secrets: tuple[Secret, ...]
    warnings: tuple[str, ...]


def read_body(rel: str, data: bytes, policy: Policy, real_path: str | None = None, *, allow_empty: bool = False) -> Body:
    """Everything about a note but its embeds and links. Raises NoteError for a file that is no note."""
    text, warnings = decode(data, allow_empty=allow_empty)
    frontmatter, text, fm_warnings = split_frontmatter(text)
    warnings += fm_warnings
    visibility, rule, warning = frontmatter_visibility(frontmatter, policy.marks)
    if warning:
        warnings.append(warning)
    loose = loose_frontmatter(text)
    if loose:
        warnings.append(loose)
    decisions = [policy.decide(rel, text)] + ([policy.decide(real_path, text)] if real_path else [])
    gm_decision = _strictest(decisions)
    if visibility == GM:
        gm, why = True, rule
    elif loose:
        gm, why = True, "a frontmatter-like block mentions visibility"
    elif gm_decision is not None:
        own = real_path is None or decisions[0] is gm_decision
        gm, why = True, gm_decision.rule if own else f"link into {real_path}: {gm_decision.rule}"
    else:
        gm, why = False, decisions[0].rule
    if gm and gm_decision is not None and gm_decision.guessed and why == gm_decision.rule:
        warnings.append(f"kept from players: {why}; list it in ORACLE_PLAYER_NOTES if players may read it")
    public, secrets, secret_warnings = extract_secrets(drop_code(text), policy.marks)
    return Body(public, gm, why, frontmatter, secrets, tuple(warnings + secret_warnings))


def _strictest(decisions: list[Decision]) -> Decision | None:
    """The rule that keeps a note from players, the strictest first: a link in a public folder to a
    note in ORACLE_GM_NOTES is judged by its target's rule, not by its own "not listed" (which lets an
    embed publish it)."""
    kept = [d for d in decisions if not d.public]
    return next((d for d in kept if d.rule != UNLISTED), kept[0] if kept else None)


class Vault:
    """Every note's bytes, so a note can show what it embeds, be named as Obsidian names it and be read
    by the conventions of the vault as a whole. Built once per ingest."""

    def __init__(
        self,
        files: Mapping[str, bytes],
        policy: Policy,
        real_paths: Mapping[str, str] | None = None,
        folder_kinds: Mapping[str, str] | None = None,
    ) -> None:
        self.files = files
        self.setting = policy
        self.real_paths = real_paths or {}
        self.folder_kinds = folder_kinds or {}
        self._bodies: dict[str, Body | None] = {}

    @cached_property
    def conventions(self) -> Conventions:
        """What the vault says of each note: sessions, kinds, entities, its language."""
        return Conventions.read(self.files, self.folder_kinds, self.setting.language)

    @cached_property
    def policy(self) -> Policy:
        """The game master's policy, its marks read in the vault's language."""
        return self.setting.speaking(self.conventions.language)

    @property
    def names(self) -> Names:
        return self.conventions.names

    def resolve(self, target: str, from_path: str) -> str | None:
        """The note an embed or link names, as Obsidian finds it (`Names.resolve`)."""
        return self.names.resolve(target, from_path)

    def body(self, rel: str) -> Body | None:
        if rel not in self._bodies:
            try:
                self._bodies[rel] = read_body(rel, self.files[rel], self.policy, self.real_paths.get(rel))
            except NoteError:
                self._bodies[rel] = None
        return self._bodies[rel]

    def dependencies(self, rel: str) -> list[str]:
        """Every note `rel` embeds, MAX_DEPTH deep: its index entry changes when any of them does."""
        found: list[str] = []
        frontier = [rel]
        for _ in range(MAX_DEPTH):
            nxt = []
            for path in frontier:
                text = self.files[path].decode("utf-8", "replace")
                for target in _targets(text):
                    dep = self.resolve(target, path)
                    if dep is not None and dep != rel and dep not in found:
                        found.append(dep)
                        nxt.append(dep)
            frontier = nxt
        return found

    def shown(self, rel: str, section: str, chain: tuple[str, ...]) -> str:
        """What players see of `rel#section` where a public note embeds it, flattened to one line."""
        body = self.body(rel)
        if body is None or (body.gm and body.rule != UNLISTED):
            return ""
        # `chain`: the notes being rendered, from the outermost to `rel`. Past the depth limit an embed
        # shows nothing, not even its target's name.
        text = render_embeds(text=body.text, rel=rel, vault=self, chain=chain, shown=len(chain) <= MAX_DEPTH)
        part = _section(text, section) if section else text
        return flatten(part)


def _targets(text: str) -> list[str]:
    return [m.group(1) for m in WIKI_EMBED.finditer(text)] + [
        m.group(2).split("#", 1)[0] for m in MD_EMBED.finditer(text)
    ]


def flatten(text: str) -> str:
    """Text shown on one line: heading marks and block ids dropped, lines joined by spaces."""
    lines = []
    for line in text.split("\n"):
        line = _BLOCK_ID.sub("", line)
        heading = _HEADING.match(line)
        line = heading.group(2) if heading else line
        if line.strip() and not _UNDERLINE.match(line):
            lines.append(line.strip())
    return " ".join(lines)


def _section(text: str, name: str) -> str:
    """The lines of a heading's section (the heading and everything down to the next heading of the
    same or a higher level, `#` or underlined) or of a block (`^id`); "" if the note has none."""
    lines = text.split("\n")
    if name.startswith("^"):
        return _block(lines, name[1:])
    wanted = normalize_heading(name.split("#")[-1])
    heads = headings(text)
    for n, (level, first, content) in enumerate(heads):
        if normalize_heading(content) == wanted:
            end = next((at for lv, at, _ in heads[n + 1 :] if lv <= level), len(lines))
            return "\n".join(lines[first:end])
    return ""


def _block(lines: list[str], block_id: str) -> str:
    """The block `^block_id` ends, as Obsidian embeds it: a list item (with the items under it), the
    paragraph it closes, or, on a line of its own, the block just above."""
    marker = re.compile(rf"(?:^|\s)\^{re.escape(block_id)}\s*$")
    at = next((i for i, line in enumerate(lines) if marker.search(line)), None)
    if at is None:
        return ""
    if lines[at].strip() == f"^{block_id}":  # on its own line: the block above it
        at -= 1
        while at >= 0 and not lines[at].strip():
            at -= 1
        if at < 0:
            return ""
    first = at
    item = _LIST_ITEM.match(lines[first])
    while item is None and first > 0 and lines[first - 1].strip() and not _HEADING.match(lines[first - 1]):
        first -= 1
        item = _LIST_ITEM.match(lines[first])
    if item is None:
        return "\n".join(lines[first : at + 1])
    indent = len(item.group(1).expandtabs())
    end = at + 1
    while end < len(lines) and lines[end].strip() and _indent(lines[end]) > indent:  # the items under it
        end += 1
    return "\n".join(lines[first:end])


def _indent(line: str) -> int:
    expanded = line.expandtabs()
    return len(expanded) - len(expanded.lstrip())


def render_embeds(text: str, rel: str, vault: Vault, chain: tuple[str, ...] = (), *, shown: bool = True) -> str:
    """`text` with each embed outside code replaced by what players see of it (see the docstring);
    with `shown` false (past the depth limit), by nothing."""
    if "![" not in text:
        return text
    chain = chain or (rel,)
    code = code_ranges(text)

    def outside(match: re.Match[str]) -> bool:
        return not any(a <= match.start() < b for a, b in code)

    def wiki(match: re.Match[str]) -> str:
        if not outside(match):
            return match.group()
        if not shown:
            return ""
        target, section, alt = match.group(1), (match.group(2) or "")[1:], match.group(3)
        return _show(target, section, alt or "", rel, vault, chain)

    def markdown(match: re.Match[str]) -> str:
        if not outside(match):
            return match.group()
        if not shown:
            return ""
        target, _, section = match.group(2).partition("#")
        return _show(target, section, match.group(1), rel, vault, chain)

    return MD_EMBED.sub(markdown, WIKI_EMBED.sub(wiki, text))


def _show(target: str, section: str, alt: str, rel: str, vault: Vault, chain: tuple[str, ...]) -> str:
    found = vault.resolve(target, rel) if target.strip() or section else None
    if found is None:
        # An image, a PDF, a canvas or a note not in the vault: its alt text only, never its name.
        return "" if _SIZE.match(alt) else alt.strip()
    if found in chain:  # a cycle, or a note embedding itself
        return ""
    return vault.shown(found, section.strip(), chain + (found,))
