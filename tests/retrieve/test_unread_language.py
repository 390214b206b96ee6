"""An embedding model trained on one language votes a quarter on notes written in another: the bundled
model reads English, and its nearest windows in a Spanish vault are mostly noise (docs/decisions.md)."""
import math

import pytest

from oracle.index.embed import card_name, model_languages
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.oracle import Oracle
from oracle.retrieve.pipeline import UNREAD_LANGUAGE
from oracle.settings import BUNDLED_EMBED_MODEL
from oracle.types import Clearance
from tests.conftest import closed_port_url, quick_settings, write_notes
from tests.fakes.embedder import HashEmbedder


class EnglishHashEmbedder(HashEmbedder):
    languages = frozenset({"en"})


def test_the_models_languages_come_from_their_cards():
    assert frozenset({"en"}) == model_languages(card_name(BUNDLED_EMBED_MODEL, "/site-packages/x/model"))
    assert frozenset({"en"}) == model_languages("E5-Base-v2")
    # A multilingual model, or one nobody here knows, reads whatever its game master chose it for.
    assert None is model_languages("multilingual-e5-small") is model_languages("bge-m3")
    assert EnglishHashEmbedder().reads("en") and not EnglishHashEmbedder().reads("es")
    assert HashEmbedder().reads("es")


SPANISH = {
    "Sesiones/Sesion-3.md": "# Sesión 3\nEl dragón ataca Phandalin por la noche y quema los establos.",
    "Sesiones/Sesion-4.md": "# Sesión 4\nLos caballeros cruzan el pantano; la mantícora los sigue de lejos.",
    "Sesiones/Sesion-5.md": "# Sesión 5\nEl dragón vuelve a atacar: los barcos hundidos arden en el puerto.",
    "Lugares/Phandalin.md": "# Phandalin\nUn pueblo minero con una posada y un establo.",
}
ENGLISH = {
    "Sessions/Session 3.md": "# Session 3\nThe dragon attacks Phandalin by night and burns the stables.",
    "Sessions/Session 4.md": "# Session 4\nThe knights cross the marsh; the manticore follows from afar.",
    "Sessions/Session 5.md": "# Session 5\nThe dragon attacks again: the sunken ships burn in the harbour.",
    "Places/Phandalin.md": "# Phandalin\nA mining town with an inn and a stable.",
}


@pytest.mark.parametrize("notes, question, share", [
    (SPANISH, "¿Qué arde en el puerto?", UNREAD_LANGUAGE),
    (ENGLISH, "What burns in the harbour?", 1.0),
])
async def test_the_semantic_vote_counts_less_in_a_language_the_model_does_not_read(tmp_path, notes, question, share):
    folder = write_notes(tmp_path / "notes", notes)
    fused = {}
    for name, model in (("reads all", HashEmbedder()), ("reads English", EnglishHashEmbedder())):
        settings = quick_settings(folder, tmp_path / name, closed_port_url(), annotate=False)
        index = Index(settings, embedder=model)
        try:
            await ingest(index)
            retrieval = await Oracle(index).search(question)
        finally:
            await index.close()
        semantic_only = {h.chunk.id for h in retrieval.paths["semantic"]} - {
            h.chunk.id for name in ("keyword", "entity") for h in retrieval.paths[name]}
        fused[name] = {h.chunk.id: h.score for h in retrieval.fused if h.chunk.id in semantic_only}
    assert fused["reads all"] and fused["reads all"].keys() == fused["reads English"].keys()
    for cid, score in fused["reads all"].items():
        assert math.isclose(share * score, fused["reads English"][cid], rel_tol=1e-9), cid


@pytest.mark.parametrize("notes, code, told", [(SPANISH, "es", True), (ENGLISH, "en", False)])
async def test_the_status_tells_the_game_master_when_the_model_does_not_read_the_notes(
        tmp_path, open_quick_index, notes, code, told):
    folder = write_notes(tmp_path / "notes", notes)
    index = open_quick_index(quick_settings(folder, tmp_path / "data", closed_port_url(), annotate=False))
    await ingest(index)
    status = await index_status(index, clearance=Clearance.PLAYER)  # the bundled model, by the settings
    assert (code, not told) == (status.language, status.to_json()["embed_model_reads_language"])
    assert told == ("count a quarter" in status.language_line())
