"""A note's frontmatter as Obsidian reads it, and whose note it says it is.

Obsidian's properties are YAML with habits of their own: unquoted `![[image.png]]` and `[[Note]]`
values, keys in any case, and game masters' many ways of saying "mine" (`visibility: gm`,
`public: false`, `publish: false`, `private: true`, `tags: [gm]`…). Whatever may say "mine" and cannot
be read for sure makes the note the game master's: a duplicated key, a contradiction, a value the
Oracle does not know, frontmatter that does not parse, or a frontmatter-like block Obsidian does not
read as one. A template's placeholders (Templater's `<% … %>`, core Templates' `{{title}}`) are filled
in only when the template is used: they read as empty, and frontmatter their code writes is no
error, unless that code may say "mine".
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from ..lexicon import frontmatter_words
from ..marks import Marks
from ..types import GM, PUBLIC
from .secrets import DEFAULT_MARKS

_FRONTMATTER_END = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M)
# Whose note its properties say (oracle/lexicon/international.toml): values of `visibility`, keys whose
# true value (compared without case, `_` or spaces) makes the note the game master's besides every key
# whose words mark it (`gmnotes`, `dm_only`, `Secrets`: `oracle.marks`), keys whose false value does.
_WORDS = frontmatter_words()
GM_VISIBILITY, PUBLIC_VISIBILITY = _WORDS.gm_values, _WORDS.public_values
GM_FLAGS, PUBLIC_FLAGS = _WORDS.gm_flags, _WORDS.public_flags
# Words that, in frontmatter the Oracle cannot read, may be a game master marking the note secret.
_SECRET_WORDS = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in dict.fromkeys(["visibility", *sorted(GM_VISIBILITY), *PUBLIC_FLAGS])) + r")\b",
    re.I,
)
# An unquoted Obsidian link or embed as a property value: YAML reads `!` as a tag and fails.
_OBSIDIAN_VALUE = re.compile(r"^([ \t]*(?:-[ \t]+)?(?:[^\s:#][^:\n]*:[ \t]+)?)(!?\[\[[^\n]*\]\])[ \t]*$", re.M)
_COMMENT = re.compile(r"%%.*?(?:%%|$)", re.S)
_PLACEHOLDER = re.compile(r"<%[\s\S]*?%>|\{\{[^{}\n]*\}\}")


def key_of(key: object) -> str:
    return re.sub(r"[\s_]+", "-", str(key).strip().casefold())


class _Loader(yaml.SafeLoader):
    """SafeLoader that records a duplicated top-level key instead of silently keeping the last."""

    duplicates: list[str]

    def construct_mapping(self, node, deep=False):
        if node is getattr(self, "_top", None) or not hasattr(self, "_top"):
            self._top = node
            seen: set[str] = set()
            for key_node, _ in node.value:
                key = key_of(getattr(key_node, "value", ""))
                if key in seen:
                    self.duplicates.append(key)
                seen.add(key)
        return super().construct_mapping(node, deep)


def _load(raw: str) -> tuple[object, list[str]]:
    loader = _Loader(raw)
    loader.duplicates = []
    try:
        return loader.get_single_data(), loader.duplicates
    finally:
        loader.dispose()


def _unreadable(raw: str, first_line: int, reason: str, templater: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Frontmatter that cannot be read: ignored (quietly if Templater code writes it), unless it may
    mark the note secret (fail closed)."""
    word = _SECRET_WORDS.search(raw)
    if word is None:
        return {}, [] if templater else [f"broken frontmatter ignored: {reason}"]
    line = first_line + raw.count("\n", 0, word.start())
    return {"visibility": "gm"}, [
        f"line {line}: frontmatter cannot be read ({reason}) but mentions {word.group()!r};"
        " the note is treated as game-master-only"
    ]


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, list[str]]:
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
    data, warnings = _read(raw)
    return data, blanked, warnings


def _read(raw: str) -> tuple[dict[str, Any], list[str]]:
    """A closed frontmatter block's keys (case folded) and warnings."""
    code = "".join(_PLACEHOLDER.findall(raw))
    if _SECRET_WORDS.search(code):
        return _unreadable(raw, 2, "a template fills it in")
    filled = _PLACEHOLDER.sub(lambda m: "\n" * m.group().count("\n"), raw)
    try:
        data, duplicates = _load(filled)
    except yaml.YAMLError as exc:
        quoted = _OBSIDIAN_VALUE.sub(lambda m: m.group(1) + _quote(m.group(2)), filled)
        try:
            loaded = _load(quoted) if quoted != filled else None
        except yaml.YAMLError:
            loaded = None
        if loaded is None:
            return _unreadable(raw, 2, str(exc).splitlines()[0], "<%" in code)
        data, duplicates = loaded
    if data is None:
        return {}, []
    if not isinstance(data, Mapping):
        return _unreadable(raw, 2, "not a key/value map", "<%" in code)
    out: dict[str, Any] = {}
    clashes: list[str] = []
    for k, v in data.items():
        key = key_of(k)
        if key in out and out[key] != v:
            clashes.append(key)
        out[key] = v
    warnings = []
    for key in dict.fromkeys(duplicates + clashes):
        if key in GM_FLAGS or key in PUBLIC_FLAGS or key in ("visibility", "tags", "tag"):
            out["visibility"] = "gm"
            warnings.append(f"frontmatter gives {key!r} more than once; the note is treated as game-master-only")
        else:
            warnings.append(f"frontmatter gives {key!r} more than once; the last one is used")
    return out, warnings


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def loose_frontmatter(text: str) -> str:
    """A warning if `text` (frontmatter already blanked) opens with a frontmatter-like block that
    Obsidian does not read as frontmatter (after a blank line, or TOML's `+++`) and mentions
    visibility: the game master may have meant it. "" otherwise."""
    stripped = text.lstrip("\n \t")
    for fence in ("---", "+++"):
        if not stripped.startswith(fence + "\n") and not (fence == "+++" and stripped.startswith(fence)):
            continue
        if fence == "---" and stripped is text:
            return ""  # real frontmatter, read already
        body = stripped[len(fence) :].split("\n" + fence, 1)[0]
        word = _SECRET_WORDS.search(body)
        if word:
            where = "TOML (+++)" if fence == "+++" else "after a blank line"
            return (f"a frontmatter-like block {where} mentions {word.group()!r}; Obsidian does not read it as"
                    " frontmatter, and the note is treated as game-master-only")
    return ""


def strings(value: object) -> tuple[str, ...]:
    """A property's strings (a list or one value), `%% … %%` comments and empty items dropped."""
    if value is None:
        return ()
    items: list[str | int | float]
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, (list, tuple, set)):
        items = [v for v in value if isinstance(v, (str, int, float))]
    else:
        return ()
    out = []
    for item in items:
        s = _COMMENT.sub("", str(item)).strip().strip("#").strip()
        if s and s not in out:
            out.append(s)
    return tuple(out)


def _flag(value: object) -> bool | None:
    """True, False, or None for a value that is neither."""
    if value is None or value is False:
        return False if value is False else None
    if value is True:
        return True
    text = str(value).strip().casefold()
    return True if text in _WORDS.true else False if text in _WORDS.false else None


def frontmatter_visibility(frontmatter: Mapping[str, Any], marks: Marks = DEFAULT_MARKS) -> tuple[str, str, str]:
    """(visibility, rule, warning or "") that a note's or an entry's own keys give it.

    Any key that says "game master" wins over any that says "public"; a value the Oracle does not
    know is GM-only too, with a warning: it cannot tell, so it keeps it."""
    fm = {key_of(k): v for k, v in frontmatter.items()}
    value = fm.get("visibility")
    shown = str(value).strip().casefold() if isinstance(value, (str, int, float, bool)) or value is None else None
    if shown in GM_VISIBILITY:
        return GM, f"frontmatter visibility: {value}", ""
    if shown is None or (value is not None and shown not in PUBLIC_VISIBILITY):
        return GM, f"frontmatter visibility: {value!r}", (
            f"visibility {value!r} is not one the Oracle knows (public or gm); treated as game-master-only"
        )
    for key in [k for k in GM_FLAGS if k in fm] + [k for k in fm if k not in GM_FLAGS and marks.word(k)]:
        if fm[key] is None:
            continue
        flag = _flag(fm[key])
        if flag:
            return GM, f"frontmatter {key}: {fm[key]}", ""
        if flag is None:
            return GM, f"frontmatter {key}: {fm[key]!r}", f"{key}: {fm[key]!r} is not true or false; treated as game-master-only"
    for key in PUBLIC_FLAGS:
        if key not in fm or fm[key] is None:
            continue
        flag = _flag(fm[key])
        if flag is False:
            return GM, f"frontmatter {key}: {fm[key]}", ""
        if flag is None:
            return GM, f"frontmatter {key}: {fm[key]!r}", f"{key}: {fm[key]!r} is not true or false; treated as game-master-only"
    for key in ("tags", "tag"):
        for tag in _tags(fm.get(key)):
            if marks.word(tag):
                return GM, f"frontmatter {key}: {tag}", ""
    return PUBLIC, "", ""


def _tags(value: object) -> list[str]:
    if isinstance(value, str):
        return [t for t in re.split(r"[\s,]+", value) if t]
    return list(strings(value))
