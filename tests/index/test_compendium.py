"""The Compendium: merging sources, recurring proper nouns, mentions with their visibility."""
from oracle.index.compendium import (
    adopt_name_parts,
    find_mentions,
    merge_sources,
    proper_nouns,
    read_compendium_file,
)
from oracle.text import normalize
from oracle.types import GM, PUBLIC, ChunkText, EntitySource


def test_normalize_is_case_accent_and_possessive_insensitive():
    assert "vex" == normalize("Vex's")
    assert "sesion" == normalize("Sesión")
    assert "candle monk" == normalize("  The   Candle Monk ")  # a leading article is not part of a name


def test_merge_prefers_trusted_sources_and_unites_aliases():
    entities = merge_sources([
        EntitySource("Old Wick", (), "name", "proper-noun"),
        EntitySource("Brother Aldous", ("Old Wick", "the Candle Monk"), "sheet", "frontmatter", "npcs/Brother_Aldous.md"),
    ])
    assert 1 == len(entities)
    e = entities[0]
    assert ("Brother Aldous", "frontmatter", PUBLIC) == (e.name, e.source, e.visibility)
    assert {"Old Wick": PUBLIC, "the Candle Monk": PUBLIC} == e.aliases


def test_alias_from_a_gm_source_stays_gm():
    entities = merge_sources([
        EntitySource("Lady Veyra", (), "sheet", "frontmatter", "npcs/Lady_Veyra.md", PUBLIC),
        EntitySource("Lady Veyra", ("the Lost Princess",), "world", "frontmatter", "gm/Heir.md", GM),
    ])
    assert {"the Lost Princess": GM} == entities[0].aliases


def test_proper_nouns_recur_and_are_not_common_words():
    chunks = [
        ChunkText("1", "", "However, Mirela met Captain Dunstan Vale at the Gilded Eel. However it rained.", PUBLIC),
        ChunkText("2", "", "Mirela and Dunstan Vale drank. however, the night was long. The Gilded Eel closed.", PUBLIC),
        ChunkText("3", "", "Only Zorbag appears once.", PUBLIC),
    ]
    names = {s.name for s in proper_nouns(chunks)}
    assert {"Mirela", "Dunstan Vale", "Gilded Eel"} == names


def test_adopt_name_parts_makes_a_first_name_an_alias():
    entities = merge_sources([
        EntitySource("Brother Aldous", (), "sheet", "frontmatter", "npcs/Brother_Aldous.md"),
        EntitySource("Aldous", (), "name", "proper-noun"),
        EntitySource("Greyhaven", (), "name", "proper-noun"),
    ])
    kept = adopt_name_parts(entities, lower_vocab={"brother", "the"})  # "brother" is a common word
    assert ["Brother Aldous", "Greyhaven"] == [e.name for e in kept]
    assert {"Aldous": PUBLIC} == kept[0].aliases


def test_a_name_word_shared_by_two_notes_is_nobody_alias():
    entities = merge_sources([
        EntitySource("Orsolya Brandt", (), "sheet", "frontmatter", "npcs/Orsolya_Brandt.md"),
        EntitySource("Mattias Brandt", (), "sheet", "frontmatter", "npcs/Mattias_Brandt.md"),
    ])
    kept = adopt_name_parts(entities)
    assert [{"Orsolya": PUBLIC}, {"Mattias": PUBLIC}] == [e.aliases for e in kept]


def test_a_name_word_of_a_character_and_of_a_note_named_after_her_is_the_character_s():
    """Players say "Thinora" for the archmage, not for the encounter note titled after her."""
    entities = merge_sources([
        EntitySource("Lady Thinora Va'del", (), "sheet", "frontmatter", "NPCs/Lady Thinora Va'del.md"),
        EntitySource("Thinora at Monastary", (), "note", "frontmatter", "Encounters/Thinora at Monastary.md"),
        EntitySource("Thinora", (), "name", "proper-noun"),
    ])
    kept = adopt_name_parts(entities)
    assert ["Lady Thinora Va'del", "Thinora at Monastary"] == [e.name for e in kept]
    assert {"Thinora": PUBLIC} == {a: v for a, v in kept[0].aliases.items() if a == "Thinora"}
    assert "Thinora" not in kept[1].aliases


def test_mentions_count_names_links_and_visibility():
    entities = merge_sources([
        EntitySource("Vex Aldercott", ("Vex",), "sheet", "frontmatter", "sheets/Vex_Aldercott.md"),
        EntitySource("Vex Aldercott", ("the Quiet Blade",), "world", "frontmatter", "gm/x.md", GM),
    ])
    chunks = [
        ChunkText("a", "Session 1", "Vex's dagger. VEX laughed.", PUBLIC),
        ChunkText("b", "Session 2", "The Quiet Blade struck.", PUBLIC),
        ChunkText("c", "Session 2 (GM)", "Vex is the Quiet Blade.", GM),
        ChunkText("d", "Session 3", "Someone [[Vex_Aldercott]] linked.", PUBLIC, ("Vex_Aldercott",)),
    ]
    mentions = find_mentions(entities, chunks, {"vex aldercott": 0, "vex_aldercott": 0})
    assert [("a", 2, PUBLIC), ("b", 1, GM), ("c", 2, GM), ("d", 1, PUBLIC)] == [
        (m.chunk_id, m.count, m.visibility) for m in mentions]


def test_compendium_yaml():
    sources = read_compendium_file("compendium.yaml", "- name: The Hollow King\n  aliases: [Hollow]\n- name: Secret Cult\n  visibility: gm\n- Mirela\n")
    assert [("The Hollow King", ("Hollow",), PUBLIC), ("Secret Cult", (), GM), ("Mirela", (), PUBLIC)] == [
        (s.name, s.aliases, s.visibility) for s in sources]
