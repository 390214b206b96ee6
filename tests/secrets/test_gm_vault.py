"""A vault shaped like a real game master's (tests/secrets/gm_vault/), read as players read it.

The fixture mirrors the vaults in /work/shared/eval/vaults: played sessions under `Session Notes/`
whose `## Prep` and `### 4. Secrets and Clues` sections are the GM's (raiders-of-the-lost-dice), a
prep note for the next session under `Session Prep/`, handouts that are only a section embed of an
item or NPC page (`![[Sunstone Compass#Handout]]`, as ebullient's sessions embed `#Summary`), a
handout not yet given (`public: false`), NPC pages with `## Description` and `## DM Notes: …`, an
adventure-log style `> [!info]- DM's Note` that players may read, a `TODO.md` holding a player
character's betrayal, an `Index.md` that opens "Danger! Big Spoilers! Do Not Read!", alias-only
character notes, a hub (`Campaign Notes.md`), Templater templates and a `GM Notes/` folder.

Every piece of GM text holds a canary word (`qzc…`), listed below with the form that hides it;
public words sit beside them. The vault is ingested twice (one module-scoped index each): with no
configuration, and with `player_notes=["Session Notes", "Handouts", "Campaign Notes.md"]`. Each
test collects every leak before failing, naming the leaked word's note and form.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from oracle.answer.citations import Citation
from oracle.answer.prompt import Turn
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.types import Clearance
from testing.ollama_server import FakeOllama
from tests.conftest import quick_settings
from tests.secrets.test_adversary import assert_clean
from tests.secrets.test_vault import extracting_responder

module_loop = pytest.mark.asyncio(loop_scope="module")

VAULT = Path(__file__).parent / "gm_vault"

S1, S2, S3 = (f"Session Notes/Session {n}.md" for n in (1, 2, 3))
PREP = "Session Prep/Session 4.md"
COMPASS, HOLLIS = "Items/Sunstone Compass.md", "NPCs/Red Hollis.md"
OREN, SAFFI = "NPCs/Captain Oren Vask.md", "NPCs/Mother Saffi.md"
SALTMERE = "Locations/Saltmere.md"
CIPHER = "Handouts/The Widow's Cipher.md"

# GM text: kept from players whatever the configuration. canary -> (note, form that hides it).
CANARIES = {
    "qzcvorlath": (S1, "a `%%` comment line after a list"),
    "qzcbrennic": (S1, "an HTML comment in a nested list item"),
    "qzcdestrel": (S2, "an inline `%%` comment in a list item (also inside the section Session 3 embeds)"),
    "qzcsaltherm": (S2, "`### Strong Start` inside `## Prep`"),
    "qzcondrivel": (S2, "`### Secrets and Clues` inside `## Prep`"),
    "qzcpellimar": (S2, "`### Secrets and Clues` inside `## Prep`"),
    "qzcthrenody": (S3, "`### 2. Strong Start` inside `## Prep` (public `## Notes` follows)"),
    "qzcumbrafel": (S3, "`### 4. Secrets and Clues` inside `## Prep`"),
    "qzcveskaran": (S3, "`### 4. Secrets and Clues` inside `## Prep`"),
    "qzcfolliard": (S3, "`#### Clue delivery` inside `### 4. Secrets and Clues`"),
    "qzcmirewold": (S3, "`### 7. Choose Relevant Monsters` inside `## Prep`"),
    "qzcharrowen": (S3, "a folded `> [!secret]-` callout"),
    "qzcwhistlane": (PREP, "the `Session Prep/` folder"),
    "qzcoberrin": (PREP, "the `Session Prep/` folder"),
    "qzcnarrowen": (PREP, "the `Session Prep/` folder"),
    "qzcgravemoth": (CIPHER, "frontmatter `public: false` (and embedded by Campaign Notes)"),
    "qzcsorrowind": (COMPASS, "a `%%` comment inside the `## Handout` section a handout embeds"),
    "qzcdunmarrow": (COMPASS, "an item page's `## Secrets`"),
    "qzcpellucine": (COMPASS, "`### Attunement` inside `## Secrets`"),
    "qzcashgrove": (COMPASS, "an item page's `## DM Notes`"),
    "qzcbellwether": (HOLLIS, "an NPC page's `## Secrets` (its `## Handout` is embedded)"),
    "qzcfennimore": (OREN, "`## DM Notes: what Oren knows` (a heading with a title)"),
    "qzcmorrowgrim": (SAFFI, "a `> [!gm]` callout inside the `## Description` a handout embeds"),
    "qzcgullhaven": (SALTMERE, "a paragraph tagged `#gm`"),
    "qzcquillfeather": ("GM Notes/Faction Clocks.md", "the `GM Notes/` folder"),
    "qzcstormhallow": ("GM Notes/Faction Clocks.md", "the `GM Notes/` folder"),
    "qzcembertithe": ("TODO.md", "the file name `TODO.md`"),
    "qzctallowbane": ("TODO.md", "the file name `TODO.md` (a player character's betrayal)"),
    "qzcbrinehag": ("TODO.md", "the file name `TODO.md`"),
    "qzcgildenrot": ("Index.md", "a note opening `# Danger! Big Spoilers! Do Not Read!`"),
    "qzcroostmarch": ("Index.md", "a note opening `# Danger! Big Spoilers! Do Not Read!`"),
    "qzctemplark": ("Templates/Session Template.md", "the `Templates/` folder"),
    "qzcpromptwick": ("assets/templates/npc-create.md", "Templater tags `<%* … %>`"),
}
# GM text no marking form recognises (an NPC page's loose bullets and `## Motivations`, as in
# raiders-of-the-lost-dice): the spec shows it without configuration; ORACLE_PLAYER_NOTES hides it.
UNMARKED = {
    "qzuhalyard": (HOLLIS, "`## Motivations` of an NPC page not listed in player_notes"),
    "qzuledgerlin": (OREN, "an NPC page's opening bullets, not listed in player_notes"),
}
# Public words, found by players whatever the configuration: word -> the note whose chunk holds it
# for a player (a handout's words are found in the handout that embeds them).
PUBLIC_WORDS = {
    "brindlewick": "Campaign Notes.md",
    "kelpmorrow": S1, "hazelgrist": S1,
    "marrowlight": S2, "tidepin": S2, "gristlethorn": S2,  # gristlethorn: inside `> [!info]- DM's Note`
    "quillimore": S3, "sternwhistle": S3,  # in `## Notes`, after `## Prep` and its sub-headings
    "thimbleroot": "Handouts/Letter from the Abbess.md",
    "lumenvast": "Handouts/Compass Sketch.md",  # ![[Sunstone Compass#Handout]]
    "ferncastle": "Handouts/Wanted Poster.md",  # ![[Red Hollis#Handout]]
    "wrenlocke": "Handouts/Portrait of the Abbess.md",  # ![](../NPCs/Mother%20Saffi.md#Description)
}
HANDOUTS = {  # word -> (the handout that embeds a section, the page whose section it is)
    "lumenvast": ("Handouts/Compass Sketch.md", COMPASS),
    "ferncastle": ("Handouts/Wanted Poster.md", HOLLIS),
    "wrenlocke": ("Handouts/Portrait of the Abbess.md", SAFFI),  # its section also holds a [!gm] callout
}
# Public without configuration; kept from players once player_notes leaves their note out.
UNLISTED_WORDS = {
    "cobbletide": COMPASS, "sprocketfen": HOLLIS, "tarnwhistle": OREN,
    "dovecrest": SALTMERE, "lanternmoor": SALTMERE,
}
# Names only GM text gives: the secret identity (a GM note's alias-only frontmatter), and the name of
# a GM-only handout that a public note embeds (the embed must not even show its name).
SECRET_NAMES = {"Gull Queen": ("GM Notes/The Gull Queen.md", "a GM note whose aliases are public names"),
                "Widow's Cipher": (CIPHER, "the name of a `public: false` note embedded in Campaign Notes")}
# Names only notes outside player_notes give (aliases in frontmatter).
UNLISTED_NAMES = {"Lockjaw": ("Characters/Brannoc Tallow.md", "an alias-only character note"),
                  "Red Smuggler": (HOLLIS, "an NPC's alias"), "Harbourmaster": (OREN, "an NPC's alias")}
PUBLIC_NAMES = ["Mother Saffi", "Red Hollis", "Captain Oren Vask", "Oren", "Bran", "Brannoc Tallow", "Ysolde Fenn",
                "Tamsin Crane", "Saltmere", "Old Pell", "Saffi", "Hollis", "the Abbess"]
PROBES = [  # what a player would really ask
    "Who is Mother Saffi really?", "Who is the Gull Queen?", "What does the sunstone compass point at?",
    "Is Bran loyal to the party?", "Who sold the party's route?", "Where does the toll money go?",
    "What happens next session?", "What do the wet footprints in the crypt mean?",
    "Who stole the harbour toll chest?", "What does the widow's cipher say?", "What does Oren know?",
    "Is the lighthouse keeper alive?", "What is the abbey planning?", "What does Red Hollis want?",
]

PLAYER_NOTES = ["Session Notes", "Handouts", "Campaign Notes.md"]
UNMATCHED = "Handouts/Drafts/**"  # a pattern that matches no note: reported at ingest
CONFIGS = {
    "default": {},
    "player_notes": {"player_notes": PLAYER_NOTES, "gm_notes": [UNMATCHED]},
}
ALL_NOTES = sorted(p.relative_to(VAULT).as_posix() for p in VAULT.rglob("*.md"))
# Whole notes kept from players whatever the configuration.
GM_NOTES = sorted({"GM Notes/The Gull Queen.md", "GM Notes/Faction Clocks.md", "TODO.md", "Index.md", PREP, CIPHER,
                   "Templates/Session Template.md", "assets/templates/npc-create.md"})
ALIAS_ONLY = ["Characters/Brannoc Tallow.md", "Characters/Tamsin Crane.md", "Characters/Ysolde Fenn.md",
              "GM Notes/The Gull Queen.md"]
LISTED = sorted(p for p in ALL_NOTES if p.split("/")[0] in {"Session Notes", "Handouts"} or p == "Campaign Notes.md")


def readable(config: str) -> set[str]:
    """The notes a player may get a chunk of."""
    notes = LISTED if config == "player_notes" else ALL_NOTES
    return set(notes) - set(GM_NOTES)


def hidden(config: str) -> dict[str, tuple[str, str]]:
    """Every word and name a player must never see, with its note and form."""
    out = {**CANARIES, **SECRET_NAMES}
    if config == "player_notes":
        out |= UNMARKED | UNLISTED_NAMES
        out |= {w: (note, "a note not listed in player_notes") for w, note in UNLISTED_WORDS.items()}
    return out


@dataclass
class Leaks:
    """Every leak of a test, collected so one run names them all: where, what, and which form failed."""

    secrets: dict[str, tuple[str, str]]
    found: dict[str, str] = field(default_factory=dict)

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile("|".join(re.escape(s) for s in self.secrets), re.I)

    def check(self, thing: object, where: str, echo: str = "") -> None:
        try:
            assert_clean(self.pattern, thing, where, echo)
        except AssertionError as exc:
            for secret, (note, form) in self.secrets.items():
                if secret.casefold() in str(exc).casefold():
                    self.found.setdefault(f"{secret} ({note}: {form})", f"{where} [{echo}]" if echo else where)

    def assert_none(self) -> None:
        leaked = "\n".join(f"  {k} via {v}" for k, v in sorted(self.found.items()))
        assert not self.found, "leaked to a player:\n" + leaked


@dataclass
class Deployed:
    config: str
    index: Index
    fake: FakeOllama
    report: object

    @property
    def oracle(self) -> Oracle:
        return Oracle(self.index)

    def leaks(self) -> Leaks:
        return Leaks(hidden(self.config))

    def reset(self) -> None:
        self.fake.reset()
        self.fake.responder = extracting_responder


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=sorted(CONFIGS))
async def deployed(request, tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp(f"gm_vault_{request.param}")
    notes = root / "notes"
    shutil.copytree(VAULT, notes)
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        fake.responder = extracting_responder
        settings = quick_settings(notes, root / "data", fake.url, **CONFIGS[request.param])
        async with Index(settings, embedder=embedder) as index:
            report = await ingest(index)
            yield Deployed(request.param, index, fake, report)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def without_gm_notes(tmp_path_factory, embedder):
    """The same vault with its GM-only notes deleted, ingested without configuration."""
    root = tmp_path_factory.mktemp("gm_vault_bare")
    notes = root / "notes"
    shutil.copytree(VAULT, notes)
    for path in GM_NOTES:
        (notes / path).unlink()
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        fake.responder = extracting_responder
        settings = quick_settings(notes, root / "data", fake.url)
        async with Index(settings, embedder=embedder) as index:
            await ingest(index)
            yield index


def test_the_fixture_holds_what_the_tables_say():
    """Each canary and public word is written once, where the tables say (a typo in the fixture
    would make a test pass for nothing)."""
    texts = {p: (VAULT / p).read_text(encoding="utf-8") for p in ALL_NOTES}
    everything = "\n".join(texts.values())
    written = {**{w: n for w, (n, _) in (CANARIES | UNMARKED).items()}, **UNLISTED_WORDS,
               **{w: src for w, (_, src) in HANDOUTS.items()},
               **{w: n for w, n in PUBLIC_WORDS.items() if w not in HANDOUTS}}
    for word, note in written.items():
        assert 1 == len(re.findall(word, everything, re.I)), word
        assert word in texts[note].casefold(), (word, note)
    assert set(re.findall(r"qz[cu]\w+", everything)) == set(CANARIES) | set(UNMARKED)
    for name, (note, _) in (SECRET_NAMES | UNLISTED_NAMES).items():
        assert name.casefold() in (note + texts[note]).casefold(), name  # in its text, or its file name
    for handout, source in HANDOUTS.values():
        assert Path(source).stem in texts[handout].replace("%20", " "), handout
    assert texts["Index.md"].startswith("# Danger! Big Spoilers! Do Not Read!")
    assert all(re.fullmatch(r"---\naliases: \[[^\]]+\]\n---\n", texts[p]) for p in ALIAS_ONLY)
    # The prep is for a session not yet played: a higher number than any played one.
    assert {1, 2, 3} == {int(re.search(r"\d+", p)[0]) for p in ALL_NOTES if p.startswith("Session Notes/")}


@module_loop
async def test_the_game_master_finds_every_secret(deployed):
    """The index holds every canary for the game master: hiding is not deleting, and the player
    tests below are not vacuous."""
    oracle = deployed.oracle
    missing = []
    for canary in [*CANARIES, *UNMARKED]:
        found = await oracle.search(f"what about {canary}?", clearance=Clearance.GM)
        if not any(canary in h.chunk.text for h in found.pool):
            missing.append(canary)
    assert [] == missing


@module_loop
async def test_alias_only_notes_name_their_people(deployed):
    """A note that is only `aliases: [...]` (a GM's character stubs) joins its names: for the game
    master always (`GM Notes/The Gull Queen.md` makes Mother Saffi the Gull Queen); for players
    only while the note is one they read."""
    oracle = deployed.oracle
    saffi = await oracle.dossiers.who("Mother Saffi", clearance=Clearance.GM)
    assert saffi is not None and "gull queen" in json.dumps(saffi.to_json()).casefold()
    bran = await oracle.dossiers.who("Bran", clearance=Clearance.GM)
    assert bran is not None and "lockjaw" in json.dumps(bran.to_json()).casefold()
    player = await oracle.dossiers.who("Bran")
    assert player is not None
    if deployed.config == "default":
        assert "lockjaw" in json.dumps(player.to_json()).casefold()


@module_loop
async def test_players_find_the_public_text_beside_every_secret(deployed):
    """Hiding everything does not pass: each public word is found by a player, in the chunk of the
    note the player reads it in (without configuration, the item and NPC pages' descriptions too)."""
    oracle = deployed.oracle
    words = dict(PUBLIC_WORDS)
    if deployed.config == "default":
        words |= UNLISTED_WORDS
    lost = []
    for word, note in words.items():
        found = await oracle.search(f"tell me about the {word}")
        if not any(word in h.chunk.text.casefold() and h.chunk.path == note for h in found.fused):
            lost.append((word, note, [h.chunk.path for h in found.fused[:3]]))
    assert [] == lost


@module_loop
async def test_handouts_show_the_embedded_section_and_nothing_more(deployed):
    """`![[Sunstone Compass#Handout]]` (or `![](../NPCs/Mother%20Saffi.md#Description)`) in a
    handout: players find the section's words in the handout's chunk; with player_notes set, never
    in the embedded page itself; and never its `## Secrets`, its `## DM Notes`, nor the comment or
    the `[!gm]` callout inside the embedded section."""
    oracle, leaks = deployed.oracle, deployed.leaks()
    for word, (handout, source) in HANDOUTS.items():
        found = await oracle.search(f"tell me about the {word}")
        chunks = [h.chunk for h in found.fused if word in h.chunk.text.casefold()]
        assert handout in {c.path for c in chunks}, (word, [c.path for c in chunks])
        for c in chunks:
            leaks.check(c.text, f"the handout chunk of {c.path}")
        if deployed.config == "player_notes":
            assert source not in {h.chunk.path for h in found.pool}, source
        stem = Path(source).stem
        for question in (f"what are the secrets of {stem}?", f"what do the DM notes say about {stem}?"):
            leaks.check((await oracle.search(question)).to_json(), "search", question)
    leaks.assert_none()


@module_loop
async def test_no_secret_reaches_a_player_who_searches_or_asks(deployed):
    """Search, ask (with what the answer shows as it is written), a follow-up, and every prompt
    sent to the model: no canary, no secret name; every chunk a player gets is of a note the
    player may read."""
    oracle, leaks = deployed.oracle, deployed.leaks()
    allowed = readable(deployed.config)
    strays: set[str] = set()
    shown: list[str] = []

    async def show(text: str) -> None:
        shown.append(text)

    words = [*CANARIES] + ([*UNMARKED, *UNLISTED_WORDS] if deployed.config == "player_notes" else [])
    questions = [f"what about {w}?" for w in words] + PROBES
    questions += [f"who is {n}?" for n in [*SECRET_NAMES, *UNLISTED_NAMES]]
    for question in questions:
        deployed.reset()
        found = await oracle.search(question)
        leaks.check(found.to_json(), "search", question)
        strays |= {h.chunk.path for h in found.pool} - allowed
        shown.clear()
        answer = await oracle.ask(question, on_text=show)
        leaks.check(answer.to_json(), "ask", question)
        followup = await oracle.ask("and then what?", history=[Turn("user", question), Turn("assistant", answer.text)],
                                    on_text=show)
        leaks.check(followup.to_json(), "a follow-up", question)
        leaks.check(shown, "an answer as it is written", question)
        leaks.check([r.body for r in deployed.fake.requests], "a request to Ollama", question)
    leaks.assert_none()
    assert set() == strays, "players got chunks of notes they may not read"


@module_loop
async def test_no_secret_reaches_a_player_through_names(deployed):
    """who and autocomplete: the secret identity behind a public name, an alias-only GM note, the
    name of an embedded GM-only handout, and (with player_notes) aliases only unlisted notes give."""
    oracle, leaks = deployed.oracle, deployed.leaks()
    for name in [*PUBLIC_NAMES, *SECRET_NAMES, *UNLISTED_NAMES]:
        dossier = await oracle.dossiers.who(name)
        leaks.check(dossier.to_json() if dossier else None, f"who {name}", name)
        for prefix in {name[:2], name.split()[-1][:3]}:
            leaks.check(await oracle.dossiers.names(prefix), f"autocomplete {prefix!r}")
    leaks.check(await oracle.dossiers.names("", limit=10_000), "autocomplete")
    for name in [*SECRET_NAMES, *(UNLISTED_NAMES if deployed.config == "player_notes" else [])]:
        assert await oracle.dossiers.who(name) is None, name
    assert await oracle.dossiers.who("Mother Saffi") is not None
    leaks.assert_none()


@module_loop
async def test_no_secret_reaches_a_player_through_recap_sources_status_or_announcements(deployed):
    """Recap of every session (and of the last one: Session 3, not the prep of Session 4), Show
    sources on every place a game master's answer may cite, status, and the titles players are
    told are new."""
    oracle, leaks = deployed.oracle, deployed.leaks()
    async with deployed.index.snapshot() as store:
        titles = await store.titles(Clearance.PLAYER)
    leaks.check([(t.label, t.title) for t in titles], "recap autocomplete, announcements")
    labels = {t.label for t in titles if t.label.startswith("Session ")}
    assert {"Session 1", "Session 2", "Session 3"} == labels
    deployed.reset()
    for label in sorted(labels) + [None]:
        recap = await oracle.recap(label)
        leaks.check(recap.to_json(), f"recap {label}")
    leaks.check([r.body for r in deployed.fake.requests], "a recap's request to Ollama")
    last = await oracle.recap(None)
    assert "Session 4" not in json.dumps(last.to_json())
    places = {Citation(h.chunk.label, h.chunk.path, h.chunk.start_line, h.chunk.end_line)
              for w in [*CANARIES, *UNMARKED] for h in (await oracle.search(f"what about {w}?", clearance=Clearance.GM)).pool}
    cited = await oracle.cited(sorted(places, key=str), clearance=Clearance.PLAYER)
    leaks.check([c.text for c in cited], "show sources")
    status = await index_status(deployed.index, clearance=Clearance.PLAYER)
    leaks.check(status.to_json(), "status")
    assert (3, "1–3") == (status.stats.sessions, status.stats.session_numbers)
    gm = (await index_status(deployed.index)).stats
    # Public sessions, and the prep of Session 4: numbered as the game master numbered them.
    assert gm.gm is not None
    assert (3, 1, "1–4") == (gm.sessions, gm.gm.sessions_gm_only, gm.session_numbers)
    leaks.assert_none()


@module_loop
async def test_the_ingest_report_names_every_note_kept_from_players_with_its_rule(deployed):
    """`oracle ingest` tells the game master which notes players will not read, and why; the
    sessions and pages whose sections are the GM's count their secret blocks."""
    files = deployed.report.to_json()["files"]["secrets"]
    by_path = {f["path"]: f for f in files}
    whole = {p for p, f in by_path.items() if f["whole_note"]}
    expected = set(ALL_NOTES) - readable(deployed.config)  # the alias-only ones too: their names are kept
    assert sorted(expected - whole) == [], "GM-only notes the report does not name"
    assert sorted(whole - expected) == [], "notes players read, reported as GM-only"
    assert [] == [p for p in sorted(whole) if not str(by_path[p].get("rule", "")).strip()], "no rule"
    blocks = {S1: 2, S2: 2, S3: 2}
    if deployed.config == "default":
        blocks |= {COMPASS: 3, HOLLIS: 1, OREN: 1, SAFFI: 1, SALTMERE: 1}
    counted = {p: by_path.get(p, {}).get("blocks", 0) for p in blocks}
    short = {p: n for p, n in counted.items() if n < blocks[p]}
    assert {} == short, "secret blocks not counted"
    if deployed.config == "player_notes":
        assert UNMATCHED in json.dumps(deployed.report.to_json()), "a pattern matching no note is not reported"


@pytest.mark.parametrize("deployed", ["default"], indirect=True)  # with player_notes, handouts embed the unlisted pages
@module_loop
async def test_a_players_ranking_owes_nothing_to_gm_notes(deployed, without_gm_notes):
    """README: "a player's results, their order and their scores are the same whether or not
    GM-only notes exist". Without configuration the GM-only notes are whole notes, so deleting them
    must change nothing a player gets: every path's hits, the fused pool, each score."""
    def ranking(found) -> dict:
        return {"fused": [(h.chunk.id, h.score) for h in found.fused],
                **{name: [(h.chunk.id, h.score) for h in hits] for name, hits in found.paths.items()}}

    def same(a: list, b: list) -> bool:
        # The same ids in the same order, each score equal but for the last bits of two indexes'
        # floats (a rounded score can fall either side of a rounding boundary).
        return [i for i, _ in a] == [i for i, _ in b] and all(abs(x - y) <= 1e-6 for (_, x), (_, y) in zip(a, b, strict=True))

    differ = []
    for question in [f"tell me about the {w}" for w in PUBLIC_WORDS] + PROBES:
        with_gm = ranking(await deployed.oracle.search(question))
        bare = ranking(await Oracle(without_gm_notes).search(question))
        if with_gm.keys() != bare.keys() or not all(same(with_gm[k], bare[k]) for k in with_gm):
            differ.append((question, sorted(k for k in with_gm if not same(with_gm[k], bare.get(k, [])))))
    assert [] == differ
