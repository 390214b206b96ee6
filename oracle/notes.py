"""Parse one Markdown note: decoding, frontmatter, game-master secrets and Obsidian wikilinks.

Everything here is pure text processing. The parsed text keeps the file's lines one for one
(frontmatter and secret passages are blanked, never removed) so line ranges stay true.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath

import yaml

from .types import GM, PUBLIC, Link, Note, Secret


class NoteError(ValueError):
    """The file cannot be read as a note; the message is the reason shown to the game master."""


# ---------------------------------------------------------------------------------------------
# Decoding


def decode(data: bytes) -> tuple[str, list[str]]:
    """Bytes to text with `\\n` line ends. Returns (text, warnings); raises NoteError if binary."""
    warnings: list[str] = []
    sample = data[:8192]
    if sample.count(0) * 50 > len(sample):  # over 2% NUL bytes: a binary file, not stray NULs
        raise NoteError("binary file (NUL bytes), not a Markdown note")
    if b"\x00" in data:  # a stray NUL in a text note: drop it, keep the note
        warnings.append(f"removed {data.count(0)} NUL bytes")
        data = data.replace(b"\x00", b"")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Notes written on Windows are usually cp1252; latin-1 decodes anything, as a last resort.
        try:
            text = data.decode("cp1252")
            warnings.append(f"not UTF-8 (byte {exc.start}); decoded as Windows-1252")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
            warnings.append(f"not UTF-8 (byte {exc.start}); decoded as Latin-1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    controls = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\n\t\f")
    if controls > max(8, len(text[:8192]) // 20):
        raise NoteError("binary file (control characters), not a Markdown note")
    if not text.strip():
        raise NoteError("empty note")
    return text, warnings


# ---------------------------------------------------------------------------------------------
# Frontmatter

_FRONTMATTER_END = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M)


def split_frontmatter(text: str) -> tuple[dict, str, list[str]]:
    """Returns (frontmatter, text with the frontmatter lines blanked, warnings)."""
    if not text.startswith("---"):
        return {}, text, []
    first_break = text.find("\n")
    if first_break < 0 or text[:first_break].strip() != "---":
        return {}, text, []
    end = _FRONTMATTER_END.search(text, first_break + 1)
    if end is None:
        return {}, text, ["frontmatter opened with --- but never closed; read as text"]
    raw = text[first_break + 1 : end.start()]
    blanked = "\n" * text.count("\n", 0, end.end()) + text[end.end() :]
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0]
        return {}, blanked, [f"broken frontmatter ignored: {reason}"]
    if data is None:
        return {}, blanked, []
    if not isinstance(data, Mapping):
        return {}, blanked, ["frontmatter is not a key/value map; ignored"]
    return {str(k).lower(): v for k, v in data.items()}, blanked, []


def _strings(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, (list, tuple, set)):
        items = [v for v in value if isinstance(v, (str, int, float))]
    else:
        return ()
    out = []
    for item in items:
        s = str(item).strip().strip("#").strip()
        if s and s not in out:
            out.append(s)
    return tuple(out)


def _is_gm(frontmatter: dict) -> bool:
    visibility = str(frontmatter.get("visibility", "")).strip().lower()
    gm_flag = frontmatter.get("gm")
    return visibility in {"gm", "dm", "secret", "private"} or gm_flag is True or str(gm_flag).lower() == "true"


# ---------------------------------------------------------------------------------------------
# Secrets: `%% … %%` comments and `> [!secret]` / `> [!gm]` callouts

_CALLOUT = re.compile(r"^[ \t]*(?:>[ \t]*)+\[!(?:secret|gm)\][-+]?", re.I)
_QUOTED = re.compile(r"^[ \t]*>")


def _secret_intervals(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """Character intervals of secret passages, sorted and disjoint."""
    intervals: list[tuple[int, int]] = []
    warnings: list[str] = []
    # Callouts: the header line and every following quoted line.
    offset = 0
    lines = text.split("\n")
    i = 0
    starts = []
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    while i < len(lines):
        if _CALLOUT.match(lines[i]):
            j = i + 1
            while j < len(lines) and _QUOTED.match(lines[j]):
                j += 1
            end = starts[j - 1] + len(lines[j - 1])
            intervals.append((starts[i], end))
            i = j
        else:
            i += 1
    # Comments: pairs of %%; an unclosed one hides the rest of the file, as Obsidian does.
    pos = 0
    while True:
        start = text.find("%%", pos)
        if start < 0:
            break
        if any(a <= start < b for a, b in intervals):
            pos = start + 2
            continue
        end = text.find("%%", start + 2)
        if end < 0:
            intervals.append((start, len(text)))
            warnings.append("a %% comment is never closed; the rest of the note is treated as secret")
            break
        intervals.append((start, end + 2))
        pos = end + 2
    intervals.sort()
    merged: list[tuple[int, int]] = []
    for a, b in intervals:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged, warnings


def _clean_secret(raw: str) -> str:
    lines = []
    for line in raw.replace("%%", "").split("\n"):
        line = re.sub(r"^[ \t]*(?:>[ \t]?)+", "", line)
        line = re.sub(r"^\[!(?:secret|gm)\][-+]?\s*", "", line, flags=re.I)
        lines.append(line.rstrip())
    return "\n".join(lines).strip()


def extract_secrets(text: str) -> tuple[str, tuple[Secret, ...], list[str]]:
    """Returns (public text with the same line count, the secret passages, warnings)."""
    intervals, warnings = _secret_intervals(text)
    if not intervals:
        return text, (), warnings
    public: list[str] = []
    secrets: list[Secret] = []
    pos = 0
    for a, b in intervals:
        public.append(text[pos:a])
        raw = text[a:b]
        public.append("\n" * raw.count("\n"))
        body = _clean_secret(raw)
        if body:
            start_line = text.count("\n", 0, a) + 1
            secrets.append(Secret(start_line, start_line + raw.count("\n"), body))
        pos = b
    public.append(text[pos:])
    return "".join(public), tuple(secrets), warnings


# ---------------------------------------------------------------------------------------------
# Wikilinks

_WIKILINK = re.compile(r"!?\[\[([^\[\]\n|#]*)(?:#[^\[\]\n|]*)?(?:\|([^\[\]\n]*))?\]\]")


def render_wikilinks(text: str, first_line: int = 1) -> tuple[str, tuple[Link, ...]]:
    """`[[Target|shown]]` reads as `shown`, `[[Target]]` as `Target`; links are recorded."""
    links: list[Link] = []

    def repl(match: re.Match[str]) -> str:
        target = match.group(1).strip()
        shown = match.group(2)
        if target:
            line = first_line + text.count("\n", 0, match.start())
            links.append(Link(PurePosixPath(target).name, line))
        return (shown if shown is not None else PurePosixPath(target).name).strip()

    if "[[" not in text:
        return text, ()
    return _WIKILINK.sub(repl, text), tuple(links)


# ---------------------------------------------------------------------------------------------
# The note


def note_kind(path: PurePosixPath, folder_kinds: Mapping[str, str]) -> str:
    """The kind of the nearest folder that names one (`sheets/` → sheet), else `note`."""
    for folder in reversed(path.parts[:-1]):
        kind = folder_kinds.get(folder.lower())
        if kind:
            return kind
    return "note"


def is_gm_path(path: PurePosixPath) -> bool:
    return any(part.lower() == "gm" for part in path.parts[:-1])


def parse_note(relpath: str, data: bytes, folder_kinds: Mapping[str, str]) -> Note:
    """Parse a file's bytes. Raises NoteError for a file that is not a note at all."""
    path = PurePosixPath(relpath)
    text, warnings = decode(data)
    frontmatter, text, fm_warnings = split_frontmatter(text)
    warnings += fm_warnings
    gm_note = _is_gm(frontmatter) or is_gm_path(path)
    if gm_note:
        # The whole note is secret; its inline secrets stay in place, it is all GM-only anyway.
        secrets: tuple[Secret, ...] = ()
    else:
        text, secrets, secret_warnings = extract_secrets(text)
        warnings += secret_warnings
        secrets = tuple(
            Secret(s.start_line, s.end_line, render_wikilinks(s.text)[0]) for s in secrets
        )
    text, links = render_wikilinks(text)
    if not text.strip() and not secrets:
        raise NoteError("no text besides frontmatter")
    aliases = _strings(frontmatter.get("aliases")) + _strings(frontmatter.get("alias"))
    title = next(iter(_strings(frontmatter.get("name")) or _strings(frontmatter.get("title"))), "")
    return Note(
        path=relpath,
        kind=note_kind(path, folder_kinds),
        stem=path.stem,
        title=title or path.stem.replace("_", " ").strip(),
        text=text,
        visibility=GM if gm_note else PUBLIC,
        aliases=tuple(dict.fromkeys(aliases)),
        tags=_strings(frontmatter.get("tags")),
        secrets=secrets,
        links=links,
        warnings=tuple(warnings),
    )
