"""The Compendium: entities, their aliases, and the chunks that mention them.

Sources, in order of trust: frontmatter aliases and the notes they sit on; an optional
`compendium.yaml`; names the LLM extracted at ingest (kept only if the chunk really contains them);
recurring proper nouns found deterministically, so the entity path works without an LLM.

Visibility is tracked per alias and per mention: a mention is public only when a public name
matched in a public chunk, so a secret alias can never link a player's question to a passage.
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import yaml

from ..notes.parse import frontmatter_visibility
from ..text import normalize, text_words
from ..types import GM, PUBLIC, ChunkText, EntitySource

SOURCE_TRUST = {"frontmatter": 0, "compendium": 1, "llm": 2, "proper-noun": 3}

# Capitalised words that are not names: sentence starters are filtered by the corpus itself
# (a word also seen in lower case is common), these are the ones that never are.
_NOT_NAMES = {
    "i", "i'm", "i'd", "i'll", "i've", "ok", "okay", "mr", "mrs", "ms", "dr", "st", "session",
    "part", "chapter", "act", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "january", "february", "march", "april", "may", "june", "july", "august",
    "september", "october", "november", "december", "gm", "dm", "pc", "npc", "hp", "ac", "dc",
    "xp", "gp", "sp", "cp", "tl", "note", "notes", "loot", "recap", "summary",
}
_CONNECTORS = {"of", "the", "de", "del", "la", "le", "von", "van", "du", "des", "da", "di", "y"}
_TOKEN = re.compile(r"[^\W\d_][\w'’\-]*")
_ARTICLES = {"the", "a", "an", "el", "los", "las", "les"}
_OPENERS = re.compile(r"(?:[.!?:;]|\n)[\s#>*_\-\[(\"'“‘]*$")


def _starts_sentence(text: str, pos: int) -> bool:
    """Whether the word at `pos` opens a sentence, a line or a heading."""
    before = text[max(0, pos - 40) : pos]
    return bool(_OPENERS.search(("\n" if pos <= 40 else "") + before))


@dataclass
class Entity:
    name: str
    kind: str
    source: str
    note_path: str | None
    visibility: str
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> visibility

    @property
    def norm(self) -> str:
        return normalize(self.name)

    def names(self) -> dict[str, str]:
        """Every name (canonical first) with the visibility of its best source."""
        return {self.name: self.visibility, **{a: v for a, v in self.aliases.items() if a != self.name}}


@dataclass(frozen=True)
class Mention:
    entity: int  # index into the entity list
    chunk_id: str
    count: int
    visibility: str


@dataclass
class _Candidate:
    """A capitalised run seen so far: as first written, the chunks that write it, whether one is public."""

    name: str
    chunks: set[str] = field(default_factory=set)
    public: bool = False


def _upgrade(current: str, new: str) -> str:
    return PUBLIC if PUBLIC in (current, new) else GM


def merge_sources(sources: Iterable[EntitySource]) -> list[Entity]:
    """Merge named sources into entities, most trusted first; a name seen twice is one entity."""
    entities: list[Entity] = []
    by_norm: dict[str, int] = {}
    for src in sorted(sources, key=lambda s: SOURCE_TRUST.get(s.source, 9)):
        norm = normalize(src.name)
        if not norm:
            continue
        names = [src.name, *src.aliases]
        index = next((by_norm[normalize(n)] for n in names if normalize(n) in by_norm), None)
        if index is None:
            index = len(entities)
            entities.append(Entity(src.name, src.kind, src.source, src.note_path, src.visibility))
        entity = entities[index]
        entity.visibility = _upgrade(entity.visibility, src.visibility)
        for name in names:
            n = normalize(name)
            if not n or len(n) < 2:
                continue
            if name != entity.name:
                entity.aliases[name] = _upgrade(entity.aliases.get(name, GM), src.visibility)
            by_norm.setdefault(n, index)
    return entities


def lowercase_vocabulary(chunks: Sequence[ChunkText]) -> set[str]:
    """Every word the notes write in lower case somewhere: common words, not names."""
    vocab: set[str] = set()
    for chunk in chunks:
        vocab.update(t for t in _TOKEN.findall(chunk.text) if t[0].islower())
    return vocab


def proper_nouns(
    chunks: Sequence[ChunkText], lower_vocab: set[str] | None = None, *, min_chunks: int = 2
) -> list[EntitySource]:
    """Recurring capitalised names, found without a model.

    A word also written in lower case somewhere in the notes is a common word at a sentence start,
    not a name; a name must recur in at least `min_chunks` chunks.
    """
    if lower_vocab is None:
        lower_vocab = lowercase_vocabulary(chunks)
    found: dict[str, _Candidate] = {}
    weak: list[tuple[str, ChunkText]] = []
    for chunk in chunks:
        for run, strong in _capitalised_runs(chunk.text, lower_vocab):
            if not strong:
                weak.append((run, chunk))
                continue
            entry = found.setdefault(normalize(run), _Candidate(run))
            entry.chunks.add(chunk.id)
            entry.public = entry.public or chunk.visibility == PUBLIC
    # A word opening a sentence counts only for a name also seen mid-sentence.
    for run, chunk in weak:
        known = found.get(normalize(run))
        if known is not None:
            known.chunks.add(chunk.id)
            known.public = known.public or chunk.visibility == PUBLIC
    return [
        EntitySource(e.name, (), "name", "proper-noun", None, PUBLIC if e.public else GM)
        for e in found.values()
        if len(e.chunks) >= min_chunks
    ]


def _capitalised_runs(text: str, lower_vocab: set[str]) -> Iterator[tuple[str, bool]]:
    """Candidate names, each with whether it is strong evidence (False: one word opening a sentence)."""
    run: list[re.Match[str]] = []

    def emit() -> Iterator[tuple[str, bool]]:
        words = [m.group().strip("'’-") for m in run]
        words[-1] = re.sub(r"['’]s$", "", words[-1])  # "Hobb's" names Hobb
        opens_sentence = _starts_sentence(text, run[0].start())
        if opens_sentence and words[0].lower() in lower_vocab:
            words.pop(0)  # capitalised only because it opens a sentence: "After Mirela left"
        while words and (words[0].lower() in _ARTICLES | _CONNECTORS | _NOT_NAMES):
            words.pop(0)  # "The Mourning Lantern", "Pay the Tithe"
        while words and words[-1].lower() in _CONNECTORS:
            words.pop()
        if len(words) >= 2:  # capitalised words together: "Mourning Lantern", "Red Lanyards"
            yield " ".join(words), True
        elif words and len(words[0]) >= 3 and words[0].lower() not in lower_vocab and words[0].lower() not in _NOT_NAMES:
            yield words[0], not opens_sentence  # a line opening "Appearance" is a heading, not a name
        if len(words) >= 3 and words[1].lower() not in _CONNECTORS:
            yield " ".join(words[1:]), True  # "Captain Dunstan Vale" is also "Dunstan Vale"

    for m in _TOKEN.finditer(text):  # one at a time: a chunk's every word never lives at once
        word = m.group()
        adjacent = bool(run) and re.fullmatch(r"[ \t]+", text[run[-1].end() : m.start()] or "x")
        if word[0].isupper():
            if run and not adjacent:
                yield from emit()
                run = []
            run.append(m)
        elif word.lower() in _CONNECTORS and run and adjacent:
            run.append(m)
        else:
            if run:
                yield from emit()
            run = []
    if run:
        yield from emit()


_NAMED_KINDS = frozenset({"sheet", "world"})  # a character's, a place's or a thing's own note


def adopt_name_parts(entities: list[Entity], lower_vocab: Iterable[str] = frozenset()) -> list[Entity]:
    """A word of exactly one noted entity's full name becomes its alias: players say "Aldous" for
    "Brother Aldous". Only words the notes never write in lower case ("brother" is a common word),
    and never a word two full names share, unless only one of them is a character's or a place's.
    A proper-noun entity that is such a word merges into it.
    """
    owners: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(entities):
        if e.source != "proper-noun" and e.note_path:
            for word in dict.fromkeys(e.name.split()):
                norm = normalize(word)
                if len(norm) >= 3 and norm not in _CONNECTORS and norm not in _NOT_NAMES:
                    owners[norm].append(i)
    for norm, owner in owners.items():
        # "Thinora" is the character's, not the encounter's named after her ("Thinora at Monastary").
        named = [i for i in owner if entities[i].kind in _NAMED_KINDS]
        if len(owner) > 1 and len(named) == 1:
            owners[norm] = named
    lower = {normalize(w) for w in lower_vocab}
    for norm, owner in owners.items():
        if len(owner) == 1 and norm not in lower:
            target = entities[owner[0]]
            word = next(w for w in target.name.split() if normalize(w) == norm)
            if word != target.name:
                target.aliases.setdefault(word, target.visibility)
    keep: list[Entity] = []
    for e in entities:
        owned_by = owners.get(e.norm)
        if e.source == "proper-noun" and owned_by and len(owned_by) == 1:
            target = entities[owned_by[0]]
            target.aliases[e.name] = _upgrade(target.aliases.get(e.name, GM), e.visibility)
        else:
            keep.append(e)
    return keep


def find_mentions(entities: Sequence[Entity], chunks: Sequence[ChunkText], note_stems: dict[str, int]) -> list[Mention]:
    """Chunks that name each entity (by any name, or by a wikilink to its note)."""
    names: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for i, e in enumerate(entities):
        for name, visibility in e.names().items():
            n = normalize(name)
            if len(n) >= 2:
                names[n].append((i, visibility))
    if not names:
        return []
    # Longest match first, word by word: a dictionary lookup per word instead of one regex
    # alternation over every name, which grows with the campaign.
    longest = max(len(n.split(" ")) for n in names)
    first_words = {n.split(" ")[0] for n in names}
    mentions: list[Mention] = []
    for chunk in chunks:
        counts: Counter[tuple[int, str]] = Counter()
        words = text_words(f"{chunk.head}\n{chunk.text}")
        i = 0
        while i < len(words):
            if words[i] in first_words:
                for size in range(min(longest, len(words) - i), 0, -1):
                    key = " ".join(words[i : i + size])
                    if key in names:
                        for entity, visibility in names[key]:
                            counts[(entity, visibility)] += 1
                        i += size - 1
                        break
            i += 1
        for target in chunk.links:
            linked = note_stems.get(normalize(target.partition("#")[0]))
            if linked is not None:
                counts[(linked, entities[linked].visibility)] += 1
        per_entity: dict[int, tuple[int, str]] = {}
        for (entity, visibility), count in counts.items():
            total, best = per_entity.get(entity, (0, GM))
            per_entity[entity] = (total + count, _upgrade(best, visibility))
        for entity, (count, visibility) in per_entity.items():
            shown = PUBLIC if visibility == PUBLIC and chunk.visibility == PUBLIC else GM
            mentions.append(Mention(entity, chunk.id, count, shown))
    return mentions


def read_compendium_file(name: str, data: str, visibility: str = PUBLIC) -> list[EntitySource]:
    """`compendium.yaml` (a list of {name, aliases, kind}, or a map with `entities:`) or
    `compendium.md` with it in frontmatter. The file's own `visibility: gm` (a map's key, or the
    Markdown file's frontmatter) makes every entry GM-only; an entry's own key makes it GM-only;
    a value that cannot be read as public is GM-only (see `frontmatter_visibility`)."""
    if name.endswith(".md"):
        if not data.startswith("---"):
            return []
        data = data.split("\n---", 1)[0].removeprefix("---")
    loaded = yaml.safe_load(data) or []
    if isinstance(loaded, dict):
        lowered = {str(k).lower(): v for k, v in loaded.items()}
        if frontmatter_visibility(lowered)[0] == GM:
            visibility = GM
        loaded = lowered.get("entities", [])
    sources = []
    for item in loaded if isinstance(loaded, list) else []:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not item.get("name"):
            continue
        aliases = item.get("aliases") or item.get("alias") or []
        if isinstance(aliases, str):
            aliases = [aliases]
        hidden = frontmatter_visibility({str(k).lower(): v for k, v in item.items()})[0] == GM
        sources.append(
            EntitySource(
                str(item["name"]).strip(),
                tuple(str(a).strip() for a in aliases if str(a).strip()),
                str(item.get("kind", "entity")),
                "compendium",
                None,
                GM if hidden or visibility == GM else PUBLIC,
            )
        )
    return sources
