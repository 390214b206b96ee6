""""And then what?" goes on from the passage told last, in the notes' order, never into the GM's."""
from __future__ import annotations

import pytest

from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from oracle.retrieve.continuation import naming
from oracle.stems import Stemming
from oracle.types import Chunk, Clearance
from tests.conftest import write_notes

VAULT = {
    "Sessions/Session 1 - The Chapel.md": """
        ## The chapel
        The party searched the drowned chapel on Knell Isle at low tide. Under the altar, wrapped in
        oilcloth, they found the archduke's green hunting coat, still wet, with a torn sleeve and a
        ferry token from Dunmore in its pocket.

        ## GM Notes
        The coat was planted by the Hidden Hand to lure them north.

        ## The storm
        A storm caught the Patient Gull on the way back to the mainland. Tobin lost the mast in the
        second night, the hold flooded to the knees, and they drifted for two days with the coat
        wrapped in oilcloth before they reached Saltmarsh.
        """,
    "Sessions/Session 2 - The Harbour.md": """
        ## Recap
        Last time the party found the coat in the chapel and drifted to Saltmarsh in a storm.

        ## The harbour
        At Saltmarsh harbour the harbourmaster Ilsa impounded the Gull until they paid forty crowns.
        """,
    "People/Ilsa.md": "# Ilsa\nHarbourmaster of Saltmarsh, fond of forty-crown fines.\n",
}
SECTION = 50  # words a passage holds: each section of these short notes is a passage of its own
ASKED = "What did we find in the chapel on Knell Isle?"


@pytest.fixture
async def oracle(tmp_path, make_settings, open_index):
    index = open_index(make_settings(write_notes(tmp_path / "notes", VAULT), session_max_words=SECTION))
    await ingest(index)
    return Oracle(index)


# A word only each section holds, and the section it names.
SECTIONS = {"altar": "The chapel", "planted": "GM Notes", "flooded": "The storm", "Last time": "Recap",
            "impounded": "The harbour", "fines": "Ilsa"}


def sections(chunks) -> list[str]:
    """The sections each passage holds, in order: a passage of two sections names both."""
    return [" + ".join(name for word, name in SECTIONS.items() if word in c.text) for c in chunks]


def headings(retrieval) -> list[str]:
    return sections(h.chunk for h in retrieval.fused)


async def test_and_then_what_keeps_the_part_told_last_first_and_puts_the_next_part_second(oracle):
    asked = await oracle.search(ASKED)
    assert "The chapel" == headings(asked)[0]
    went_on = await oracle.search("And then what?", history=[ASKED])
    assert ["The chapel", "The storm"] == headings(went_on)[:2]
    assert asked.fused[0].chunk.id == went_on.told
    assert [1, 2] == [h.rank for h in went_on.fused[:2]]
    assert len({h.chunk.id for h in went_on.fused}) == len(went_on.fused)  # each passage once
    assert "planted" not in " ".join(h.chunk.text for h in went_on.pool)  # the GM's part is skipped
    assert went_on.to_json()["went_on_from"] == went_on.told


async def test_the_game_master_is_told_the_part_in_between(oracle):
    went_on = await oracle.search("And then what?", history=[ASKED], clearance=Clearance.GM)
    assert ["The chapel", "GM Notes"] == headings(went_on)[:2]


async def test_each_and_then_goes_one_passage_on_into_the_next_session_past_its_recap(oracle):
    thread = [ASKED, "And then what?"]
    third = await oracle.search("ok, and then?", history=thread)
    assert ["The storm", "The harbour"] == headings(third)[:2]
    assert "Session 2 - The Harbour" == third.fused[1].chunk.label
    # The story ends there: the last passage told stays first, with nothing after it.
    last = await oracle.search("¿y luego?", history=[*thread, "and then?", "What happened next?"])
    assert last.told is None  # "¿y luego?" is Spanish, and this campaign is English: searched by its words
    end = await oracle.search("What happened next?", history=[*thread, "and then?"])
    assert third.fused[1].chunk.id == end.told and "The harbour" == headings(end)[0]


async def test_a_question_that_asks_something_is_searched_by_its_words(oracle):
    plain = await oracle.search("And then what did Ilsa want?", history=[ASKED])
    assert plain.told is None  # neither the chapel nor the storm after it names her
    assert "Ilsa" in headings(plain)[:2]
    alone = await oracle.search("And then what?")  # no thread: nothing was told
    assert alone.told is None


async def test_the_notes_order_is_kept_by_the_reranker(tmp_path, make_settings, open_index, fake_ollama):
    settings = make_settings(write_notes(tmp_path / "notes", VAULT), ollama_host=fake_ollama.url, reranker="llm",
                             session_max_words=SECTION)
    index = open_index(settings)
    await ingest(index)
    fake_ollama.reset()
    oracle = Oracle(index)
    retrieval = await oracle.search("And then what?", history=[ASKED])
    selection = await oracle.select(retrieval)
    assert ["The chapel", "The storm"] == sections(selection.final[:2])
    assert not selection.rerank.used and "what came next" in selection.rerank.reason
    assert [] == fake_ollama.chat_requests()



async def test_in_passages_the_part_told_last_shown_to_its_end_is_not_shown_again(oracle):
    asked = await oracle.search(ASKED)
    before = await oracle.excerpts(asked, [h.chunk for h in asked.fused[:5]])
    assert "The chapel" == sections(e.chunk for e in before)[0] and before[0].text.endswith("in its pocket.")
    went_on = await oracle.search("And then what?", history=[ASKED])
    shown = await oracle.excerpts(went_on, [h.chunk for h in went_on.fused[:5]])
    assert ["The storm", "The harbour"] == sections(e.chunk for e in shown)[:2]


FERRY = {"Sessions/Session 3 - The Ferry.md": """
    ## The ferry
    The ferry to Dunmore left at dawn from the east quay.
    Its ferryman was Old Corrin, who wanted a song for every crossing.
    Mira sang the ballad of the drowned bell, badly, and he laughed until he wept.
    Halfway across, fog rolled in so thick that the bow lantern vanished from the stern.
    Something large bumped the hull twice, and Corrin stopped rowing and listened.
    Tobin threw the salted eel from his pack over the side as the old man told him to.
    The bumping stopped, and the fog thinned enough to show the Dunmore light.
    They landed at noon, soaked and silent, and Corrin refused their silver.
    """}


async def test_in_passages_the_part_told_last_goes_on_from_the_sentences_shown(tmp_path, make_settings, open_index):
    index = open_index(make_settings(write_notes(tmp_path / "notes", FERRY)))
    await ingest(index)
    oracle = Oracle(index)
    asked = await oracle.search("Who was the ferryman?")
    [before] = await oracle.excerpts(asked, [h.chunk for h in asked.fused[:5]])
    assert "Old Corrin" in before.text and not before.text.endswith("their silver.")
    went_on = await oracle.search("and then what?", history=["Who was the ferryman?"])
    [after] = await oracle.excerpts(went_on, [h.chunk for h in went_on.fused[:5]])
    assert after.chunk.id == before.chunk.id == went_on.told
    assert after.start_line == before.end_line + 1  # the very next sentence, on the next line
    assert "Old Corrin" not in after.text



async def test_what_came_next_of_someone_goes_on_through_the_passages_that_name_them(oracle):
    asked = await oracle.search(ASKED)
    tobin = await oracle.search("And what did Tobin do after that?", history=[ASKED])
    # It goes on from the chapel, told last, which does not name Tobin: the storm, after it, does.
    assert asked.fused[0].chunk.id == tobin.told
    assert "The storm" == headings(tobin)[0]


def test_a_passage_names_what_the_question_names_by_the_words_stems():
    chunk = Chunk("Session 4", "s4.md", "Session 4", "session", 1, 1, "Session 4", 1, 1,
                  "The knights pulled the cart out of the mire; los caballeros rieron.", "h")
    assert [chunk] == naming([chunk], ["pull"], Stemming("en"))
    assert [chunk] == naming([chunk], ["caballero"], Stemming("es"))
    assert [] == naming([chunk], ["duke"], Stemming("en"))


HARBOUR = "What happened at Saltmarsh harbour with the harbourmaster?"


async def test_and_before_that_goes_back_past_the_sessions_recap_to_the_end_of_the_one_before(oracle):
    asked = await oracle.search(HARBOUR)
    assert "The harbour" == headings(asked)[0]
    back = await oracle.search("And before that?", history=[HARBOUR])
    assert ["The harbour", "The storm"] == headings(back)[:2]
    assert ("back", asked.fused[0].chunk.id) == (back.went, back.told)
    assert back.to_json()["went_back_from"] == back.told and "went_on_from" not in back.to_json()
    # Each further step goes one passage back, never into the GM's; the GM is told the part between.
    further = await oracle.search("and earlier?", history=[HARBOUR, "And before that?"])
    assert ["The storm", "The chapel"] == headings(further)[:2]
    gm = await oracle.search("and earlier?", history=[HARBOUR, "And before that?"], clearance=Clearance.GM)
    assert ["The storm", "GM Notes"] == headings(gm)[:2]
    # A step back, then on again: the story goes on from the passage the step back reached.
    again = await oracle.search("and then?", history=[HARBOUR, "And before that?"])
    assert ["The storm", "The harbour"] == headings(again)[:2]


# ---------------------------------------------------------------------------------------------
# The passage the last answer told, carried by the thread


async def passage(oracle, question: str, section: str, clearance=Clearance.PLAYER) -> Chunk:
    """The passage of `section`, found by a question about it."""
    found = await oracle.search(question, clearance=clearance)
    return next(h.chunk for h in found.fused if sections([h.chunk]) == [section])


async def test_and_then_goes_on_from_the_passage_the_last_answer_told(oracle):
    # The model's answer to the chapel question told the storm: the thread goes on from there, not
    # from the chapel the search puts first.
    storm = await passage(oracle, "What happened in the storm on the way back?", "The storm")
    went_on = await oracle.search("And then what?", history=[ASKED], told=storm.id)
    assert ["The storm", "The harbour"] == headings(went_on)[:2]
    assert (storm.id, went_on.fused[1].chunk.id) == (went_on.told, went_on.reached)
    back = await oracle.search("and before that?", history=[ASKED], told=storm.id)
    assert ["The storm", "The chapel"] == headings(back)[:2]  # the GM's part between is skipped


async def test_a_told_passage_gone_or_not_the_readers_is_found_by_searching_again(oracle):
    gm_notes = await passage(oracle, "Who planted the coat?", "GM Notes", Clearance.GM)
    chapel = (await oracle.search(ASKED)).fused[0].chunk
    for told in (gm_notes.id, "a passage no longer in the index"):
        went_on = await oracle.search("And then what?", history=[ASKED], told=told)
        assert (chapel.id, ["The chapel", "The storm"]) == (went_on.told, headings(went_on)[:2])
        assert "planted" not in " ".join(h.chunk.text for h in went_on.pool)
    gm = await oracle.search("And then what?", history=[ASKED], told=gm_notes.id, clearance=Clearance.GM)
    assert ["GM Notes", "The storm"] == headings(gm)[:2]


async def test_a_question_that_asks_something_leaves_the_passage_told_aside(oracle):
    storm = await passage(oracle, "What happened in the storm on the way back?", "The storm")
    plain = await oracle.search("Who is Ilsa?", history=[ASKED], told=storm.id)
    assert (None, None, "Ilsa") == (plain.told, plain.reached, headings(plain)[0])
