"""Code stays code: the query and plugin blocks of an Obsidian vault are not prose.

A `dataviewjs` loop, a Templater tag or an Initiative Tracker block is what renders a note, not what
it says, and indexed as text it outranks the prose players ask about. Such blocks are blanked line
for line (line numbers stay true); what a player may still ask of them stays: a statblock's or an
encounter's names and types. Fences of no language or of a language not listed here are kept: some
game masters box their read-aloud text in a plain fence.
"""
from __future__ import annotations

import re

from markdown_it import MarkdownIt

CODE_LANGUAGES = frozenset({
    "dataview", "dataviewjs", "tasks", "query", "mermaid", "leaflet", "ccard", "button", "chart", "tracker",
    "customjs", "excalidraw", "dice", "encounter", "encounter-table", "statblock", "initiative", "rpg",
    "meta-bind", "meta-bind-button", "meta-bind-js-view", "js", "javascript", "ts", "typescript", "python", "py",
    "css", "html", "json", "sql", "sh", "bash", "shell", "powershell",
})
# In these, the lines that name what the block shows are kept: `name: Goblin Boss`, `- 3: Goblin`.
_NAMED = frozenset({"statblock", "encounter", "encounter-table", "initiative", "rpg"})
_NAME_LINE = re.compile(r"^\s*(?:-\s*)?(?:name|type|creatures?|monster|title|size)\s*:|^\s*-\s*\d*\s*:?\s*[A-Za-z]")
_TEMPLATER = re.compile(r"<%[\s\S]*?%>")
_INLINE_QUERY = re.compile(r"`\$?=[^`\n]*`")
_MD = MarkdownIt("commonmark")
_MD.core.ruler.disable("inline")


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", "", text)


def drop_code(text: str) -> str:
    """`text` with query and plugin code blanked, Templater tags and inline queries removed."""
    if "<%" in text:
        text = _TEMPLATER.sub(lambda m: _blank(m.group()), text)
    if "`=" in text or "`$=" in text:
        text = _INLINE_QUERY.sub("", text)
    if "```" not in text and "~~~" not in text:
        return text
    lines = text.split("\n")
    for token in _MD.parse(text):
        if token.type != "fence" or token.map is None:
            continue
        language = token.info.strip().split(maxsplit=1)[0].casefold() if token.info.strip() else ""
        if language not in CODE_LANGUAGES:
            continue
        first, last = token.map
        for i in range(first, min(last, len(lines))):
            keep = language in _NAMED and first < i < last - 1 and _NAME_LINE.match(lines[i])
            if not keep:
                lines[i] = ""
    return "\n".join(lines)
