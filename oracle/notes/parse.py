"""Parse one Markdown note: decoding, frontmatter, game-master secrets and Obsidian wikilinks.

Everything here is pure text processing. The parsed text keeps the file's lines one for one
(frontmatter and secret passages are blanked, never removed) so line ranges stay true.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath

import yaml
from markdown_it import MarkdownIt

from ..errors import OracleError
from ..types import GM, PUBLIC, Link, Note, Secret


class NoteError(OracleError, ValueError):
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
# Words that, in frontmatter the Oracle cannot read, may be a game master marking the note secret.
_SECRET_WORDS = re.compile(r"\b(?:visibility|gm|dm|secret|private)\b", re.I)
GM_VISIBILITY = frozenset({"gm", "dm", "secret", "private"})
PUBLIC_VISIBILITY = frozenset({"", "public", "players", "player", "everyone", "all"})
# A whole note is game-master-only under a folder of one of these names, at any depth.
GM_FOLDERS = frozenset({"gm", "dm", "secret", "secrets", "private"})


def _unreadable(raw: str, first_line: int, reason: str) -> tuple[dict, list[str]]:
    """Frontmatter that cannot be read: ignored, unless it may mark the note secret (fail closed)."""
    word = _SECRET_WORDS.search(raw)
    if word is None:
        return {}, [f"broken frontmatter ignored: {reason}"]
    line = first_line + raw.count("\n", 0, word.start())
    return {"visibility": "gm"}, [
        f"line {line}: frontmatter cannot be read ({reason}) but mentions {word.group()!r};"
        " the note is treated as game-master-only"
    ]


def split_frontmatter(text: str) -> tuple[dict, str, list[str]]:
    """Returns (frontmatter, text with the frontmatter lines blanked, warnings)."""
    if not text.startswith("---"):
        return {}, text, []
    first_break = text.find("\n")
    if first_break < 0 or text[:first_break].strip() != "---":
        return {}, text, []
    end = _FRONTMATTER_END.search(text, first_break + 1)
    if end is None:
        head = text[first_break + 1 :].split("\n\n", 1)[0]
        if _SECRET_WORDS.search(head):
            data, warnings = _unreadable(head, 2, "opened with --- but never closed")
            return data, text, warnings
        return {}, text, ["frontmatter opened with --- but never closed; read as text"]
    raw = text[first_break + 1 : end.start()]
    blanked = "\n" * text.count("\n", 0, end.end()) + text[end.end() :]
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        data, warnings = _unreadable(raw, 2, str(exc).splitlines()[0])
        return data, blanked, warnings
    if data is None:
        return {}, blanked, []
    if not isinstance(data, Mapping):
        data, warnings = _unreadable(raw, 2, "not a key/value map")
        return data, blanked, warnings
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


def frontmatter_visibility(frontmatter: Mapping) -> tuple[str, str]:
    """(visibility, warning or "") that a note's or an entry's own keys give it.

    `visibility: gm` (or dm, secret, private) and a true `gm:`/`dm:`/`secret:` flag mean GM-only;
    a value the Oracle does not know is GM-only too, with a warning: it cannot tell, so it keeps it.
    """
    value = frontmatter.get("visibility")
    shown = str(value).strip().lower() if isinstance(value, (str, int, float, bool)) or value is None else None
    if shown in GM_VISIBILITY:
        return GM, ""
    if shown is None or (value is not None and shown not in PUBLIC_VISIBILITY):
        return GM, f"visibility {value!r} is not one the Oracle knows (public or gm); treated as game-master-only"
    for key in ("gm", "dm", "secret"):
        flag = frontmatter.get(key)
        if flag is None or flag is False or str(flag).strip().lower() in {"false", "no", "off", "0", ""}:
            continue
        if flag is True or str(flag).strip().lower() in {"true", "yes", "on", "1"}:
            return GM, ""
        return GM, f"{key}: {flag!r} is not true or false; treated as game-master-only"
    return PUBLIC, ""


# ---------------------------------------------------------------------------------------------
# Secrets, read as Obsidian reads Markdown: `%% … %%` comments outside code, and callouts whose
# type is one of SECRET_CALLOUTS. A CommonMark parser (markdown-it) says what is code, a quote
# and a quote's lazy continuation; where a reading stays doubtful, the text is kept from players.

SECRET_CALLOUTS = ("gm", "secret", "dm", "private")
_MD = MarkdownIt("commonmark").enable("table")
# Only the blocks are read (code, quotes, which lines hold paragraph text), never an inline token's
# children: without the inline rule, a 1 MB campaign log parses in two thirds of the time, into 17%
# fewer objects for a garbage collection to walk while they live.
_MD.core.ruler.disable("inline")
_CALLOUT_HEAD = re.compile(r"\[!(?:" + "|".join(SECRET_CALLOUTS) + r")\][-+]?", re.I)
_CALLOUT_MARKUP = re.compile(r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*(?:>[ \t]?)+")
_BACKTICKS = re.compile(r"`+")


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    starts.append(len(text) + 1)  # one past the last line, as if it ended in a newline
    return starts


def _code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """CommonMark code spans in `text[start:end]`: a run of n backticks up to the next run of
    exactly n; an unmatched run is literal; a backslash escapes a backtick outside code."""
    spans = []
    pos = start
    while True:
        m = _BACKTICKS.search(text, pos, end)
        if m is None:
            return spans
        escaped = m.start() > start and text[m.start() - 1] == "\\"
        opener = m.group()[1:] if escaped else m.group()
        if not opener:
            pos = m.end()
            continue
        close = next(
            (c for c in _BACKTICKS.finditer(text, m.end(), end) if len(c.group()) == len(opener)), None
        )
        if close is None:
            pos = m.end()
            continue
        spans.append((m.end() - len(opener), close.end()))
        pos = close.end()


def _blocks(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(code ranges, secret callout ranges) as character offsets into `text`."""
    starts = _line_starts(text)

    def span(first: int, last: int) -> tuple[int, int]:  # 0-based lines [first, last)
        return starts[first], min(starts[min(last, len(starts) - 1)] - 1, len(text))

    code: list[tuple[int, int]] = []
    callouts: list[tuple[int, int]] = []
    inline_lines: set[tuple[int, int]] = set()
    tokens = _MD.parse(text)
    for i, token in enumerate(tokens):
        if token.map is None:
            continue
        if token.type in ("fence", "code_block"):
            code.append(span(*token.map))
        elif token.type == "inline":
            inline_lines.add(tuple(token.map))
        elif token.type == "blockquote_open":
            first = next((t for t in tokens[i + 1 :] if t.type == "inline" or t.type == "blockquote_close"), None)
            if first is not None and first.type == "inline" and _CALLOUT_HEAD.match(first.content):
                callouts.append(span(*token.map))
    for first, last in sorted(inline_lines):
        code += _code_spans(text, *span(first, last))
    return code, callouts


def _inside(pos: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in ranges)


def _pair(markers: list[int], end: int) -> tuple[list[tuple[int, int]], int | None]:
    """Markers paired in order, as Obsidian pairs them; an odd one out hides to the end.
    Returns (intervals, the unclosed marker or None)."""
    intervals = [(markers[i], markers[i + 1] + 2) for i in range(0, len(markers) - 1, 2)]
    if len(markers) % 2:
        intervals.append((markers[-1], end))
        return intervals, markers[-1]
    return intervals, None


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def _may_hide(text: str) -> bool:
    """Whether Obsidian could hide any of `text`: it has a comment marker or a secret callout's head.
    Without either, parsing the Markdown could only confirm there is nothing, at a cost that grows
    with the note (a 1 MB log: 15,000 tokens alive at once, for a garbage collection to walk)."""
    return "%%" in text or _CALLOUT_HEAD.search(text) is not None


def _secret_intervals(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """Character intervals of secret passages, sorted and disjoint, and warnings by line.

    A `%%` right after a digit or a backslash (`20%%`, `\\%%`) may be literal or a marker: both
    readings are made, and whatever either would hide is hidden, so a doubtful marker can only
    hide more text, never show a secret.
    """
    if not _may_hide(text):
        return [], []
    code, callouts = _blocks(text)
    markers: list[int] = []
    pos = text.find("%%")
    while pos >= 0:
        if not _inside(pos, code) and not _inside(pos, callouts):
            markers.append(pos)
        pos = text.find("%%", pos + 2)
    doubtful = [m for m in markers if m > 0 and (text[m - 1].isdigit() or text[m - 1] == "\\")]
    intervals, unclosed = _pair(markers, len(text))
    warnings: list[str] = []
    if doubtful:
        sure = [m for m in markers if m not in doubtful]
        more, unclosed_sure = _pair(sure, len(text))
        intervals += more
        if unclosed is None or (unclosed_sure is not None and unclosed_sure < unclosed):
            unclosed = unclosed_sure
        lines = ", ".join(str(text.count("\n", 0, m) + 1) for m in doubtful)
        warnings.append(
            f"line {lines}: a %% after a digit or a backslash may be literal or a comment marker;"
            " the text either reading would hide is treated as secret"
        )
    if unclosed is not None:
        line = text.count("\n", 0, unclosed) + 1
        warnings.append(f"line {line}: a %% comment is never closed; the rest of the note is treated as secret")
    return _merge(intervals + callouts), warnings


def _clean_secret(raw: str) -> str:
    lines = []
    for line in raw.replace("%%", "").split("\n"):
        line = _CALLOUT_MARKUP.sub("", line)
        line = _CALLOUT_HEAD.sub("", line, count=1) if _CALLOUT_HEAD.match(line.lstrip()) else line
        lines.append(line.strip())
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
    return any(part.lower() in GM_FOLDERS for part in path.parts[:-1])


def parse_note(
    relpath: str, data: bytes, folder_kinds: Mapping[str, str], *, real_path: str | None = None
) -> Note:
    """Parse a file's bytes. Raises NoteError for a file that is not a note at all.

    `real_path`: where a link at `relpath` points, relative to the notes folder; the note is
    game-master-only if either path is under a GM folder."""
    path = PurePosixPath(relpath)
    text, warnings = decode(data)
    frontmatter, text, fm_warnings = split_frontmatter(text)
    warnings += fm_warnings
    visibility, visibility_warning = frontmatter_visibility(frontmatter)
    if visibility_warning:
        warnings.append(visibility_warning)
    gm_note = visibility == GM or is_gm_path(path) or (real_path is not None and is_gm_path(PurePosixPath(real_path)))
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
        secrets=secrets,
        links=links,
        warnings=tuple(warnings),
    )
