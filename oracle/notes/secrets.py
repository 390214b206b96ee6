"""Secrets inside a note, read as Obsidian renders Markdown.

What Obsidian hides when reading (`%% … %%` and HTML comments) and what game masters mark as theirs
(callouts and Admonition blocks of a GM type, sections under a GM heading, Dataview fields and tags
of a GM word) become character intervals of the note, each with the rule that hid it. A CommonMark
parser (markdown-it) says what is code, a quote, a heading, a list item or a paragraph; where a
reading stays doubtful, the text is kept from players.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ..marks import Marks, marks_of
from ..policy import DEFAULT_GM_HEADINGS
from ..types import Secret

# What marks text as the game master's when no vault says otherwise: English, the default headings.
DEFAULT_MARKS = marks_of("en", DEFAULT_GM_HEADINGS)

_MD = MarkdownIt("commonmark").enable("table")
# Only the blocks are read (code, quotes, headings, which lines hold paragraph text), never an inline
# token's children: without the inline rule, a 1 MB campaign log parses in two thirds of the time.
_MD.core.ruler.disable("inline")
_CALLOUT = re.compile(r"\[!([^\]\n]*)\][-+]?")
_CALLOUT_MARKUP = re.compile(r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*(?:>[ \t]?)+")
_BACKTICKS = re.compile(r"`+")
# Obsidian reads a tag only after white space: `[Secrets](#Secrets)` is a link to a heading.
_TAG = re.compile(r"(?<!\S)#([\w/-]*[^\W\d][\w/-]*)")
_FIELD_LINE = re.compile(r"^([ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(?:>[ \t]?)*)([^\s:\[\]()][^:\[\]()\n]*?)::", re.M)
_FIELD_INLINE = re.compile(r"[\[(]([^\[\]():\n]+?)::[^\n]*?[\])]")
_FENCE_INFO = re.compile(r"^[ \t]{0,3}(?:```|~~~)[ \t]*ad-([\w-]+)", re.M | re.I)
_HEADING_LINE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def callout_type(content: str) -> str | None:
    """The type of a callout opening `content` (`[!gm|right]+ Title` → `gm`), or None."""
    match = _CALLOUT.match(content.lstrip())
    return match.group(1).split("|", 1)[0].strip() if match else None


@dataclass(frozen=True)
class Hidden:
    start: int  # character offsets into the note's text
    end: int
    rule: str


# ---------------------------------------------------------------------------------------------
# Reading the blocks


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
    spans: list[tuple[int, int]] = []
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


@dataclass
class _Blocks:
    code: list[tuple[int, int]]
    hidden: list[Hidden]  # callouts, Admonitions, GM sections, tagged blocks
    text_blocks: list[tuple[int, int, str]]  # paragraphs, list items, table rows: (start, end, kind)


def _read_blocks(text: str, marks: Marks | None) -> _Blocks:
    """The blocks of `text`; with `marks`, what they hide (without, code alone is wanted)."""
    starts = _line_starts(text)

    def span(first: int, last: int) -> tuple[int, int]:  # 0-based lines [first, last)
        return starts[first], min(starts[min(last, len(starts) - 1)] - 1, len(text))

    code: list[tuple[int, int]] = []
    hidden: list[Hidden] = []
    text_blocks: list[tuple[int, int, str]] = []
    inline_lines: set[tuple[int, int]] = set()
    heads: list[tuple[int, int, str]] = []  # (level, first line, text) of every heading
    tokens = _MD.parse(text)
    for i, token in enumerate(tokens):
        if token.map is None:
            continue
        if token.type in ("fence", "code_block"):
            code.append(span(*token.map))
            kind = token.info.strip().split(maxsplit=1)[0].casefold() if token.type == "fence" and token.info.strip() else ""
            if marks is not None and kind.startswith("ad-") and marks.word(kind[3:]):
                hidden.append(Hidden(*span(*token.map), f"Admonition block {kind}"))
        elif token.type == "inline":
            inline_lines.add((token.map[0], token.map[1]))
        elif token.type == "heading_open":
            content = tokens[i + 1].content if i + 1 < len(tokens) else ""
            heads.append((int(token.tag[1]), token.map[0], content))
        elif token.type in ("paragraph_open", "list_item_open", "tr_open"):
            text_blocks.append((*span(*token.map), token.type[:-5]))
        elif token.type == "blockquote_open":
            first = _first_inline(tokens, i)
            callout = callout_type(first.content) if first is not None else None
            if marks is not None and callout is not None and marks.word(callout):
                hidden.append(Hidden(*span(*token.map), f"callout [!{callout}]"))
    for first_line, end_line in sorted(inline_lines):
        code += _code_spans(text, *span(first_line, end_line))
    if marks is not None:
        hidden += _sections(text, heads, marks, span)
    return _Blocks(code, hidden, text_blocks)


def headings(text: str) -> list[tuple[int, int, str]]:
    """(level, first line counted from 0, text) of every heading, `#` or underlined, as CommonMark
    reads them: a `#` in code or a `---` under a list is no heading."""
    tokens = _MD.parse(text)
    return [
        (int(token.tag[1]), token.map[0], tokens[i + 1].content if i + 1 < len(tokens) else "")
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.map is not None
    ]


def code_ranges(text: str) -> list[tuple[int, int]]:
    """Where `text` holds code (fences, indented blocks, code spans): nothing there is markup."""
    return _read_blocks(text, None).code


def _first_inline(tokens: list[Token], i: int) -> Token | None:
    first = next((t for t in tokens[i + 1 :] if t.type in ("inline", "blockquote_close")), None)
    return first if first is not None and first.type == "inline" else None


def _sections(text, heads, marks: Marks, span) -> list[Hidden]:
    """A GM heading's section, or a heading carrying a GM tag: down to the next heading of the same
    or a higher level (its own sub-headings stay inside)."""
    out = []
    for n, (level, line, content) in enumerate(heads):
        # An underlined heading may run over several lines (a paragraph above it joins it): any line
        # that is a mark makes it one.
        entry = next((e for e in map(marks.heading, content.split("\n")) if e), "")
        tag = _gm_tag(content, marks)
        if not entry and not tag:
            continue
        end_line = next((at for lv, at, _ in heads[n + 1 :] if lv <= level), None)
        start, _ = span(line, line + 1)
        end = span(end_line, end_line + 1)[0] - 1 if end_line is not None else len(text)
        rule = f"section under the heading {content.strip()!r}" if entry else f"section whose heading carries #{tag}"
        out.append(Hidden(start, max(end, start), rule))
    return out


def _gm_tag(content: str, marks: Marks) -> str:
    for match in _TAG.finditer(content):
        if marks.word(match.group(1)):
            return match.group(1)
    return ""


def _inside(pos: int, ranges: Iterable[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in ranges)


# ---------------------------------------------------------------------------------------------
# Comments: `%% … %%` and `<!-- … -->`


def _pair(markers: list[int], width: int, end: int) -> tuple[list[tuple[int, int]], int | None]:
    """Markers paired in order, as Obsidian pairs them; an odd one out hides to the end.
    Returns (intervals, the unclosed marker or None)."""
    intervals = [(markers[i], markers[i + 1] + width) for i in range(0, len(markers) - 1, 2)]
    if len(markers) % 2:
        intervals.append((markers[-1], end))
        return intervals, markers[-1]
    return intervals, None


def _percent_comments(text: str, skip: list[tuple[int, int]]) -> tuple[list[Hidden], list[str]]:
    """`%% … %%` outside code and hidden callouts. A `%%` right after a digit or a backslash
    (`20%%`, `\\%%`) may be literal or a marker: both readings are made, and whatever either would
    hide is hidden, so a doubtful marker can only hide more text, never show a secret."""
    markers: list[int] = []
    pos = text.find("%%")
    while pos >= 0:
        if not _inside(pos, skip):
            markers.append(pos)
        pos = text.find("%%", pos + 2)
    doubtful = [m for m in markers if m > 0 and (text[m - 1].isdigit() or text[m - 1] == "\\")]
    intervals, unclosed = _pair(markers, 2, len(text))
    warnings: list[str] = []
    if doubtful:
        sure = [m for m in markers if m not in doubtful]
        more, unclosed_sure = _pair(sure, 2, len(text))
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
    return [Hidden(a, b, "%% comment") for a, b in intervals], warnings


def _html_comments(text: str, skip: list[tuple[int, int]]) -> tuple[list[Hidden], list[str]]:
    """`<!-- … -->` outside code: Obsidian hides it when reading. One never closed hides to the end."""
    out: list[Hidden] = []
    pos = text.find("<!--")
    while pos >= 0:
        if _inside(pos, skip):
            pos = text.find("<!--", pos + 4)
            continue
        close = text.find("-->", pos + 4)
        if close < 0:
            line = text.count("\n", 0, pos) + 1
            out.append(Hidden(pos, len(text), "HTML comment"))
            return out, [f"line {line}: an HTML comment is never closed; the rest of the note is treated as secret"]
        out.append(Hidden(pos, close + 3, "HTML comment"))
        pos = text.find("<!--", close + 3)
    return out, []


# ---------------------------------------------------------------------------------------------
# Dataview fields and tags


def _fields(text: str, skip: list[tuple[int, int]], marks: Marks) -> list[Hidden]:
    """`secret:: …` to the end of its line; `[gm:: …]` and `(dm:: …)` inline."""
    out = []
    for m in _FIELD_LINE.finditer(text):
        key = m.group(2).strip()
        if marks.word(key) and not _inside(m.start(2), skip):
            end = text.find("\n", m.end())
            out.append(Hidden(m.start(2), len(text) if end < 0 else end, f"Dataview field {key}::"))
    for m in _FIELD_INLINE.finditer(text):
        key = m.group(1).strip()
        if marks.word(key) and not _inside(m.start(), skip):
            out.append(Hidden(m.start(), m.end(), f"Dataview field {key}::"))
    return out


def _tagged(text: str, blocks: _Blocks, skip: list[tuple[int, int]], marks: Marks) -> list[Hidden]:
    """A paragraph, list item or table row carrying a GM tag: the smallest one holding the tag, but a
    list item with its sub-items. Tags in headings are read with the sections."""
    out = []
    for m in _TAG.finditer(text):
        if not marks.word(m.group(1)) or _inside(m.start(), skip):
            continue
        holders = [b for b in blocks.text_blocks if b[0] <= m.start() < max(b[1], b[0] + 1)]
        items = [b for b in holders if b[2] in ("list_item", "tr")]
        chosen = min(items or holders, key=lambda b: b[1] - b[0], default=None)
        if chosen is None:  # not in a block text is read from (a heading): its section decides
            continue
        out.append(Hidden(chosen[0], chosen[1], f"tag #{m.group(1)}"))
    return out


# ---------------------------------------------------------------------------------------------
# The note's hidden passages


def may_hide(text: str, marks: Marks) -> bool:
    """Whether Obsidian could hide any of `text`, or it holds a form a game master marks secrets
    with. Without any, parsing the Markdown could only confirm there is nothing, at a cost that grows
    with the note (a 1 MB log: 15,000 tokens alive at once, for a garbage collection to walk)."""
    if "%%" in text or "<!--" in text or "::" in text or _FENCE_INFO.search(text):
        return True
    if "[!" in text and any(marks.word(m.group(1).split("|", 1)[0]) for m in _CALLOUT.finditer(text)):
        return True
    if "#" in text and any(marks.word(m.group(1)) for m in _TAG.finditer(text)):
        return True
    return any(marks.heading(m.group(1)) for m in _HEADING_LINE.finditer(text)) or _setext_gm(text, marks)


def _setext_gm(text: str, marks: Marks) -> bool:
    lines = text.split("\n")
    return any(
        re.fullmatch(r"[ \t]{0,3}(?:=+|-+)[ \t]*", lines[i + 1]) and marks.heading(lines[i])
        for i in range(len(lines) - 1)
        if lines[i].strip()
    )


def hidden_passages(text: str, marks: Marks = DEFAULT_MARKS) -> tuple[list[Hidden], list[str]]:
    """Every passage of `text` kept from players, merged where they touch, and warnings by line."""
    if not may_hide(text, marks):
        return [], []
    blocks = _read_blocks(text, marks)
    whole = [(h.start, h.end) for h in blocks.hidden if not h.rule.startswith("section")]
    percent, warnings = _percent_comments(text, blocks.code + whole)
    html, html_warnings = _html_comments(text, blocks.code)
    hidden = blocks.hidden + percent + html
    hidden += _fields(text, blocks.code, marks)
    hidden += _tagged(text, blocks, blocks.code, marks)
    return _merge(hidden), warnings + html_warnings


def _merge(hidden: list[Hidden]) -> list[Hidden]:
    merged: list[Hidden] = []
    for h in sorted(hidden, key=lambda h: (h.start, -h.end)):
        if merged and h.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Hidden(last.start, max(last.end, h.end), last.rule)
        else:
            merged.append(h)
    return merged


def clean_secret(raw: str) -> str:
    """A hidden passage as the game master's chunk holds it: comment markers and quote markup dropped."""
    lines = []
    for line in raw.replace("%%", "").replace("<!--", "").replace("-->", "").split("\n"):
        line = _CALLOUT_MARKUP.sub("", line)
        stripped = line.lstrip()
        if _CALLOUT.match(stripped):
            line = _CALLOUT.sub("", stripped, count=1)
        lines.append(line.strip())
    return "\n".join(lines).strip()


def extract_secrets(text: str, marks: Marks = DEFAULT_MARKS) -> tuple[str, tuple[Secret, ...], list[str]]:
    """Returns (public text with the same line count, the secret passages, warnings)."""
    hidden, warnings = hidden_passages(text, marks)
    if not hidden:
        return text, (), warnings
    public: list[str] = []
    secrets: list[Secret] = []
    pos = 0
    for h in hidden:
        public.append(text[pos : h.start])
        raw = text[h.start : h.end]
        public.append("\n" * raw.count("\n"))
        body = clean_secret(raw)
        if body:
            start_line = text.count("\n", 0, h.start) + 1
            secrets.append(Secret(start_line, start_line + raw.count("\n"), body, h.rule))
        pos = h.end
    public.append(text[pos:])
    return "".join(public), tuple(secrets), warnings
