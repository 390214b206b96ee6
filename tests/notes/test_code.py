"""Query and plugin code is not prose: blanked line for line, its names kept."""
from oracle.notes.code import drop_code
from oracle.notes.parse import parse_note
from oracle.settings import DEFAULT_FOLDER_KINDS


def test_query_blocks_are_blanked_line_for_line():
    text = "Before.\n```dataviewjs\ndv.pages('\"Session Notes\"')\n```\nAfter."
    assert "Before.\n\n\n\nAfter." == drop_code(text)


def test_a_statblock_keeps_its_name_and_type():
    text = "```statblock\nname: Goblin Boss\ntype: humanoid\nac: 17\nhp: 21\n```"
    assert "\nname: Goblin Boss\ntype: humanoid\n\n\n" == drop_code(text)


def test_an_encounter_keeps_its_creatures():
    text = "```encounter\nname: Ambush\ncreatures:\n  - 3: Goblin\n  - Hobgoblin Captain\n```"
    assert "\nname: Ambush\ncreatures:\n  - 3: Goblin\n  - Hobgoblin Captain\n" == drop_code(text)


def test_templater_tags_and_inline_queries_go():
    assert "Made  on day .\n\n\nnext" == drop_code("Made <% tp.date.now() %> on day `= this.day`.\n<%*\n%>\nnext")


def test_plain_fences_and_admonitions_stay_prose():
    text = "```\nYou see a door.\n```\n\n```ad-scene\nThe hall is dark.\n```"
    assert text == drop_code(text)


def test_a_parsed_note_holds_no_code_but_keeps_its_lines():
    data = b"# Recaps\n```dataview\nTABLE file.name FROM \"Sessions\"\n```\nThe party rested."
    note = parse_note("Sessions.md", data, DEFAULT_FOLDER_KINDS)
    assert "# Recaps\n\n\n\nThe party rested." == note.text
