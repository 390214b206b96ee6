"""What the table says to itself, out of the game (feedback, scheduling, safety tools), in any of the
vault's languages: readable in the notes, never searched or cited for what happened."""
import pytest

from oracle.index.ingest import ingest
from oracle.index.report import VaultReport
from oracle.notes.embeds import Vault
from oracle.notes.parse import parse_note
from oracle.oracle import Oracle
from oracle.policy import Policy
from oracle.types import Clearance
from tests.conftest import closed_port_url, quick_settings, write_notes


def read(path, text):
    return parse_note(path, text.encode(), {}, vault=Vault({path: text.encode()}, Policy()))


@pytest.mark.parametrize(
    "path, text, aside, story",
    [
        ("Sesiones/Sesion-3.md", "# Sesión 3\n## Notas importantes de la sesión\nJuan habló demasiado; usar la tarjeta X."
         "\n## Sucesos\nLos caballeros cruzaron el pantano y el dragón atacó la torre.", "Juan habló", "dragón atacó"),
        ("Sessions/Session 3.md", "# Session 3\n## What happened\nThe party crossed the marsh and the dragon attacked."
         "\n## Feedback\nSam talked too much; next game on Friday.", "Sam talked", "dragon attacked"),
        ("Sessões/Sessão 3.md", "# Sessão 3\n## Acontecimentos\nO grupo cruzou o pântano e o dragão atacou a torre."
         "\n## Perguntas pós-sessão\nMailson: o que achou do combate?", "Mailson", "dragão atacou"),
        ("Sessions/Session 0.md", "# Session 0\n## Session zero\nLines and veils: no spiders.\n## The world\nThe Drowned "
         "Coast, where the bells ring.", "spiders", "Drowned"),
    ],
)
def test_an_out_of_game_section_is_cut_from_what_is_indexed_and_the_story_kept(path, text, aside, story):
    note = read(path, text)
    assert aside not in note.text and story in note.text
    assert 1 == len(note.asides) and text.count("\n") == note.text.count("\n")


@pytest.mark.parametrize("heading", [
    "The Feedback Loop of the Clockwork God",
    # A title that opens with the word: a SciFact abstract's, and a story's.
    "Feedback Circuit among INK4 Tumor Suppressors Constrains Human Glioblastoma Development",
    "Schedule-dependent interaction between anticancer treatments",
    "Logistics of the Caravan Guild of Westmarch",
])
def test_a_heading_that_only_mentions_feedback_in_a_story_stays(heading):
    note = read("Sessions/Session 4.md", f"# Session 4\n## {heading}\nGears turned.")
    assert ((), True) == (note.asides, "Gears turned." in note.text)


@pytest.mark.parametrize("heading", ["Feedback", "Feedback from players", "Session zero notes", "Housekeeping (session 5)"])
def test_an_out_of_game_heading_may_say_a_little_more(heading):
    note = read("Sessions/Session 4.md", f"# Session 4\n## {heading}\nSam was late.\n## The fight\nGears turned.")
    assert (1, False, True) == (len(note.asides), "Sam was late" in note.text, "Gears turned." in note.text)


async def test_out_of_game_words_are_found_by_nobody_and_the_report_names_them(tmp_path, open_quick_index):
    notes = write_notes(tmp_path / "notes", {
        "Sesiones/Sesion-3.md": "# Sesión 3\n## Feedback\nqzcfeedbackword: Juan llegó tarde otra vez.\n"
                                "## Sucesos\nEl dragón atacó Phandalin y quemó los establos.",
        "Sesiones/Sesion-4.md": "# Sesión 4\n## Sucesos\nLos caballeros cruzaron el pantano.",
    })
    index = open_quick_index(quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False))
    report = await ingest(index)
    oracle = Oracle(index)
    for clearance in (Clearance.PLAYER, Clearance.GM):
        found = await oracle.search("qzcfeedbackword Juan tarde", clearance=clearance)
        assert [] == [h for h in found.pool if "qzcfeedbackword" in h.chunk.text]
    assert (await oracle.search("¿Qué atacó el dragón?")).fused
    made = VaultReport.from_json(report.vault)
    assert [("sections under the heading 'Feedback'", ("Sesiones/Sesion-3.md",))] == [
        (g.what, g.examples) for g in made.asides]
