"""What the vault as a whole says of each note: sessions, kinds, entities, links and language, learned
from how the vault names things rather than from one spelling."""
import pytest

from oracle.notes.conventions import Conventions
from oracle.notes.names import Names

TEXT = b"The party crossed the river and met the ferryman."


def read(paths, texts=None, **kwargs):
    files = {p: (texts or {}).get(p, TEXT) for p in paths}
    return Conventions.read(files, **kwargs)


def sessions(conventions):
    return {rel: f.sessions for rel, f in conventions.facts.items() if f.sessions}


# -- Sessions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, numbers",
    [
        ("Tempus Session 05 (2023-04-05)", (5,)),
        ("S05", (5,)),
        ("S05 - The Ford", (5,)),
        ("Ep. 12", (12,)),
        ("Episode 3 - Ashes", (3,)),
        ("Session_05", (5,)),
        ("session-35", (35,)),
        ("Session 02.1", (2,)),
        ("Sessão 02.2", (2,)),
        ("Sesión 12 - La caída", (12,)),
        ("Sitzung 4", (4,)),
        ("Sesja 7", (7,)),
        ("Session 8-9", (8, 9)),
    ],
)
def test_a_session_number_anywhere_in_a_name(name, numbers):
    assert {f"Campaign/{name}.md": numbers} == sessions(read([f"Campaign/{name}.md", "Campaign/Map.md"]))


@pytest.mark.parametrize("folder", ["01 - Sessions", "1. Sessions", "10-Sesiones", "📜 Session Notes", "session-notes",
                                    "Sessões"])
def test_in_a_folder_of_sessions_a_bare_number_is_a_session(folder):
    paths = [f"{folder}/05 - The Fall.md", f"{folder}/06 The Ford.md", f"{folder}/07.md", "NPCs/Vidrir.md"]
    assert {paths[0]: (5,), paths[1]: (6,), paths[2]: (7,)} == sessions(read(paths))


def test_a_folder_where_most_notes_carry_a_session_number_is_one_of_sessions():
    paths = ["Log/Tempus Session 01.md", "Log/Tempus Session 02.md", "Log/03 - The Barrow.md", "Log/Index.md"]
    assert {paths[0]: (1,), paths[1]: (2,), paths[2]: (3,)} == sessions(read(paths))


def test_dated_notes_in_a_folder_of_sessions_are_numbered_in_date_order():
    paths = ["01 - session-notes/2023-04-12.md", "01 - session-notes/2023-04-05 the barrow.md", "journal/2023-04-07.md",
             "Session Notes/Session 9.md"]
    assert {paths[1]: (1,), paths[0]: (2,), paths[3]: (9,)} == sessions(read(paths))


def test_a_vault_that_names_no_session_finds_them_in_numbered_and_dated_notes():
    # Players' notes named by in-game date, and a GM's notes numbered without a session word.
    assert {"1925-02-10.md": (1,), "1925-02-12.md": (2,)} == sessions(read(["1925-02-12.md", "1925-02-10.md",
                                                                           "Jackson Elias.md"]))
    assert {"012 - The Fall.md": (12,)} == sessions(read(["012 - The Fall.md", "Map.md"]))


def test_numbered_rooms_and_encounters_are_not_sessions_when_the_vault_numbers_its_sessions():
    paths = ["Session Notes/Session 01 - Arrival.md", "Locations/Demiplane/01 - Foyer Entrance.md",
             "Locations/Demiplane/02 - The Maw.md", "Encounters/14 Lair.md", "Encounters/99 Auction House.md"]
    assert {paths[0]: (1,)} == sessions(read(paths))


def test_a_session_log_in_a_folder_of_sessions_is_a_note_and_an_unnumbered_record_is_a_session():
    log = "- [[Session 01]]: the ferry.\n- [[Session 02]]: the ford.\n- [[Session 03]]: the fall.\n"
    spinoff = "Before [[Session 02]] and after [[Session 03]], Vex went alone to the mill."
    c = read(["Sessions/Session 01.md", "Sessions/Session 02.md", "Sessions/Session 03.md",
              "Sessions/Session Log.md", "Sessions/Spinoff - The Mill.md", "Timeline.md"],
             {"Sessions/Session Log.md": log.encode(), "Sessions/Spinoff - The Mill.md": spinoff.encode(),
              "Timeline.md": log.encode()})
    assert ("note", ()) == (c.of("Sessions/Session Log.md").kind, c.of("Sessions/Session Log.md").sessions)
    assert "session" == c.of("Sessions/Spinoff - The Mill.md").kind  # two links: a record that looks back
    assert "note" == c.of("Timeline.md").kind
    assert {"session"} == {c.of(f"Sessions/Session 0{n}.md").kind for n in (1, 2, 3)}


def test_frontmatter_numbers_a_session_anywhere():
    texts = {"Notes/The Fall.md": b"---\nsession: 12\n---\nText."}
    assert {"Notes/The Fall.md": (12,)} == sessions(read(["Notes/The Fall.md"], texts))


def test_a_date_after_a_session_word_is_no_session_number():
    assert {} == sessions(read(["Notes/Session 2023-04-05.md", "Notes/Map.md"]))


# -- Kinds and entities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, kind",
    [
        ("02 - characters/allies/Vidrir.md", "sheet"),
        ("02 - characters/adversaries/Manus.md", "sheet"),
        ("Campaign/NPCs/Grogar.md", "sheet"),
        ("10-Personajes/Ser Tanneth.md", "sheet"),
        ("Personagens/Personagens Principais/Amna.md", "sheet"),
        ("📜 Places/Greyhaven.md", "world"),
        ("04 - items/Summer's Edge.md", "world"),
        ("Magic Items/Leading Rapier.md", "world"),
        ("Player Handouts/Letter.md", "note"),
        ("Locations/Thinora's Demiplane/01 - Foyer Entrance.md", "world"),
    ],
)
def test_a_folder_names_its_kind_whatever_its_numbering_and_a_folder_counts_for_everything_below(path, kind):
    facts = read([path]).of(path)
    assert (kind, kind in ("sheet", "world")) == (facts.kind, facts.entity)


def test_a_note_other_notes_link_to_is_an_entity_whatever_its_folder():
    texts = {
        "Sessions/Session 1.md": b"We met [[Blackbird]] and [[misc/quests|the quests]] at [[The Barrow#Gate]].",
        "Blackbird.md": b"A thief.",
        "misc/quests.md": b"Open quests.",
        "The Barrow.md": b"## Gate\nA door.",
        "Unlinked.md": b"Nobody links here.",
    }
    facts = read(list(texts), texts).facts
    assert {"Blackbird.md", "The Barrow.md"} == {rel for rel, f in facts.items() if f.entity}
    assert "links to it" == facts["Blackbird.md"].why_entity


@pytest.mark.parametrize("link", ['[➹](heist/misc/Blackbird.md "tg")', "[him](<heist/misc/Blackbird.md> 'the thief')",
                                  '[him](heist/misc/Blackbird.md#Looks "tg")', "[him](heist/misc/Blackbird.md)"])
def test_a_markdown_link_reaches_its_note_with_or_without_a_title(link):
    texts = {"heist/sessions/s1.md": f"We met {link} at the docks.".encode(), "heist/misc/Blackbird.md": b"A thief."}
    assert "links to it" == read(list(texts), texts).of("heist/misc/Blackbird.md").why_entity


def test_a_note_tagged_as_a_person_or_a_place_is_an_entity():
    texts = {"a.md": b"---\ntags: [person/ally]\n---\nA.", "b.md": b"---\ntags: Lugar/Cidade\n---\nB.",
             "c.md": b"---\ntags: [heist/events]\n---\nC."}
    facts = read(list(texts), texts).facts
    assert {"a.md", "b.md"} == {rel for rel, f in facts.items() if f.entity}


# -- Links -----------------------------------------------------------------------------------------


def test_a_link_written_with_a_larger_vaults_path_reaches_its_note_by_the_shortest_unique_tail():
    names = Names.of(["04 - items/Summer's Edge.md", "04 - items/Old/Summer's Edge.md", "Sessions/Session 1.md"])
    assert "04 - items/Summer's Edge.md" == names.resolve(
        "01 - Projects/tempus-campaign/04 - items/Summer's Edge", "Sessions/Session 1.md")
    assert "04 - items/Old/Summer's Edge.md" == names.resolve("Vault/items/Old/Summer's Edge", "Sessions/Session 1.md")
    assert "04 - items/Summer's Edge.md" == names.resolve("Summer's Edge", "Sessions/Session 1.md")
    assert names.resolve("01 - Projects/Nowhere", "Sessions/Session 1.md") is None


def test_a_link_reaches_a_note_stored_decomposed():
    decomposed = "Sessões/Sessa\u0303o 01.md"
    assert decomposed == Names.of([decomposed]).resolve("Sessões/Sessão 01", "index.md")


# -- Language --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, code",
    [
        ("Los caballeros cruzaron el pantano y encontraron una torre con las puertas abiertas.", "es"),
        ("Os jogadores chegaram na cidade e o grupo não encontrou o mago da torre.", "pt"),
        ("The knights crossed the marsh and found a tower with its doors open.", "en"),
        ("Spotykamy kogoś, który jest przez nas szukany, ale już go nie ma.", "pl"),
    ],
)
def test_the_vaults_language_is_read_from_its_text(text, code):
    assert code == read(["a.md"], {"a.md": text.encode()}).language


def test_the_language_setting_overrides_the_text():
    assert "es" == read(["a.md"], {"a.md": b"The knights crossed the marsh."}, language="es").language
