"""Parse one Markdown note: decoding, frontmatter, who reads it, its secrets, embeds and wikilinks.

Everything here is pure text processing. The parsed text keeps the file's lines one for one
(frontmatter and secret passages are blanked, never removed; an embed's text is flattened onto its
own line) so line ranges stay true. Who reads what is decided in `policy`, `frontmatter` and
`secrets`; what an embed shows in `embeds`.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from ..lexicon import lexicon
from ..policy import Policy
from ..types import GM, PUBLIC, Link, Note, Secret
from .asides import cut_asides
from .code import drop_code
from .conventions import ENTITY_KINDS, Kinds
from .decode import NoteError, decode
from .embeds import Body, Vault, read_body, render_embeds
from .frontmatter import frontmatter_visibility, split_frontmatter, strings
from .looks import public_marks
from .secrets import extract_secrets

__all__ = [
    "ENTITY_KINDS", "NoteError", "decode", "extract_secrets", "frontmatter_visibility", "note_kind", "parse_note",
    "render_wikilinks", "split_frontmatter",
]

# ---------------------------------------------------------------------------------------------
# Wikilinks

_WIKILINK = re.compile(r"!?\[\[([^\[\]\n|#]*)(#[^\[\]\n|]*)?(?:\|([^\[\]\n]*))?\]\]")


def render_wikilinks(text: str, first_line: int = 1) -> tuple[str, tuple[Link, ...]]:
    """`[[Target|shown]]` reads as `shown`, `[[Target]]` as `Target` and `[[Target#Heading]]` as
    Obsidian shows it, `Target > Heading` (`[[#Heading]]`, a heading of the same note: `Heading`), so an
    item linked by its heading keeps its name; links are recorded, a link to a heading as
    `Target#Heading` (`notes/refs.py` ties a session heading to its session)."""
    links: list[Link] = []

    def repl(match: re.Match[str]) -> str:
        target, heading, shown = match.group(1).strip(), match.group(2), match.group(3)
        name = PurePosixPath(target).name
        if name.casefold().endswith(".md"):
            name = name[:-3]
        if target:
            line = first_line + text.count("\n", 0, match.start())
            links.append(Link(PurePosixPath(target).name + (heading or "").rstrip(), line))
        if shown is not None:
            return shown.strip()
        section = (heading or "").lstrip("#").strip()
        if not section or section.startswith("^"):
            return name.strip()
        return f"{name.strip()} > {section}" if name.strip() else section

    if "[[" not in text:
        return text, ()
    return _WIKILINK.sub(repl, text), tuple(links)


# ---------------------------------------------------------------------------------------------
# The note


def note_kind(path: PurePosixPath, folder_kinds: Mapping[str, str]) -> str:
    """The kind of the nearest folder that names one (`02 - Characters/Allies/` → sheet), else `note`."""
    return Kinds(lexicon(), folder_kinds).of(path.as_posix()) or "note"


def parse_note(
    relpath: str,
    data: bytes,
    folder_kinds: Mapping[str, str],
    *,
    real_path: str | None = None,
    policy: Policy | None = None,
    vault: Vault | None = None,
) -> Note:
    """Parse a file's bytes. Raises NoteError for a file that is not a note at all.

    `real_path`: where a link at `relpath` points, relative to the notes folder; the note is
    game-master-only if either path is. `policy`: the game master's (an empty one if not given).
    `vault`: every note's bytes, to show what a public note embeds and to read the note by the
    vault's conventions (without it, the note is read as a vault of its own and embeds show nothing)."""
    path = PurePosixPath(relpath)
    shows_embeds = vault is not None
    if vault is None:
        vault = _own_vault(relpath, data, folder_kinds, real_path, policy)
    real_path = real_path or vault.real_paths.get(relpath)
    facts = vault.conventions.of(relpath)
    # A character or place note is an entity even when empty: Obsidian lists it, the recaps link to it.
    named = facts.entity
    body = read_body(relpath, data, vault.policy, real_path, allow_empty=named)
    text, secrets, warnings = _readable(body, data, relpath, vault, shows_embeds)
    text, asides = cut_asides(text, vault.policy.marks)
    text, links = render_wikilinks(text)
    fm = body.frontmatter
    aliases = strings(fm.get("aliases")) + strings(fm.get("alias"))
    if not text.strip() and not secrets and not aliases and not named:
        # A note of aliases alone is an entity all the same: the Compendium takes its names.
        raise NoteError("no text besides frontmatter or plugin code" if data.strip() else "empty note")
    return Note(
        path=relpath,
        kind=facts.kind,
        stem=path.stem,
        title=_title(fm, path),
        text=text,
        visibility=GM if body.gm else PUBLIC,
        aliases=tuple(dict.fromkeys(aliases)),
        secrets=secrets,
        links=links,
        warnings=warnings,
        rule=body.rule,
        name=vault.names.name(relpath),
        sessions=facts.sessions,
        entity=named,
        public_marks=() if body.gm else public_marks(body.text, vault.policy.marks),
        asides=asides,
    )


def _own_vault(
    relpath: str, data: bytes, folder_kinds: Mapping[str, str], real_path: str | None, policy: Policy | None
) -> Vault:
    """A vault of this note alone, for a note parsed without its vault."""
    return Vault({relpath: data}, policy or Policy(), {relpath: real_path} if real_path else {}, folder_kinds)


def _readable(
    body: Body, data: bytes, relpath: str, vault: Vault, shows_embeds: bool
) -> tuple[str, tuple[Secret, ...], tuple[str, ...]]:
    """The text its readers get (a public note's embeds shown), its secrets, and its warnings."""
    if body.gm:
        # The whole note is secret: its text stays whole (inline secrets included) for the game master.
        return _whole_text(data), (), tuple(w for w in body.warnings if "treated as secret" not in w)
    text = render_embeds(body.text, relpath, vault) if shows_embeds else _drop_embeds(body.text)
    secrets = tuple(Secret(s.start_line, s.end_line, render_wikilinks(s.text)[0], s.rule) for s in body.secrets)
    return text, secrets, body.warnings


def _title(fm: Mapping[str, Any], path: PurePosixPath) -> str:
    """The note's title: its `name` or `title` property, else its file name."""
    title = next(iter(strings(fm.get("name")) or strings(fm.get("title"))), "")
    return title or path.stem.replace("_", " ").strip()


def _whole_text(data: bytes) -> str:
    text, _ = decode(data)
    return drop_code(split_frontmatter(text)[1])


def _drop_embeds(text: str) -> str:
    """Without the vault, an embed shows nothing: its name may be a secret note's."""
    return render_embeds(text, "", Vault({}, Policy()))
