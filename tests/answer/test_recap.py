"""`Oracle.recap` and `Oracle.cited` over the mini campaign's real index, with the fake Ollama.

Recap: the last session (or the one named) is retold from what the reader may read, its secrets
only for a game master; without the model, its opening lines as passages. Cited: a citation's lines
read again from the index, as far as the reader's clearance goes.
"""
from __future__ import annotations

import json

import pytest

from oracle.answer.citations import Citation
from oracle.answer.recap import opening_lines, pick_session
from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from oracle.types import Chunk, Clearance
from tests.conftest import MINI_CAMPAIGN, closed_port_url, quick_settings, request_kind, write_notes

SECRETS = ("SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR")


def chunk(label: str, sessions: tuple[int, ...], heading: str = "", part: int = 1, path: str = "log.md") -> Chunk:
    return Chunk(f"{label}-{part}", path, label, "session", part, 2, heading or label, part * 10, part * 10 + 5,
                 "text", "h", sessions=sessions)


def test_pick_session_takes_the_last_or_the_one_named():
    # Session numbers are metadata: a note's label is its file name ("009 - The Mill"), a hub's
    # section "log › Session 10"; the number picked by is the chunk's `sessions`, never the label's digits.
    chunks = [chunk("Session 2", (2,), "Session 2 — The Ford"), chunk("log › Session 10", (10,), "Session 10 — The Fall"),
              chunk("log › Session 10", (10,), "Session 10 — The Fall", part=2), chunk("009 - The Mill", (9,)),
              chunk("Interlude 40", ())]
    assert [c.id for c in pick_session(chunks, None)] == ["log › Session 10-1", "log › Session 10-2"]
    assert [c.id for c in pick_session(chunks, "2")] == ["Session 2-1"]
    assert [c.id for c in pick_session(chunks, "session 9")] == ["009 - The Mill-1"]
    assert [c.id for c in pick_session(chunks, "ford")] == ["Session 2-1"]
    assert [c.id for c in pick_session(chunks, "Interlude 40")] == ["Interlude 40-1"]  # its exact label
    assert pick_session(chunks, "11") == [] and pick_session(chunks, "40") == [] and pick_session([], None) == []


def test_opening_lines_skip_the_heading_and_stop_after_enough_words():
    lines = ["## Session 4 — Wick", "", "Old Wick lit every candle.", "", "word " * 70, "more"]
    assert opening_lines(lines) == (2, ["Old Wick lit every candle.", "", "word " * 70])
    assert opening_lines(["only line"]) == (0, ["only line"])


@pytest.mark.asyncio
async def test_recap_retells_public_text_for_players_and_everything_for_the_gm(
    tmp_path, fake_ollama, make_settings, open_quick_index
):
    def respond(request: dict):
        if request_kind(request) == "annotate":
            return {"summary": "a summary", "entities": []}
        return "Mirela crossed the Weeping Bridge [campaign-log › Session 3]."

    fake_ollama.responder = respond
    index = open_quick_index(make_settings(write_notes(tmp_path / "notes", MINI_CAMPAIGN), ollama_host=fake_ollama.url))
    await ingest(index)
    oracle = Oracle(index)
    fake_ollama.requests.clear()
    player = await oracle.recap("3")
    player_request = json.dumps(fake_ollama.chat_requests())
    fake_ollama.requests.clear()
    gm = await oracle.recap("3", clearance=Clearance.GM)
    gm_request = json.dumps(fake_ollama.chat_requests())
    last = await oracle.recap()
    missing = await oracle.recap("99")
    assert (player.mode, player.text) == ("llm", "Mirela crossed the Weeping Bridge [campaign-log › Session 3].")
    assert [(c.label, c.sessions) for c in player.citations] == [("campaign-log › Session 3", (3,))]
    assert not any(s in player_request for s in SECRETS)
    assert "SECRET-PIP" in gm_request and gm.mode == "llm"
    assert last.question == "Recap of Session 4"
    assert (missing.mode, missing.text) == ("not_found", "The notes hold no session matching “99”.")


@pytest.mark.asyncio
async def test_recap_without_the_model_shows_the_sessions_annotation_and_opening(tmp_path, make_settings, open_quick_index):
    index = open_quick_index(make_settings(write_notes(tmp_path / "notes", MINI_CAMPAIGN)))
    await ingest(index)
    recap = await Oracle(index).recap("1")
    assert recap.mode == "passages"
    assert recap.text.startswith("The Oracle could not write the recap (no running language model answers). "
                                 "campaign-log › Session 1 in the notes:")
    assert "> The party met Brother Aldous, the Candle Monk, in the Lantern Market of Greyhaven." in recap.text
    assert not any(s in recap.text for s in SECRETS)
    [citation] = recap.citations
    assert (citation.label, citation.path, citation.sessions) == ("campaign-log › Session 1", "sessions/campaign-log.md", (1,))


@pytest.mark.asyncio
async def test_and_then_what_after_a_recap_goes_on_into_the_next_session(tmp_path, make_settings, open_quick_index):
    # Session 1 in parts: the recap tells them all, and the thread goes on past the last.
    market = "The party haggled in the Lantern Market of Greyhaven until the bells rang noon. " * 2
    road = "Mirela and Teodric rode north along the drowned road while the rain fell all day. " * 2
    notes = {"Sessions/Session 1.md": f"## The market\n{market}\n\n## The road\n{road}\n",
             "Sessions/Session 2.md": "## The ford\nCaptain Dunstan Vale ambushed them at the ford.\n"}
    index = open_quick_index(make_settings(write_notes(tmp_path / "notes", notes), session_max_words=50))
    await ingest(index)
    oracle = Oracle(index)
    recap = await oracle.recap("1")
    assert len(recap.fragments) > 1 and recap.told == recap.fragments[-1].id
    went_on = await oracle.search("and then what?", history=["recap 1"], told=recap.told)
    assert [recap.told, (2,)] == [went_on.fused[0].chunk.id, went_on.fused[1].chunk.sessions]


@pytest.mark.asyncio
async def test_cited_lines_are_read_with_the_readers_clearance(tmp_path, make_settings, open_quick_index):
    notes = write_notes(tmp_path / "notes", MINI_CAMPAIGN)
    index = open_quick_index(make_settings(notes))
    await ingest(index)
    oracle = Oracle(index)
    lines = (notes / "sessions/campaign-log.md").read_text().splitlines()
    secret_line = next(i for i, line in enumerate(lines, 1) if "SECRET-COMPASS" in line)
    session = Citation("Session 1", "sessions/campaign-log.md", secret_line - 2, secret_line)
    heir = Citation("World: The_True_Heir", "world/The_True_Heir.md", 1, 6)
    gone = Citation("Session 77", "sessions/none.md", 1, 2)
    as_player = await oracle.cited([session, heir, gone], clearance=Clearance.PLAYER)
    as_gm = await oracle.cited([session, heir, gone], clearance=Clearance.GM)
    assert as_player[0].text.splitlines() == [
        "The party met Brother Aldous, the Candle Monk, in the Lantern Market of Greyhaven.",
        "Aldous sold Mirela a brass compass that always points at the drowned bell."]
    assert not any(s in c.text for c in as_player for s in SECRETS)
    assert [c.text for c in as_player[1:]] == ["", ""]
    assert "SECRET-COMPASS" in as_gm[0].text and "SECRET-HEIR" in as_gm[1].text and as_gm[2].text == ""


SPANISH_SESSIONS = {
    "Sesiones/sesion 24.md": """
        # Sesión 24
        ## Notas del máster
        Preparar el mapa del cubil. Comprar dados nuevos.
        ## Sucesos
        Thalorien y Facktoré subieron a la montaña y derrotaron al dragón verde junto al lago helado.
        El pueblo de Phandalin celebró con una fiesta que duró tres días.
        """,
    "Sesiones/sesion 25.md": """
        # Sesión 25
        ## Notas importantes de la sesión
        ## Sucesos
        ## Misiones
        - [ ] Encontrar la espada de Facktoré
        - [ ] Volver a Phandalin
        - [x] Derrotar al dragón
        """,
}


async def test_a_recap_skips_an_unfilled_session_and_retells_what_happened(tmp_path, open_quick_index):
    index = open_quick_index(quick_settings(write_notes(tmp_path / "notes", SPANISH_SESSIONS), tmp_path / "data",
                                            closed_port_url(), annotate=False))
    await ingest(index)
    last = await Oracle(index).recap()
    assert (last.question, last.mode) == ("Recap of sesion 24", "passages")
    [citation] = last.citations
    assert (citation.path, citation.start_line) == ("Sesiones/sesion 24.md", 5)  # under Sucesos, not the GM's notes
    assert "derrotaron al dragón verde" in last.text and "Comprar dados" not in last.text
    named = await Oracle(index).recap("25")  # named, the template is what is asked for
    assert "Recap of sesion 25" == named.question
