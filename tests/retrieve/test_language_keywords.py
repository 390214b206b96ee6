"""Keyword search in the vault's own language: Spanish, Portuguese, French, German, Italian, Dutch and
Polish words stemmed by their own Snowball stemmer, accents folded, alike in the index and in the question;
an English vault searched exactly as before."""
import logging
import sqlite3

import pytest

from bot.__main__ import check_index
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.retrieve.keyword import fts_terms, keyword_path
from oracle.stems import Stemming
from oracle.types import Clearance
from tests.conftest import closed_port_url, quick_settings, write_notes


@pytest.mark.parametrize(
    "code, a, b",
    [
        ("es", "atacado", "ataca"), ("es", "mantícora", "manticora"), ("es", "naufragios", "naufragio"),
        ("pt", "atacou", "atacar"), ("pt", "Sessões", "sessoes"), ("fr", "attaqués", "attaque"),
        ("de", "Drachen", "Drache"), ("it", "attaccato", "attaccata"), ("nl", "aanvallen", "aanval"),
        ("pl", "statku", "statkiem"), ("pl", "Gavigana", "Gaviganem"), ("pl", "świątyni", "swiatynia"),
    ],
)
def test_a_words_forms_are_one_term_in_its_language(code, a, b):
    stemming = Stemming(code)
    assert stemming.text(a) == stemming.text(b) == stemming.term(a) == stemming.term(b)


def test_english_text_is_left_to_fts5s_own_porter():
    english = Stemming("en")
    text = "The party was ambushed at the Ford; Mirela's compass spun."
    assert (text, "ambushed") == (english.text(text), english.term("ambushed"))
    assert ["ambush", "compass"] == english.stems(["ambushed", "compass"])


def test_a_questions_terms_are_written_as_the_index_writes_them():
    assert ['"vec"', '"atac"', '"dragon"', '"phandalin"'] == fts_terms(
        "¿Cuántas veces ha atacado el dragón Phandalin?", Stemming("es"))
    # An English vault reads the words as written, and no Spanish word is an English stopword.
    assert ['"Cuántas"', '"veces"', '"ha"', '"atacado"', '"el"', '"dragón"', '"Phandalin"'] == fts_terms(
        "¿Cuántas veces ha atacado el dragón Phandalin?")


SPANISH = {
    "Sesiones/Sesion-3.md": "# Sesión 3\nEl dragón ataca Phandalin por la noche y quema los establos.",
    "Sesiones/Sesion-4.md": "# Sesión 4\nLos caballeros cruzan el pantano; la mantícora los sigue de lejos.",
    "Sesiones/Sesion-5.md": "# Sesión 5\nEl dragón vuelve a atacar: los barcos hundidos arden en el puerto.",
    "Lugares/Phandalin.md": "# Phandalin\nUn pueblo minero con una posada y un establo.",
}


async def _ingested(tmp_path, open_quick_index, files):
    """The index of `files`, ingested, and its store."""
    notes = write_notes(tmp_path / "notes", files)
    index = open_quick_index(quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False))
    await ingest(index)
    return index, await index.store()


async def test_a_spanish_vault_is_searched_in_spanish(tmp_path, open_quick_index):
    index, store = await _ingested(tmp_path, open_quick_index, SPANISH)
    assert "es" == (await store.stemming()).code == await index.language()  # the bot hears its threads in it
    found = await keyword_path(store, "¿Cuántas veces ha atacado el dragón?", Clearance.PLAYER, 8,
                               stemming=await store.stemming())
    chunks = {c.id: c.path for c in await store.chunks_by_ids([cid for cid, _ in found])}
    assert {"Sesiones/Sesion-3.md", "Sesiones/Sesion-5.md"} == {chunks[cid] for cid, _ in found[:2]}
    manticora = await keyword_path(store, "¿dónde está la manticora?", Clearance.PLAYER, 8,
                                   stemming=await store.stemming())
    assert "Sesiones/Sesion-4.md" == (await store.chunks_by_ids([manticora[0][0]]))[0].path


async def test_an_english_vault_keeps_its_text_as_the_keyword_index(tmp_path, open_quick_index, mini_notes):
    index = open_quick_index(quick_settings(mini_notes, tmp_path / "data", closed_port_url(), annotate=False))
    await ingest(index)
    with sqlite3.connect(index.settings.sqlite_path) as db:
        assert [] == db.execute("SELECT id FROM chunks WHERE kw_head != head OR kw_text != text").fetchall()
        assert "en" == db.execute("SELECT value FROM meta WHERE key = 'language'").fetchone()[0]


async def test_an_index_written_before_in_another_language_is_rewritten_whole(tmp_path, open_quick_index):
    """An index whose keyword copy was written in English (by an earlier release, which recorded no
    stemmer) of notes read as Spanish now: every chunk is written again, none lost."""
    notes = write_notes(tmp_path / "notes", SPANISH)
    settings = quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False)
    first = await ingest(open_quick_index(settings))
    with sqlite3.connect(settings.sqlite_path) as db:
        db.execute("UPDATE chunks SET kw_head = head, kw_text = text")
        db.execute("DELETE FROM meta WHERE key IN ('language', 'stemming')")
    second = await ingest(open_quick_index(settings))
    assert first.chunks == second.chunks > 0
    with sqlite3.connect(settings.sqlite_path) as db:
        assert [] == db.execute("SELECT id FROM chunks WHERE kw_text = text").fetchall()


POLISH = {
    "Sesje/2024-03-01.md": "# Sesja 1\nKultyści przypłynęli statkiem i zabili kapitana, a potem uciekli do miasta.",
    "Sesje/2024-03-08.md": "# Sesja 2\nW świątyni Gavigan opowiada nam o masce, której nie chce oddać.",
    "Postacie/Gavigan.md": "# Gavigan\nBogaty przemysłowiec z Nowego Jorku, który jest też w kulcie.",
}


async def test_a_polish_question_finds_the_other_case_of_its_words(tmp_path, open_quick_index):
    _, store = await _ingested(tmp_path, open_quick_index, POLISH)
    assert "pl" == (await store.stemming()).code
    found = await keyword_path(store, "Co się stało na statku?", Clearance.PLAYER, 8, stemming=await store.stemming())
    assert ["Sesje/2024-03-01.md"] == [c.path for c in await store.chunks_by_ids([found[0][0]])]


async def _ingested_then(tmp_path, open_quick_index, notes, *statements):
    """The settings of an index of `notes`, ingested, then changed by `statements` as another release
    would have left it."""
    settings = quick_settings(notes, tmp_path / "data", closed_port_url(), annotate=False)
    await ingest(open_quick_index(settings))
    with sqlite3.connect(settings.sqlite_path) as db:
        for statement in statements:
            db.execute(statement)
    return settings


async def test_an_index_written_by_another_stemmer_is_told_then_rewritten_whole(tmp_path, open_quick_index, caplog):
    """A new Snowball release may stem a word otherwise than the one the index was written with: the
    status and the bot's start say so until an ingest writes every keyword copy again."""
    settings = await _ingested_then(tmp_path, open_quick_index, write_notes(tmp_path / "notes", POLISH),
                                    "UPDATE chunks SET kw_text = text",
                                    "UPDATE meta SET value = 'pl/polish/snowball 0.1' WHERE key = 'stemming'")
    index = open_quick_index(settings)
    status = await index_status(index, clearance=Clearance.PLAYER)
    assert (False, False) == (status.stemmer_current, status.to_json()["stemmer_current"])
    assert "another stemmer" in status.language_line()
    with caplog.at_level(logging.WARNING, logger="bot"):
        await check_index("Maski", index)
    assert ["Maski"] == [r.args[0] for r in caplog.records if "another stemmer" in r.getMessage()]

    await ingest(index)
    with sqlite3.connect(settings.sqlite_path) as db:
        assert [] == db.execute("SELECT id FROM chunks WHERE kw_text = text").fetchall()
        assert Stemming("pl").key == db.execute("SELECT value FROM meta WHERE key = 'stemming'").fetchone()[0]
    assert (await index_status(index, clearance=Clearance.PLAYER)).stemmer_current


@pytest.mark.parametrize("files, code, rewritten", [(POLISH, "pl", True), (SPANISH, "es", True), (None, "en", False)])
async def test_an_earlier_releases_index_is_rewritten_only_where_it_wrote_otherwise(
        tmp_path, open_quick_index, mini_notes, files, code, rewritten):
    """An earlier release recorded the language alone and wrote Polish as it is: a Polish or Spanish
    index is written again once, an English one (its text as it is, then as now) is left alone."""
    notes = write_notes(tmp_path / "vault", files) if files else mini_notes
    settings = await _ingested_then(tmp_path, open_quick_index, notes, "UPDATE chunks SET kw_text = 'left as it was'",
                                    "DELETE FROM meta WHERE key = 'stemming'")
    index = open_quick_index(settings)
    assert (code, not rewritten) == (await index.language(), await index.stemmer_current())
    await ingest(index)
    with sqlite3.connect(settings.sqlite_path) as db:
        kept = db.execute("SELECT count(*) FROM chunks WHERE kw_text = 'left as it was'").fetchone()[0]
    assert (kept == 0) is rewritten and await index.stemmer_current()
