"""A template's frontmatter: placeholders read as empty, code-written keys are no error, and code
that may say "mine" keeps the note."""
import pytest

from oracle.notes.frontmatter import split_frontmatter


def read(frontmatter: str) -> tuple[dict, list[str]]:
    fm, _, warnings = split_frontmatter(f"---\n{frontmatter}\n---\nText")
    return fm, warnings


def test_core_template_placeholders_read_as_empty():
    assert ({"title": None, "aliases": [], "tags": ["enemy"]}, []) == read(
        "title: {{title}}\naliases: [{{title}}]\ntags: [enemy]"
    )


def test_templater_values_read_as_empty():
    fm, warnings = read('title: <% tp.file.title %>\ndate: <% tp.date.now("YYYY-MM-DD") %>\naliases: ["<% x %>"]')
    assert ({"title": None, "date": None, "aliases": [""]}, []) == (fm, warnings)


def test_keys_written_by_templater_code_are_no_error():
    assert ({}, []) == read("<%*\nconst span = 'span>'\ntR += 'tags:' %>\n- timeline\n- <% result.tag %>/events/pc")
    assert ({"encounter": "new"}, []) == read("<%* const tags = '\\ntags:'; -%>\n<% aliases %>\nencounter: new<% tags %>")


def test_broken_yaml_still_warns_unless_template_code_completes_it():
    fm, warnings = read("aliases: [unclosed\ntitle: {{title}}")
    assert {} == fm
    assert 1 == len(warnings) and warnings[0].startswith("broken frontmatter ignored")
    assert ({}, []) == read("statblock: inline\n<%* tR += 'stats:' %>\n  - 12\n  name: x")


@pytest.mark.parametrize(
    "frontmatter",
    ['<%* tR += "visibility: gm" %>', "title: <% tp.file.title %>\n<% private %>", "<%* tR += 'tags:' %>\n- secret"],
)
def test_template_code_that_may_say_mine_keeps_the_note(frontmatter):
    fm, warnings = read(frontmatter)
    assert "gm" == fm["visibility"]
    assert 1 == len(warnings) and "treated as game-master-only" in warnings[0]
