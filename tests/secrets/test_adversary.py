"""A generated adversary: vaults that hide canary secrets in every recognised form, and check that
no canary and no game-master-only name reaches a player, on any path, while the public text
beside each secret is still found (hiding everything is not a way to pass).

Each example writes a vault: public notes (LF, CRLF, a BOM) whose paragraphs, lists, tables,
headings, quotes and callouts carry secrets in every form of README's table (comments, HTML
comments, GM callouts with metadata and folding, Admonition fences, sections under GM headings
with public text after them, Dataview fields, GM tags, `%%` in a title or alias, embeds of GM-only
notes) beside lookalike syntax that is public (`> [!info]- DM's Note`, `ad-note`, a spoiler-warning
callout); whole notes kept by a GM folder, a GM-looking folder or file name, a template, a spoiler
warning, frontmatter (valid or not, contradictory, after a blank line, TOML) or a symlink into a GM
folder; GM notes whose aliases are public names; `compendium.yaml` and `compendium.md` entries; and
a random ORACLE_PLAYER_NOTES / ORACLE_GM_NOTES, whose left-out public notes become secrets. It is
ingested with a fake Ollama that annotates every chunk and extracts its names (so GM chunks have
annotations and extracted names too), then asked as a player through search, ask (every request
sent to the model is recorded), a follow-up, who, autocomplete and status.

The dense path runs on the hashed stand-in for the model (tests/fakes/embedder.py): what a player
may read is decided by each window's visibility, whatever the vectors, and a question naming a
canary lands nearest the windows that carry its words, so no stronger pull toward a secret is lost.
The hand-written vaults (test_vault.py, test_gm_vault.py) keep the real model.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from oracle.answer.citations import Citation
from oracle.answer.prompt import Turn
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.types import Clearance
from testing.ollama_server import FakeOllama
from tests.conftest import quick_settings
from tests.secrets.test_vault import extracting_responder

SYLLABLES = ["ka", "lo", "mer", "vin", "tor", "sa", "qua", "zel", "dru", "fen", "gor", "thi", "bex", "nor", "pul"]


@dataclass
class PublicNote:
    path: str
    words: list[str] = field(default_factory=list)  # its public words
    names: list[str] = field(default_factory=list)  # the names only it gives (its person, its alias)


@dataclass
class Vault:
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # link path -> target, relative to the link
    canaries: list[str] = field(default_factory=list)  # written only in GM text, searchable by GM
    name_canaries: list[str] = field(default_factory=list)  # hidden in a note's name (`%%` in a title)
    secret_names: list[str] = field(default_factory=list)  # names only GM text gives
    public_words: list[str] = field(default_factory=list)  # written in public text: must be found
    public_names: list[str] = field(default_factory=list)
    notes: list[PublicNote] = field(default_factory=list)
    embeds: list[tuple[str, str]] = field(default_factory=list)  # GM-only notes a public note embeds, its folder
    settings: dict[str, list[str]] = field(default_factory=dict)  # player_notes / gm_notes


class Words:
    """Unique made-up words, so a canary cannot occur anywhere by chance."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.used: set[str] = set()

    def word(self, prefix: str) -> str:
        while True:
            w = prefix + "".join(self.draw(st.lists(st.sampled_from(SYLLABLES), min_size=2, max_size=3)))
            if w not in self.used:
                self.used.add(w)
                return w

    def name(self) -> str:
        return " ".join(self.word("").capitalize() for _ in range(2))


CALLOUTS = ["gm", "GM", "secret", "Secret", "dm", "DM", "private", "Private"]
# Each its own form, so that each is drawn as often as the others.
CALLOUT_FORMS = ["secrets", "gm-only", "dm-notes", "spoiler", "hidden", "gm|right", "secret|wide+", "DM|no-title-",
                 # Spellings no list names: the words are the game master's (`oracle/marks.py`).
                 "GMNote", "dmnotes", "GM_Notes"]
ADMONITIONS = ["```ad-secret", "```ad-gm", "~~~ad-spoiler"]
GM_HEADINGS = ["## GM Notes", "## DM Only", "### Secrets and Clues", "### 4. Secrets and Clues", "### Spoilers",
               "## Prep", "## DM Notes: Pointing to the island", "# GM",
               # No list names these; their words are the game master's (`policy.gm_heading`).
               "## Prep work TODO", "### GM Tips", "## Notes for the Game Master", "## Beats",
               # Spellings of the Lazy DM checklist and of GM words written as one.
               "# Secret and Clues", "## 🔑 Secrets & Clues", "## Define Secrets and Clues", "## 10 Secrets & Clues",
               "## Secrets/Clues", "## Clues and Secrets", "## Ten Secrets and Clues", "### 4 Secrets and Clues",
               "## GMNotes", "## DM Notes on the cult", "## Notes for the Keeper"]
TAGS = ["gm", "secret", "dm-only", "spoiler", "private", "gm/plot", "GM", "GMNotes", "dmnotes", "secret/cult"]
SECRET_FORMS = [
    "inline", "multiline", "list", "table", "heading", "quote", "callout", "lazy", "list-callout",
    "after-codespan", "after-fence", "after-tilde",
    *(f"callout:{t}" for t in CALLOUT_FORMS), *(f"admonition:{a}" for a in ADMONITIONS),
    "html-inline", "html-multiline", *(f"section:{h}" for h in GM_HEADINGS), "field-line", "field-list",
    "field-inline[]", "field-inline()", "tag-paragraph", "tag-list", "tag-heading", "embed-gm-note",
    # Forms that may hide the rest of the note: last in it.
    "unclosed", "after-percent", "after-backslash", "html-unclosed",
]


# Secret placements inside a public note: (lines, may anything follow it in the note).
def secret_block(draw, words: Words, vault: Vault) -> tuple[list[str], bool]:
    canary = words.word("qzc")
    name = ""
    if draw(st.booleans()):
        name = words.name()
        vault.secret_names.append(name)
    body = f"{canary} {name} knows {name} secretly".replace("  ", " ")
    callout = draw(st.sampled_from(CALLOUTS))
    fold = draw(st.sampled_from(["", "-", "+"]))
    form = draw(st.sampled_from(SECRET_FORMS))
    if form == "embed-gm-note":
        # `![[gm/Secret Name]]`: the note renders as nothing, not even its name; its canary is
        # written in the GM note (see `gm_note`'s "embedded" form), so the one here is unused.
        secret = words.name()
        vault.secret_names.append(secret)
        folder = draw(st.sampled_from(["gm/", ""]))
        vault.embeds.append((secret, folder))
        return [f"The party found a letter. ![[{folder}{secret}]]"] if draw(st.booleans()) else [
            f"![[{folder}{secret}]]"], True
    vault.canaries.append(canary)
    if form == "inline":
        return [f"They rested. %% {body} %% Then they left."], True
    if form == "multiline":
        return ["%%", body, "and more of it", "%%"], True
    if form == "list":
        return ["- bread and salt", f"- lanterns %% {body} %%", "- rope"], True
    if form == "table":
        return ["| item | note |", "| --- | --- |", f"| lantern | %% {body} %% |", "| rope | long |"], True
    if form == "heading":
        return [f"### The camp %% {body} %%"], True
    if form == "quote":
        return [f"> a traveller said %% {body} %%"], True
    if form == "callout":
        return [f"> [!{callout}]{fold} Title", f"> {body}"], True
    if form == "lazy":
        return [f"> [!{callout}]{fold}", "> the start", f"{body} continued lazily"], True
    if form == "list-callout":
        return ["- camp", f"  > [!{callout}]{fold}", f"  > {body}", "- sleep"], True
    if form == "after-codespan":
        return [f"Type `%%` for a comment. %% {body} %%"], True
    if form == "after-fence":
        return ["```c", 'printf("100%%");', "```", "", f"%% {body} %%"], True
    if form == "after-tilde":
        return ["~~~", "%% literal", "~~~", "", f"%% {body} %%"], True
    if form.startswith("callout:"):  # metadata after `|`, folding after `]`
        kind = form.removeprefix("callout:")
        kind, fold = (kind[:-1], kind[-1]) if kind[-1] in "+-" else (kind, fold)
        return [f"> [!{kind}]{fold} Title", f"> {body}"], True
    if form.startswith("admonition:"):
        opening = form.removeprefix("admonition:")
        return [opening, "title: The truth", body, opening[:3]], True
    if form == "html-inline":
        return [f"The door was locked. <!-- {body} --> They knocked."], True
    if form == "html-multiline":
        return ["<!--", body, "and more of it", "-->"], True
    if form.startswith("section:"):
        # The heading and everything under it, sub-headings too, down to the next heading of the
        # same or a higher level: the public text under that one is found again.
        heading = form.removeprefix("section:")
        level = len(heading.split()[0])
        inner = words.word("qzc")
        vault.canaries.append(inner)
        closer = "#" * draw(st.integers(1, level)) + " " + draw(st.sampled_from(["Aftermath", "Notes", "Recap"]))
        return [heading, f"- {body}", "", f"{'#' * (level + 1)} Clue delivery", f"{inner} hides below", "",
                closer], True
    if form == "field-line":
        key = draw(st.sampled_from(["secret", "gm", "dm", "DMNotes", "GM Notes"]))
        return [f"{key}:: {body}"], True
    if form == "field-list":
        key = draw(st.sampled_from(["secret", "gm", "dm", "DMNotes"]))
        return ["- bread and salt", f"- {key}:: {body}", "- rope"], True
    if form.startswith("field-inline"):
        key = draw(st.sampled_from(["gm", "dm", "secret"]))
        left, right = form.removeprefix("field-inline")
        return [f"The duke waited {left}{key}:: {body}{right} by the door."], True
    tag = draw(st.sampled_from(TAGS))
    if form == "tag-paragraph":
        return [f"{body}. #{tag}"], True
    if form == "tag-list":
        if draw(st.booleans()):  # the tagged item and its sub-items
            return ["- bread and salt", f"- the duke lies #{tag}", f"  - {body}", "- rope"], True
        return ["- bread and salt", f"- {body} #{tag}", "- rope"], True
    if form == "tag-heading":
        return [f"### The plan #{tag}", body, "", "### Aftermath"], True
    if form == "unclosed":
        return [f"%% {body}", "the rest is the game master's"], False
    if form == "html-unclosed":
        return [f"<!-- {body}", "the rest is the game master's too"], False
    if form == "after-percent":
        return [f"Prices rose 20%% this year. %% {body} %%"], False
    return [f"A \\%% sign. %% {body} %%"], False


def decoy(draw, words: Words, note: PublicNote) -> list[str]:
    """Syntax that looks like a secret and is not: it must hide nothing (its word is found)."""
    word = words.word("pub")
    note.words.append(word)
    return draw(st.sampled_from([
        ["> [!note] A public callout", f"> nothing hidden here but {word}"],
        ["> [!tip]", f"> a tip for the party: {word}"],
        [f"> a plain quote about {word}"],
        [f"Use `%%` in code for {word}."],
        ["```", "%% literal in a fence %%", "```", "", f"After the fence, {word}."],
        [f"The tax is 50% of the {word} harvest."],
        [f"- a [!gm] written in a list with {word}"],
        # adventure-log: the DM's remarks players may read; a callout's title is not its type.
        ["> [!INFO]- DM's Note", f"> I improvised the {word} at the table."],
        ["> [!info|right] Spoilers for the players", f"> the {word} is public"],
        ["> [!WARNING] Below is a backstory. Spoiler warning!", f"> the {word} story"],
        ["```ad-note", "title: DM's note", f"the {word} is public", "```"],
        ["## Notes", f"- the {word} was found"],
        # Story names that borrow a mark's word are no marks (`oracle/marks.py`).
        ["## Hidden Valley", f"The {word} lies past the ridge."],
        ["### The Secret Garden", f"Roses and {word} grow there."],
        ["## Planning the Heist", f"We drew a map of the {word}."],
        ["## Secrets of the Deep", f"The {word} sank in the storm."],
        [f"The {word} works for the agency. #secret-service"],
        ["> [!note] Private Quill", f"> the scribe keeps the {word}"],
    ]))


def public_note(draw, words: Words, vault: Vault, path: str) -> None:
    note = PublicNote(path)
    name = words.name()
    note.names.append(name)
    blocks: list[list[str]] = []
    first = words.word("pub")
    note.words.append(first)
    blocks.append([f"The party met {name} and spoke of {first} at length."])
    closing: list[str] | None = None
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            blocks.append(decoy(draw, words, note))
        lines, open_after = secret_block(draw, words, vault)
        if not open_after:
            closing = lines
            break
        blocks.append(lines)
        beside = words.word("pub")
        note.words.append(beside)
        blocks.append([f"Afterwards {name} remembered the {beside} clearly."])
    if closing:
        blocks.append(closing)
    frontmatter = ""
    how = draw(st.sampled_from(["none", "alias", "title-comment", "alias-comment"]))
    if how != "none":
        alias = words.word("").capitalize()
        note.names.append(alias)
        hidden = words.word("qzc")
        fm = {
            "alias": f"aliases: [{alias}]\ntags: [pc]\n",
            # `%%` in a title or an alias is removed from the name: the rest is the note's name.
            "title-comment": f"title: {alias} %% {hidden} %%\n",
            "alias-comment": f"aliases: [\"{alias} %% {hidden} %%\"]\n",
        }[how]
        if how != "alias":
            vault.name_canaries.append(hidden)
        frontmatter = f"---\n{fm}---\n"
    text = frontmatter + "\n\n".join("\n".join(b) for b in blocks) + "\n"
    vault.files[path] = encode(draw, text)
    vault.notes.append(note)


def encode(draw, text: str) -> bytes:
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    data = text.encode("utf-8")
    return b"\xef\xbb\xbf" + data if draw(st.booleans()) else data


# Whole notes kept from players: where they are, or what their frontmatter or first line says.
GM_FOLDERS = ["GM Notes", "DM Notes", "_gm", "GM-only", "Z - DM Only", "Campaign/99 - GM", "Campaign/DM Prep",
              "Spoilers", "Secrets and Clues", "Session Prep", "GMNotes", "DMStuff", "01 - GM Notes", "📜 Prep"]
GM_FRONTMATTER = {
    "fm": "visibility: gm\n", "fm-true": "gm: true\n", "fm-private": "private: true\n",
    "fm-public-false": "public: false\n", "fm-publish-false": "publish: false\n", "fm-hidden": "hidden: true\n",
    "fm-spoiler": "spoiler: true\n", "fm-gm-only": "gm-only: true\n", "fm-key-case": "DM: True\n",
    "fm-tags-gm": "tags: [gm]\n", "fm-tags-secret": "tags: [secret]\n", "fm-tags-dm-only": "tags: [dm-only]\n",
    "fm-tag": "tag: dm-only\n", "fm-tags-nested": "tags:\n  - npc\n  - gm/plot\n", "fm-tags-joined": "tags: [GMNotes]\n",
    "fm-key-joined": "GMNotes: true\n",
    "fm-duplicate": "visibility: gm\nvisibility: public\n", "fm-contradicts": "public: true\nprivate: true\n",
}
GM_NOTE_FORMS = [
    "folder", "nested", "dm-folder", "fm-colon", "fm-nospace", "fm-tab", "fm-unknown", "fm-unclosed", "link",
    *GM_FRONTMATTER, "fm-after-blank", "toml", *(f"folder:{f}" for f in GM_FOLDERS), "todo", "session-prep-file",
    "template", "templater", "spoiler-warning", "eyes-only",
]


def gm_note(draw, words: Words, vault: Vault, n: int, embedded: tuple[str, str] = ("", "")) -> None:
    canary = words.word("qzc")
    secret = embedded[0] or words.name()
    vault.canaries.append(canary)
    if not embedded[0]:
        vault.secret_names.append(secret)
    body = f"{canary}: {secret} and {secret} plot in the dark.\n"
    alias = draw(st.sampled_from(vault.public_names)) if vault.public_names and draw(st.booleans()) else ""
    aliases = f"aliases: [{alias}]\n" if alias else ""
    if embedded[0]:  # a GM-only note a public note embeds: by its GM folder, or by its frontmatter
        if embedded[1] == "gm/" or draw(st.booleans()):
            vault.files[f"gm/{secret}.md"] = encode(draw, body)
        else:
            vault.files[f"world/{secret}.md"] = encode(draw, f"---\nvisibility: gm\n---\n{body}")
        return
    how = draw(st.sampled_from(GM_NOTE_FORMS))
    with_aliases = f"---\n{aliases}---\n{body}" if aliases else body
    if how == "folder":
        vault.files[f"gm/{secret}.md"] = encode(draw, with_aliases)
    elif how == "nested":
        vault.files[f"world/gm/{secret}.md"] = encode(draw, body)
    elif how == "dm-folder":
        vault.files[f"DM/{secret}.md"] = encode(draw, body)
    elif how == "link":
        vault.files[f"secrets/{secret}.md"] = encode(draw, body)
        vault.links[f"lore/mirror-{n}.md"] = f"../secrets/{secret}.md"
    elif how.startswith("folder:"):
        vault.files[f"{how.removeprefix('folder:')}/{secret}.md"] = encode(draw, with_aliases)
    elif how == "todo":
        vault.files["TODO.md" if "TODO.md" not in vault.files else f"plans-{n}/TODO.md"] = encode(draw, f"- [ ] {body}")
    elif how == "session-prep-file":
        vault.files[f"Session {5 + n} Prep (GM).md"] = encode(draw, f"## Strong Start\n{body}")
    elif how == "template":
        vault.files[f"{draw(st.sampled_from(['Templates', 'templater']))}/{secret}.md"] = encode(draw, body)
    elif how == "templater":
        vault.files[f"misc/{secret}.md"] = encode(draw, f"Created <% tp.date.now() %>\n\n{body}")
    elif how in {"spoiler-warning", "eyes-only"}:
        first = "# Danger! Big Spoilers! Do Not Read!" if how == "spoiler-warning" else draw(
            st.sampled_from(["GM eyes only", "# DM eyes only"]))
        vault.files[f"misc/{secret}.md"] = encode(draw, f"{first}\n\n{body}")
    elif how == "fm-after-blank":
        vault.files[f"world/{secret.replace(' ', '_')}.md"] = encode(draw, f"\n---\nvisibility: gm\n---\n{body}")
    elif how == "toml":
        vault.files[f"world/{secret.replace(' ', '_')}.md"] = encode(draw, f'+++\nvisibility = "gm"\n+++\n{body}')
    else:
        fm = {
            **{k: v + (aliases if k in {"fm", "fm-true", "fm-private", "fm-public-false"} else "")
               for k, v in GM_FRONTMATTER.items()},
            "fm-colon": f"title: {secret}: a traitor\nvisibility: gm\n",
            "fm-nospace": "visibility:gm\n",
            "fm-tab": "visibility:\tgm\n",
            "fm-unknown": "visibility: hidden\n",
            "fm-unclosed": "visibility: gm\n",
        }[how]
        end = "" if how == "fm-unclosed" else "---\n"
        vault.files[f"world/{secret.replace(' ', '_')}.md"] = encode(draw, f"---\n{fm}{end}{body}")


def compendium(draw, words: Words, vault: Vault) -> None:
    entries, md_entries = [], []
    for _ in range(draw(st.integers(1, 2))):
        secret = words.name()
        vault.secret_names.append(secret)
        alias = draw(st.sampled_from(vault.public_names))
        flag = draw(st.sampled_from(["gm: true", "visibility: gm", "visibility: secret", "dm: yes",
                                     "private: true", "public: false"]))
        entries.append(f"- name: {secret}\n  {flag}\n  aliases: [{alias}]\n")
    secret = words.name()
    vault.secret_names.append(secret)
    md_entries.append(f"  - name: {secret}\n    aliases: [{draw(st.sampled_from(vault.public_names))}]\n")
    vault.files["compendium.yaml"] = "".join(entries).encode()
    vault.files["compendium.md"] = f"---\nvisibility: gm\nentities:\n{''.join(md_entries)}---\n".encode()


def policy(draw, vault: Vault) -> None:
    """A game master's ORACLE_PLAYER_NOTES / ORACLE_GM_NOTES over the public notes: those it leaves
    out become the game master's (their words and names must no longer reach a player). At least one
    public note stays readable, so the public words still found prove nothing is hidden wholesale.
    The patterns name only the public notes' folders and files: listing a GM-looking note would
    show it to players, by the spec."""
    def unit(path: str) -> str:
        return path.split("/")[0] if "/" in path else path

    units = sorted({unit(n.path) for n in vault.notes})
    mode = draw(st.sampled_from(["none", "player_notes", "gm_notes", "both"]))
    readable = {n.path for n in vault.notes}
    if mode in {"player_notes", "both"}:
        keep = draw(st.lists(st.sampled_from(units), min_size=1, max_size=len(units), unique=True))
        patterns = []
        for u in keep:
            if u.endswith(".md"):
                patterns.append(draw(st.sampled_from([u, u.lower(), u.upper()[:-3] + ".md", f"**/{u}"])))
            else:
                # `*` stays within a folder: `{u}/*.md` names the unit's notes only when none is deeper.
                flat = all(n.path.count("/") == 1 for n in vault.notes if unit(n.path) == u)
                files = f"{u}/*.md" if flat else f"{u}/**/*.md"
                patterns.append(draw(st.sampled_from([u, f"{u}/", f"{u}/**", u.upper(), files])))
        vault.settings["player_notes"] = patterns
        readable = {p for p in readable if unit(p) in keep}
    if mode in {"gm_notes", "both"} and len(readable) > 1:
        target = draw(st.sampled_from(sorted(readable)))
        name = target.rsplit("/", 1)[-1]
        vault.settings["gm_notes"] = [draw(st.sampled_from([target, target.swapcase(), f"**/{name}"]))]
        readable.discard(target)
    for note in vault.notes:
        if note.path in readable:
            vault.public_words += note.words
            vault.public_names += note.names
        else:  # the game master's now: GM search finds its words, players never see them
            vault.canaries += note.words
            vault.secret_names += note.names


@st.composite
def vaults(draw) -> Vault:
    words = Words(draw)
    vault = Vault()
    folders = ["sessions/Session {n}.md", "sheets/{w}.md", "world/{w}.md", "lore/{w}.md", "{w}.md",
               # Names that borrow a mark's word and are public all the same.
               "Hidden Realms/{w}.md", "Session Notes/Session {n} - Planning the Heist.md", "characters/gm-{w}.md",
               "01 - session-notes/Tempus Session {n} (2023-04-05).md", "02 - characters/allies/{w}.md"]
    for n in range(1, draw(st.integers(2, 4)) + 1):
        path = draw(st.sampled_from(folders)).format(n=n, w=words.word("").capitalize())
        public_note(draw, words, vault, path)
    vault.public_names = [name for note in vault.notes for name in note.names]  # for GM aliases
    for n in range(draw(st.integers(1, 4))):
        gm_note(draw, words, vault, n)
    for n, embedded in enumerate(vault.embeds):
        gm_note(draw, words, vault, 100 + n, embedded=embedded)
    if draw(st.booleans()):
        compendium(draw, words, vault)
    vault.public_names = []
    policy(draw, vault)
    return vault


def write(vault: Vault, root: Path) -> Path:
    notes = root / "notes"
    for rel, data in vault.files.items():
        path = notes / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for rel, target in vault.links.items():
        (notes / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, notes / rel)
    return notes


def secret_pattern(vault: Vault) -> re.Pattern[str]:
    """Every canary and every name only GM text gives, as whole words: a left-out note's `pubkaka`
    is not found inside a public `pubkakaka`, nor an alias `Kalomer` inside `pubkalomer`. A word
    right after an escape (`\\nKalomer` in JSON) still counts as whole."""
    start, end = r"(?:(?<![a-z])|(?<=\\[nrt]))", r"(?![a-z])"
    secrets = vault.canaries + vault.name_canaries + [n for n in vault.secret_names if n not in vault.public_names]
    return re.compile("|".join(start + re.escape(x) + end for x in secrets), re.I)


def assert_clean(pattern: re.Pattern[str], thing: object, where: str, *echoes: str) -> None:
    """No secret in `thing`, but for the player's own questions echoed back (`echoes`, the thread's
    turns among them): a player who asks about a secret name has not learned it from the Oracle. A
    word of a question standing alone as a value counts as echoed too: a trace names the word that
    matched a public name as a typo (`"matched": "qzclonorthi"` for the alias "Lonorthi"), and that
    word is the player's; the same word inside a longer text (a chunk, an answer) is still caught."""
    text = thing if isinstance(thing, str) else json.dumps(thing, ensure_ascii=False, default=str)
    for echo in filter(None, echoes):
        text = text.replace(echo, "")
        if not isinstance(thing, str):
            for word in set(re.findall(r"\w+", echo)):
                text = re.sub(re.escape(json.dumps(word, ensure_ascii=False)), '""', text, flags=re.I)
    found = pattern.findall(text)
    assert [] == found, f"{where} shows a player {found}"


async def attack(vault: Vault, root: Path, embedder) -> None:
    notes = write(vault, root)
    secret = secret_pattern(vault)
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        fake.responder = extracting_responder
        settings = quick_settings(notes, root / "data", fake.url, **vault.settings)
        async with Index(settings, embedder=embedder) as index:
            await ingest(index)
            oracle = Oracle(index)
            # The canaries are indexed: the game master finds every one (the test is not vacuous).
            for canary in vault.canaries:
                found = await oracle.search(f"what about {canary}?", clearance=Clearance.GM)
                assert any(canary in h.chunk.text for h in found.pool), f"{canary} not indexed"
            # The public text beside each secret is still there for players.
            for word in vault.public_words:
                found = await oracle.search(f"tell me about the {word}")
                assert any(word in h.chunk.text for h in found.fused), f"public {word} lost"
                assert_clean(secret, found.to_json(), "search")
            shown: list[str] = []  # what a player reads while the model writes

            async def show(text: str) -> None:
                shown.append(text)

            walked: Counter[str] = Counter()  # searches that went on (back) from a passage told last, each way
            for question in [f"what about {c}?" for c in vault.canaries] + [
                f"who is {n} really?" for n in vault.public_names + vault.secret_names
            ]:
                fake.reset()
                fake.responder = extracting_responder
                assert_clean(secret, (await oracle.search(question)).to_json(), "search", question)
                shown.clear()
                answer = await oracle.ask(question, on_text=show)
                assert_clean(secret, answer.to_json(), "ask", question)
                history = [Turn("user", question), Turn("assistant", answer.text, answer.told)]
                followup = await oracle.ask("and then what?", history=history, on_text=show)
                assert_clean(secret, followup.to_json(), "a follow-up", question)
                # A game master's answer in the thread told a passage of theirs: a player's "and
                # then?" never goes on (back) from it.
                gm_told = [h.chunk.id for h in (await oracle.search(question, clearance=Clearance.GM)).pool
                           if secret.search(h.chunk.text)][:2]
                for told, way in itertools.product(gm_told, ("and then?", "and before that?")):
                    went_on = await oracle.search(way, history=[question], told=told)
                    assert_clean(secret, went_on.to_json(), f"'{way}' from the GM's passage", question)
                    assert told != went_on.told
                    walked["from the GM's passage"] += 1
                # Each "and then?" walks one passage on through the notes, each "and before that?" one
                # back: never into the GM's.
                for step, way in itertools.product(range(1, 3), ("and then?", "and before that?")):
                    went_on = await oracle.search(way, history=[question] + [way] * step)
                    assert_clean(secret, went_on.to_json(), f"'{way}' × {step + 1}", question)
                    walked[way] += went_on.told is not None
                # What came next (before) of someone goes on (back) through the passages that name them.
                for name, way in itertools.product(vault.public_names + vault.secret_names, ("after", "before")):
                    asked = f"and what did {name} do {way} that?"
                    went_on = await oracle.search(asked, history=[question])
                    assert_clean(secret, went_on.to_json(), f"what came {way} of someone", question, asked)
                    walked[way] += went_on.told is not None
                assert_clean(secret, shown, "an answer as it is written", question)
                assert_clean(secret, [r.body for r in fake.requests], "a request to Ollama", question)
            assert {"and then?", "and before that?", "after", "before", "from the GM's passage"} == set(+walked), \
                f"a walk never taken: {walked}"
            for name in vault.public_names + vault.secret_names:
                dossier = await oracle.dossiers.who(name)
                assert_clean(secret, dossier.to_json() if dossier else None, f"who {name}")
                for prefix in (name[:2], name.split()[-1][:3]):
                    assert_clean(secret, await oracle.dossiers.names(prefix), "autocomplete")
            assert_clean(secret, await oracle.dossiers.names("", limit=10_000), "autocomplete")
            assert_clean(secret, (await index_status(oracle.index, clearance=Clearance.PLAYER)).to_json(), "status")
            # Show sources: a player clicking it under a game master's answer re-reads every cited
            # place with a player's clearance.
            gm_places = {Citation(h.chunk.label, h.chunk.path, h.chunk.start_line, h.chunk.end_line)
                         for c in vault.canaries for h in (await oracle.search(f"what about {c}?", clearance=Clearance.GM)).pool}
            cited = await oracle.cited(sorted(gm_places, key=str), clearance=Clearance.PLAYER)
            assert_clean(secret, [c.text for c in cited], "show sources")
            # The recap of every session, its autocomplete and what players are told is new.
            async with index.snapshot() as store:
                titles = await store.titles(Clearance.PLAYER)
            assert_clean(secret, [(t.label, t.title) for t in titles], "recap autocomplete, announcements")
            fake.reset()
            fake.responder = extracting_responder
            for label in {t.label for t in titles if t.label.startswith("Session ")} | {""}:
                assert_clean(secret, (await oracle.recap(label or None)).to_json(), f"recap {label}")
            assert_clean(secret, [r.body for r in fake.requests], "a recap's request to Ollama")


@pytest.mark.slow  # twenty vaults, each ingested and attacked on every path: over 20 s
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(vault=vaults(), run=st.integers(0, 10**9))
def test_a_generated_vault_never_shows_a_player_a_secret(vault, run, tmp_path_factory, quick_embedder):
    root = tmp_path_factory.mktemp(f"adversary{run}")
    asyncio.run(attack(vault, root, quick_embedder))


def test_the_generator_makes_every_form():
    """The adversary is only as good as what it generates: every form must be reachable. Derandomized:
    Hypothesis's examples are correlated, so a random run may miss a rare form by chance; a fixed
    seed proves each reachable without making this test flaky."""
    seen: set[str] = set()

    class EveryForm(Exception):
        """Every form was seen: the remaining examples could add nothing to `seen`."""

    # No shrink phase: the stop below is not a failure to minimise; the examples generated, in their
    # order, are the derandomized run's own.
    @settings(max_examples=1000, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(vaults())
    def collect(vault: Vault) -> None:
        # Each file as a line naming its path (\0FILE path), then its text.
        text = "".join(f"\0FILE {path}\n{data.decode('utf-8', 'replace')}\n" for path, data in vault.files.items())
        for form, pattern in FORMS.items():
            if re.search(pattern, text, re.M):
                seen.add(form)
        seen.update(form for form, present in {
            "symlink": bool(vault.links),
            "player_notes": "player_notes" in vault.settings,
            "gm_notes": "gm_notes" in vault.settings,
            "player_notes and gm_notes": len(vault.settings) == 2,
            "a public note the policy leaves out": any(w.startswith("pub") for w in vault.canaries),
        }.items() if present)
        if set(FORMS) <= seen:
            raise EveryForm

    with contextlib.suppress(EveryForm):
        collect()
    assert [] == sorted(set(FORMS) - seen)


GM_HEADING_NAMES = "|".join(re.escape(h.split(" ", 1)[1]) for h in GM_HEADINGS)
FORMS = {
    # `%%` comments, and what shifts their pairing
    "inline": r"They rested\. %%", "multiline": r"^%%\r?$", "list": r"^- lanterns %%", "table": r"^\| lantern \| %%",
    "heading": r"^### The camp %%", "quote": r"^> a traveller said %%", "codespan": r"`%%` for a comment",
    "fence": r"100%%", "tilde": r"^~~~\r?$", "unclosed": r"the rest is the game master's\r?$", "percent": r"20%%",
    "backslash": r"\\%%", "crlf": r"\r\n", "bom": "\ufeff",
    # callouts: types, metadata, folding, lazy lines, in a list
    "callout": r"^> \[!\w+\][-+]? Title", "lazy": r"continued lazily", "list-callout": r"^  > \[!",
    "callout gm|right": r"^ *> \[!gm\|right\]", "callout secret|wide folded open": r"^ *> \[!secret\|wide\]\+",
    **{f"callout [!{t}]": rf"^ *> \[!{re.escape(t)}\]"
       for t in ["secrets", "gm-only", "dm-notes", "spoiler", "hidden"]},
    # lookalikes that must stay public (their words are checked as found)
    "decoy": r"\[!note\]|\[!tip\]|50%", "decoy DM's Note": r"^> \[!INFO\]- DM's Note",
    "decoy [!info|right]": r"^> \[!info\|right\]",
    "decoy spoiler warning callout": r"^> \[!WARNING\].*Spoiler warning!",
    "decoy ad-note": r"^```ad-note", "decoy ## Notes": r"^## Notes\r?\n- the pub",
    # Admonition fences, HTML comments
    "```ad-secret": r"^```ad-secret", "```ad-gm": r"^```ad-gm\r?$", "~~~ad-spoiler": r"^~~~ad-spoiler",
    "html one line": r"locked\. <!-- qzc", "html several lines": r"^<!--\r?$",
    "html unclosed": r"^<!-- qzc.*\r?\nthe rest",
    # sections under GM headings, a sub-heading inside, public text after a same or higher heading
    **{f"section {h}": rf"^{re.escape(h)}\r?$" for h in GM_HEADINGS},
    "section sub-heading": r"^#+ Clue delivery",
    "section then same level": rf"^(#+) (?:{GM_HEADING_NAMES})\r?\n(?:.*\n){{5}}\1 (?:Aftermath|Notes|Recap)",
    "section then higher level": rf"^(#+)#+ (?:{GM_HEADING_NAMES})\r?\n(?:.*\n){{5}}\1 (?:Aftermath|Notes|Recap)",
    # Dataview fields, tags
    "field line": r"^(?:secret|gm|dm):: qzc", "field list item": r"^- (?:secret|gm|dm):: qzc",
    "field [gm:: ]": r"\[(?:gm|dm|secret):: qzc", "field (dm:: )": r"\((?:gm|dm|secret):: qzc",
    "tag paragraph": r"secretly\. #", "tag list item": r"^- qzc.* #[\w/-]+\r?$",
    "tag list item sub-items": r"^- the duke lies #",
    "tag heading": r"^### The plan #", "#gm": r" #gm\r?$", "#secret": r" #secret\r?$", "#dm-only": r" #dm-only\r?$",
    # `%%` in a note's name
    "title with %%": r"^title: \w+ %% qzc", "alias with %%": r'^aliases: \["\w+ %% qzc',
    # whole notes: frontmatter
    "frontmatter-gm": r"^visibility: gm", "frontmatter-broken": r"^title: .*: a traitor",
    **{f"frontmatter {k}": "^" + r"\r?\n".join(map(re.escape, v.splitlines())) for k, v in GM_FRONTMATTER.items()},
    "frontmatter after a blank line": r"^\0FILE [^\n]*\n\ufeff?\r?\n---\r?\nvisibility: gm",
    "toml +++": r'^\ufeff?\+\+\+\r?\nvisibility = "gm"',
    # whole notes: folders, names, templates, spoiler warnings, symlinks
    **{f"folder {f}/": rf"^\0FILE {re.escape(f)}/" for f in GM_FOLDERS},
    "gm/ folder": r"^\0FILE gm/", "nested gm/": r"^\0FILE world/gm/", "DM/ folder": r"^\0FILE DM/",
    "TODO.md": r"^\0FILE (?:plans-\d+/)?TODO\.md", "Session 5 Prep (GM).md": r"^\0FILE Session \d+ Prep \(GM\)\.md",
    "template folder": r"^\0FILE (?:Templates|templater)/", "templater tags": r"<% tp\.date\.now\(\) %>",
    "spoiler warning": r"^\ufeff?# Danger! Big Spoilers! Do Not Read!", "eyes only": r"^\ufeff?(?:# )?[GD]M eyes only",
    "symlink": r"$^",
    # embeds of GM-only notes
    "embed ![[gm/…]]": r"!\[\[gm/", "embed ![[name]]": r"!\[\[[A-Z][a-z]+ [A-Z]",
    # Compendium
    "compendium-yaml": r"^- name: .*\n  (gm|visibility|dm)", "compendium private": r"^  private: true",
    "compendium public: false": r"^  public: false", "compendium-md": r"^entities:",
    # the game master's policy
    "player_notes": r"$^", "gm_notes": r"$^", "player_notes and gm_notes": r"$^",
    "a public note the policy leaves out": r"$^",
}
