"""A note's own name, unique in the vault, and the session numbers its game master gave it."""
import pytest

from oracle.notes.conventions import Conventions
from oracle.notes.names import (
    Names,
    number_ranges,
    sessions_from_filename,
    sessions_from_frontmatter,
)


@pytest.mark.parametrize(
    "stem, numbers",
    [
        ("Session 12", (12,)),
        ("session_03", (3,)),
        ("session-35", (35,)),
        ("012 - The Fall", (12,)),
        ("7. Ashes", (7,)),
        ("Sesión 4", (4,)),
        ("Session 8-9", (8, 9)),
        ("Session 05 - A Blocked Path", (5,)),
        ("Session 1-400", (1,)),
    ],
)
def test_session_numbers_from_a_file_name(stem, numbers):
    assert numbers == sessions_from_filename(stem)


@pytest.mark.parametrize("stem", ["4983", "2024-05-01 recap", "Loot Ledger", "GODS"])
def test_names_without_a_session_number(stem):
    assert () == sessions_from_filename(stem)


@pytest.mark.parametrize(
    "frontmatter, numbers",
    [({"session": 12}, (12,)), ({"session": "8-9"}, (8, 9)), ({"session": [3, 4]}, (3, 4)),
     ({"session_number": "#7"}, (7,)), ({"session": True}, ()), ({"title": "Session 4"}, ())],
)
def test_session_numbers_from_frontmatter(frontmatter, numbers):
    assert numbers == sessions_from_frontmatter(frontmatter)


def test_a_shared_file_name_is_told_apart_by_the_shortest_folder_path():
    names = Names.of([
        "Session Notes/Session 12.md", "Session Prep/Session 12.md", "Handouts/Letter.md", "gm/old/Letter.md",
        "a/x/Map.md", "b/x/Map.md", "House Rules.md",
    ])
    assert names.name("Session Notes/Session 12.md") == "Session Notes/Session 12"
    assert names.name("Session Prep/Session 12.md") == "Session Prep/Session 12"
    assert names.name("Handouts/Letter.md") == "Handouts/Letter"
    assert names.name("gm/old/Letter.md") == "old/Letter"
    assert names.name("a/x/Map.md") == "a/x/Map"
    assert names.name("House Rules.md") == "House Rules"


def test_names_differing_only_in_case_are_told_apart():
    names = Names.of(["world/GODS.md", "lore/gods.md"])
    assert {names.name("world/GODS.md"), names.name("lore/gods.md")} == {"world/GODS", "lore/gods"}


def test_dated_notes_in_a_sessions_folder_are_numbered_in_date_order():
    conventions = Conventions.read(dict.fromkeys([
        "heist/sessions/2022-05-08-the-passive-fist.md", "heist/sessions/2022-02-06-the-adventure-begins.md",
        "heist/sessions/2022-02-13-looking-for-floon.md", "journal/2022-02-07.md", "Session Notes/Session 1.md",
    ], b"The party went on."))
    assert {
        "heist/sessions/2022-02-06-the-adventure-begins.md": (1,),
        "heist/sessions/2022-02-13-looking-for-floon.md": (2,),
        "heist/sessions/2022-05-08-the-passive-fist.md": (3,),
        "Session Notes/Session 1.md": (1,),
    } == {rel: f.sessions for rel, f in conventions.facts.items() if f.sessions}


def test_a_new_namesake_changes_the_key_of_the_note_already_there():
    before = Conventions.read({"Session Notes/Session 12.md": b"x"})
    after = Conventions.read({"Session Notes/Session 12.md": b"x", "Session Prep/Session 12.md": b"x"})
    assert before.key("Session Notes/Session 12.md") != after.key("Session Notes/Session 12.md")


def test_session_numbers_read_as_ranges():
    assert "0–3, 5, 7–8" == number_ranges([8, 0, 1, 2, 3, 5, 7, 3])
    assert "" == number_ranges([])
