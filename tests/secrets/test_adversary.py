"""A generated adversary: vaults that hide canary secrets in every recognised form, and check that
no canary and no game-master-only name reaches a player, on any path, while the public text
beside each secret is still found (hiding everything is not a way to pass).

Each example writes a vault: public notes (LF, CRLF, a BOM) whose paragraphs, lists, tables,
headings, quotes and callouts carry secrets beside lookalike syntax that is not secret; whole
notes kept by a GM folder, by frontmatter (valid or not) or by a symlink into a GM folder; GM
notes whose aliases are public names; `compendium.yaml` and `compendium.md` entries. It is
ingested with a fake Ollama that annotates every chunk and extracts its names (so GM chunks have
annotations and extracted names too), then asked as a player through search, ask (every request
sent to the model is recorded), a follow-up, who, autocomplete and status.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle.answer.citations import Citation
from oracle.answer.prompt import Turn
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.settings import Settings
from oracle.types import PUBLIC
from tests.fakes.ollama_server import FakeOllama
from tests.secrets.test_vault import extracting_responder

SYLLABLES = ["ka", "lo", "mer", "vin", "tor", "sa", "qua", "zel", "dru", "fen", "gor", "thi", "bex", "nor", "pul"]


@dataclass
class Vault:
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # link path -> target, relative to the link
    canaries: list[str] = field(default_factory=list)  # written only in GM text, searchable by GM
    secret_names: list[str] = field(default_factory=list)  # names only GM text gives
    public_words: list[str] = field(default_factory=list)  # written in public text: must be found
    public_names: list[str] = field(default_factory=list)


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


# Secret placements inside a public note: (lines, may anything follow it in the note).
def secret_block(draw, words: Words, vault: Vault) -> tuple[list[str], bool]:
    canary = words.word("qzc")
    vault.canaries.append(canary)
    name = ""
    if draw(st.booleans()):
        name = words.name()
        vault.secret_names.append(name)
    body = f"{canary} {name} knows {name} secretly".strip()
    callout = draw(st.sampled_from(["gm", "GM", "secret", "Secret", "dm", "DM", "private", "Private"]))
    fold = draw(st.sampled_from(["", "-", "+"]))
    form = draw(st.sampled_from([
        "inline", "multiline", "list", "table", "heading", "quote", "callout", "lazy", "list-callout",
        "after-codespan", "after-fence", "after-tilde", "unclosed", "after-percent", "after-backslash",
    ]))
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
    # Forms that may hide the rest of the note: last in it.
    if form == "unclosed":
        return [f"%% {body}", "the rest is the game master's"], False
    if form == "after-percent":
        return [f"Prices rose 20%% this year. %% {body} %%"], False
    return [f"A \\%% sign. %% {body} %%"], False


def decoy(draw) -> list[str]:
    """Syntax that looks like a secret and is not: it must hide nothing."""
    return draw(st.sampled_from([
        ["> [!note] A public callout", "> nothing hidden here"],
        ["> [!tip]", "> a tip for the party"],
        ["> a plain quote"],
        ["Use `%%` in code."],
        ["```", "%% literal in a fence %%", "```"],
        ["The tax is 50% of the harvest."],
        ["- a [!gm] written in a list"],
    ]))


def public_note(draw, words: Words, vault: Vault, path: str) -> None:
    name = words.name()
    vault.public_names.append(name)
    blocks: list[list[str]] = []
    first = words.word("pub")
    vault.public_words.append(first)
    blocks.append([f"The party met {name} and spoke of {first} at length."])
    closing: list[str] | None = None
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            blocks.append(decoy(draw))
        lines, open_after = secret_block(draw, words, vault)
        if not open_after:
            closing = lines
            break
        blocks.append(lines)
        beside = words.word("pub")
        vault.public_words.append(beside)
        blocks.append([f"Afterwards {name} remembered the {beside} clearly."])
    if closing:
        blocks.append(closing)
    frontmatter = ""
    if draw(st.booleans()):
        frontmatter = f"---\naliases: [{words.word('').capitalize()}]\ntags: [pc]\n---\n"
    text = frontmatter + "\n\n".join("\n".join(b) for b in blocks) + "\n"
    vault.files[path] = encode(draw, text)


def encode(draw, text: str) -> bytes:
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    data = text.encode("utf-8")
    return b"\xef\xbb\xbf" + data if draw(st.booleans()) else data


def gm_note(draw, words: Words, vault: Vault, n: int) -> None:
    canary = words.word("qzc")
    secret = words.name()
    vault.canaries.append(canary)
    vault.secret_names.append(secret)
    body = f"{canary}: {secret} and {secret} plot in the dark.\n"
    alias = draw(st.sampled_from(vault.public_names)) if vault.public_names and draw(st.booleans()) else ""
    aliases = f"aliases: [{alias}]\n" if alias else ""
    how = draw(st.sampled_from(["folder", "nested", "dm-folder", "fm", "fm-true", "fm-colon", "fm-nospace",
                                "fm-tab", "fm-unknown", "fm-unclosed", "link"]))
    if how == "folder":
        vault.files[f"gm/{secret}.md"] = encode(draw, f"---\n{aliases}---\n{body}" if aliases else body)
    elif how == "nested":
        vault.files[f"world/gm/{secret}.md"] = encode(draw, body)
    elif how == "dm-folder":
        vault.files[f"DM/{secret}.md"] = encode(draw, body)
    elif how == "link":
        vault.files[f"secrets/{secret}.md"] = encode(draw, body)
        vault.links[f"lore/mirror-{n}.md"] = f"../secrets/{secret}.md"
    else:
        fm = {
            "fm": f"visibility: gm\n{aliases}",
            "fm-true": f"gm: true\n{aliases}",
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
        flag = draw(st.sampled_from(["gm: true", "visibility: gm", "visibility: secret", "dm: yes"]))
        entries.append(f"- name: {secret}\n  {flag}\n  aliases: [{alias}]\n")
    secret = words.name()
    vault.secret_names.append(secret)
    md_entries.append(f"  - name: {secret}\n    aliases: [{draw(st.sampled_from(vault.public_names))}]\n")
    vault.files["compendium.yaml"] = "".join(entries).encode()
    vault.files["compendium.md"] = f"---\nvisibility: gm\nentities:\n{''.join(md_entries)}---\n".encode()


@st.composite
def vaults(draw) -> Vault:
    words = Words(draw)
    vault = Vault()
    folders = ["sessions/Session {n}.md", "sheets/{w}.md", "world/{w}.md", "lore/{w}.md", "{w}.md"]
    for n in range(1, draw(st.integers(2, 4)) + 1):
        path = draw(st.sampled_from(folders)).format(n=n, w=words.word("").capitalize())
        public_note(draw, words, vault, path)
    for n in range(draw(st.integers(1, 3))):
        gm_note(draw, words, vault, n)
    if draw(st.booleans()):
        compendium(draw, words, vault)
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
    names = [n for n in vault.secret_names if n not in vault.public_names]
    return re.compile("|".join(re.escape(x) for x in vault.canaries + names), re.I)


def assert_clean(pattern: re.Pattern[str], thing: object, where: str, echo: str = "") -> None:
    """No secret in `thing`, but for the player's own question echoed back (`echo`): a player who
    asks about a secret name has not learned it from the Oracle. A word of the question standing
    alone as a value counts as echoed too: a trace names the word that matched a public name as a
    typo (`"matched": "qzclonorthi"` for the alias "Lonorthi"), and that word is the player's; the
    same word inside a longer text (a chunk, an answer) is still caught."""
    text = thing if isinstance(thing, str) else json.dumps(thing, ensure_ascii=False, default=str)
    if echo:
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
        settings = Settings(
            _env_file=None, notes_dir=notes, data_dir=root / "data", ollama_host=fake.url,
            ollama_probe_timeout=2.0, ollama_timeout=10.0, answer_timeout=10.0, rerank_timeout=10.0,
        )
        async with Index(settings, embedder=embedder) as index:
            await ingest(index)
            oracle = Oracle(index)
            # The canaries are indexed: the game master finds every one (the test is not vacuous).
            for canary in vault.canaries:
                found = await oracle.search(f"what about {canary}?", gm=True)
                assert any(canary in h.chunk.text for h in found.pool), f"{canary} not indexed"
            # The public text beside each secret is still there for players.
            for word in vault.public_words:
                found = await oracle.search(f"tell me about the {word}")
                assert any(word in h.chunk.text for h in found.fused), f"public {word} lost"
                assert_clean(secret, found.to_json(), "search")
            shown: list[str] = []  # what a player reads while the model writes

            async def show(text: str) -> None:
                shown.append(text)

            for question in [f"what about {c}?" for c in vault.canaries] + [
                f"who is {n} really?" for n in vault.public_names + vault.secret_names
            ]:
                fake.reset()
                fake.responder = extracting_responder
                assert_clean(secret, (await oracle.search(question)).to_json(), "search", question)
                shown.clear()
                answer = await oracle.ask(question, on_text=show)
                assert_clean(secret, answer.to_json(), "ask", question)
                history = [Turn("user", question), Turn("assistant", answer.text)]
                followup = await oracle.ask("and then what?", history=history, on_text=show)
                assert_clean(secret, followup.to_json(), "a follow-up", question)
                assert_clean(secret, shown, "an answer as it is written", question)
                assert_clean(secret, [r.body for r in fake.requests], "a request to Ollama", question)
            for name in vault.public_names + vault.secret_names:
                dossier = await oracle.dossiers.who(name)
                assert_clean(secret, dossier.to_json() if dossier else None, f"who {name}")
                for prefix in (name[:2], name.split()[-1][:3]):
                    assert_clean(secret, await oracle.dossiers.names(prefix), "autocomplete")
            assert_clean(secret, await oracle.dossiers.names("", limit=10_000), "autocomplete")
            assert_clean(secret, await index_status(oracle.index, gm=False), "status")
            # Show sources: a player clicking it under a game master's answer re-reads every cited
            # place with a player's clearance.
            gm_places = {Citation(h.chunk.label, h.chunk.path, h.chunk.start_line, h.chunk.end_line)
                         for c in vault.canaries for h in (await oracle.search(f"what about {c}?", gm=True)).pool}
            cited = await oracle.cited(sorted(gm_places, key=str), gm=False)
            assert_clean(secret, [c.text for c in cited], "show sources")
            # The recap of every session, its autocomplete and what players are told is new.
            async with index.snapshot() as store:
                titles = await store.titles([PUBLIC])
            assert_clean(secret, [(t.label, t.title) for t in titles], "recap autocomplete, announcements")
            fake.reset()
            fake.responder = extracting_responder
            for label in {t.label for t in titles if t.label.startswith("Session ")} | {""}:
                assert_clean(secret, (await oracle.recap(label or None)).to_json(), f"recap {label}")
            assert_clean(secret, [r.body for r in fake.requests], "a recap's request to Ollama")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(vault=vaults(), run=st.integers(0, 10**9))
def test_a_generated_vault_never_shows_a_player_a_secret(vault, run, tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp(f"adversary{run}")
    asyncio.run(attack(vault, root, embedder))


def test_the_generator_makes_every_form():
    """The adversary is only as good as what it generates: every form must be reachable."""
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(vaults())
    def collect(vault: Vault) -> None:
        text = b"\n".join(vault.files.values()).decode("utf-8", "replace")
        for form, pattern in FORMS.items():
            if re.search(pattern, text, re.M) or (form == "symlink" and vault.links):
                seen.add(form)

    collect()
    assert set(FORMS) == seen


FORMS = {
    "inline": r"They rested\. %%", "multiline": r"^%%\r?$", "list": r"^- lanterns %%", "table": r"^\| lantern \| %%",
    "heading": r"^### The camp %%", "quote": r"^> a traveller said %%", "callout": r"^> \[!\w+\][-+]? Title",
    "lazy": r"continued lazily", "list-callout": r"^  > \[!", "codespan": r"`%%` for a comment",
    "fence": r"100%%", "tilde": r"^~~~", "unclosed": r"the rest is the game master's", "percent": r"20%%",
    "backslash": r"\\%%", "crlf": r"\r\n", "bom": "\ufeff", "frontmatter-gm": r"^visibility: gm",
    "frontmatter-broken": r"^title: .*: a traitor", "symlink": r"$^", "compendium-yaml": r"^- name: .*\n  (gm|visibility|dm)",
    "compendium-md": r"^entities:", "decoy": r"\[!note\]|\[!tip\]|50%",
}
