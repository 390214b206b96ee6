"""Embeds, as Obsidian renders them: `![[Note]]`, `![[Note#Heading]]`, `![[Note#^block]]` and
`![](Note.md#Heading)` show the embedded note's text in the embedding one.

An embed publishes exactly what it embeds: the section's public text, never the rest of the note nor
the secrets inside the section. A note kept from players only because the allowlist does not name it
may be embedded so (its game master chose to show that part); a note kept by any other rule renders
as nothing, not even its name. The embedded text is flattened onto the embed's own line, so every
line of the embedding note keeps its number. Embeds are followed `MAX_DEPTH` deep, cycles guarded.
"""
from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import PurePosixPath
from urllib.parse import unquote

from ..policy import UNLISTED, Policy, normalize_heading
from ..types import GM
from .code import drop_code
from .decode import NoteError, decode
from .frontmatter import frontmatter_visibility, loose_frontmatter, split_frontmatter
from .names import Names
from .secrets import code_ranges, extract_secrets

MAX_DEPTH = 3
# `![[target#section|alt]]` and `![alt](target#section)`.
WIKI_EMBED = re.compile(r"!\[\[([^\[\]\n|#]*)(#[^\[\]\n|]*)?(?:\|([^\[\]\n]*))?\]\]")
MD_EMBED = re.compile(r"!\[([^\[\]\n]*)\]\(<?([^()\n<>]*?)>?\)")
_SIZE = re.compile(r"^\s*\d+(?:\s*x\s*\d+)?\s*$")
_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_BLOCK_ID = re.compile(r"\s\^[\w-]+\s*$")


@dataclass(frozen=True)
class Body:
    """A note read up to its secrets: its public text and who may read the whole of it."""

    text: str  # the public text (frontmatter and secrets blanked, lines kept)
    gm: bool  # the whole note is the game master's
    rule: str
    frontmatter: Mapping
    secrets: tuple
    warnings: tuple[str, ...]


def read_body(rel: str, data: bytes, policy: Policy, real_path: str | None = None, *, allow_empty: bool = False) -> Body:
    """Everything about a note but its embeds and links. Raises NoteError for a file that is no note."""
    text, warnings = decode(data, allow_empty=allow_empty)
    frontmatter, text, fm_warnings = split_frontmatter(text)
    warnings += fm_warnings
    visibility, rule, warning = frontmatter_visibility(frontmatter)
    if warning:
        warnings.append(warning)
    loose = loose_frontmatter(text)
    if loose:
        warnings.append(loose)
    decisions = [policy.decide(rel, text)] + ([policy.decide(real_path, text)] if real_path else [])
    gm_decision = next((d for d in decisions if not d.public), None)
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
    public, secrets, secret_warnings = extract_secrets(drop_code(text), policy.headings)
    return Body(public, gm, why, frontmatter, secrets, tuple(warnings + secret_warnings))


class Vault:
    """Every note's bytes, so a note can show what it embeds and be named as Obsidian names it. Built
    once per ingest."""

    def __init__(self, files: Mapping[str, bytes], policy: Policy, real_paths: Mapping[str, str] | None = None) -> None:
        self.files = files
        self.policy = policy
        self.real_paths = real_paths or {}
        self._bodies: dict[str, Body | None] = {}

    @cached_property
    def names(self) -> Names:
        """Every note's unique name and session number, as Obsidian's file names give them."""
        return Names.of(self.files)

    @cached_property
    def _by_path(self) -> dict[str, str]:
        return {rel.casefold(): rel for rel in self.files}

    @cached_property
    def _by_name(self) -> dict[str, list[str]]:
        names: dict[str, list[str]] = {}
        for rel in self.files:
            names.setdefault(PurePosixPath(rel).name.casefold(), []).append(rel)
        return names

    def resolve(self, target: str, from_path: str) -> str | None:
        """The note an embed or link names, as Obsidian finds it: a path relative to the embedding
        note or to the vault, else a file name anywhere (the shortest path wins)."""
        t = unquote(target).strip().replace("\\", "/")
        if not t:
            return from_path
        with_md = t if t.casefold().endswith(".md") else t + ".md"
        for path in (posixpath.normpath(posixpath.join(posixpath.dirname(from_path), with_md)), with_md.lstrip("/")):
            found = self._by_path.get(path.casefold())
            if found is not None:
                return found
        suffix = "/" + with_md.lstrip("/").casefold()
        matches = [r for r in self._by_name.get(PurePosixPath(with_md).name.casefold(), ())
                   if ("/" + r.casefold()).endswith(suffix)]
        return min(matches, key=lambda r: (r.count("/"), r)) if matches else None

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
        text = body.text
        if len(chain) <= MAX_DEPTH:  # `chain`: the notes being rendered, from the outermost to `rel`
            text = render_embeds(text, rel, self, chain)
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
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines)


def _section(text: str, name: str) -> str:
    """The lines of a heading's section (the heading and everything down to the next heading of the
    same or a higher level) or of a block (`^id`: its paragraph); "" if the note has none."""
    lines = text.split("\n")
    if name.startswith("^"):
        marker = re.compile(rf"\s\^{re.escape(name[1:])}\s*$")
        for i, line in enumerate(lines):
            if marker.search(line):
                first = i
                while first > 0 and lines[first - 1].strip():
                    first -= 1
                return "\n".join(lines[first : i + 1])
        return ""
    wanted = normalize_heading(name.split("#")[-1])
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and normalize_heading(heading.group(2)) == wanted:
            level = len(heading.group(1))
            end = next(
                (j for j in range(i + 1, len(lines))
                 if (h := _HEADING.match(lines[j])) is not None and len(h.group(1)) <= level),
                len(lines),
            )
            return "\n".join(lines[i:end])
    return ""


def render_embeds(text: str, rel: str, vault: Vault, chain: tuple[str, ...] = ()) -> str:
    """`text` with each embed outside code replaced by what players see of it (see the docstring)."""
    if "![" not in text:
        return text
    chain = chain or (rel,)
    code = code_ranges(text)

    def outside(match: re.Match[str]) -> bool:
        return not any(a <= match.start() < b for a, b in code)

    def wiki(match: re.Match[str]) -> str:
        if not outside(match):
            return match.group()
        target, section, alt = match.group(1), (match.group(2) or "")[1:], match.group(3)
        return _show(target, section, alt or "", rel, vault, chain)

    def markdown(match: re.Match[str]) -> str:
        if not outside(match):
            return match.group()
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
