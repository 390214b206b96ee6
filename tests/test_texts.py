"""What the Oracle writes itself (the passages instead of an answer, "nothing in the notes", the
Show sources button) is written in the question's language, from the data files; an answer saying
the notes hold nothing is told in every language that has texts."""
from __future__ import annotations

import importlib.util
import string
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from oracle.answer.results import abstains, compose
from oracle.lexicon import languages
from oracle.texts import Texts, question_language, texts

LEXICON = Path(importlib.util.find_spec("oracle.lexicon").origin).parent
WRITTEN = [code for code in languages() if "texts" in tomllib.loads((LEXICON / f"{code}.toml").read_text("utf-8"))]
PLACEHOLDERS = {"no_session_matching": {"session"}, "could_not_answer": {"reason"},
                "could_not_recap": {"reason", "label"}, "asked": {"name"}, "lines": {"start", "end"}}


def test_the_languages_of_the_vaults_have_texts_of_their_own():
    assert {"en", "es", "pt", "fr", "de", "it", "pl", "nl"} <= set(WRITTEN)


@pytest.mark.parametrize("code", WRITTEN)
def test_every_text_is_there_and_takes_what_the_oracle_fills_in(code):
    words = texts(code)
    for field in fields(Texts):
        if field.name in ("code", "abstains"):
            continue
        text = getattr(words, field.name)
        assert text.strip(), field.name
        named = {name for _, name, _, _ in string.Formatter().parse(text) if name}
        assert named == PLACEHOLDERS.get(field.name, set()), (code, field.name)
    if code != "en":
        assert words.not_found != texts("en").not_found


def test_a_language_without_texts_is_written_in_english():
    assert texts("nowhere").not_found == texts("en").not_found
    assert texts("nowhere").show_sources == "Show sources"


@pytest.mark.parametrize("question, vault, expected", [
    ("What happened to the archduke?", "en", "en"),
    ("¿Qué le pasó al archiduque?", "en", "es"),
    ("Qué le pasó al archiduque en la última sesión", "en", "es"),
    ("O que aconteceu com o arquiduque na última sessão?", "en", "pt"),
    ("Qu'est-ce qui est arrivé à l'archiduc dans la dernière session ?", "en", "fr"),
    ("Was ist mit dem Erzherzog in der letzten Sitzung passiert?", "en", "de"),
    ("Cosa è successo all'arciduca nell'ultima sessione?", "en", "it"),
    ("Strahd?", "es", "es"),  # nothing tells: the vault's language
    ("Co się stało z arcyksięciem na ostatniej sesji?", "en", "pl"),
    ("Wat is er met de aartshertog gebeurd in de laatste sessie?", "en", "nl"),
    ("Strahd?", "pl", "pl"),
    ("Strahd?", "nowhere", "en"),  # the vault's language has no texts: English
    ("Who is Strahd?", "es", "en"),
])
def test_the_question_s_language_is_told_by_its_words(question, vault, expected):
    assert question_language(question, vault) == expected


@pytest.mark.parametrize("code, text", [
    ("en", "The notes do not say what happened to the archduke."),
    ("en", "There is nothing in the notes about that."),
    ("es", "Las notas no dicen qué le pasó al archiduque."),
    ("es", "No hay ninguna mención del archiduque en las notas."),
    ("pt", "As notas não mencionam o arquiduque."),
    ("fr", "Les notes ne disent pas ce qui est arrivé à l'archiduc."),
    ("fr", "Les notes n'en parlent pas."),
    ("de", "Die Notizen sagen nichts über den Erzherzog."),
    ("it", "Le note non dicono cosa sia successo all'arciduca."),
    ("pl", "Notatki nie mówią, co stało się z arcyksięciem."),
    ("pl", "Brak wzmianki o arcyksięciu."),
    ("nl", "De aantekeningen zeggen niets over de aartshertog."),
    ("es", "The notes do not say."),  # a model that answered in English all the same
])
def test_an_answer_saying_the_notes_hold_nothing_abstains(code, text):
    assert abstains(compose("?", text, "llm", "", reranker="none", language=code))


@pytest.mark.parametrize("code, text", [
    ("en", "The archduke was poisoned at the feast [Session 3]."),
    ("es", "El archiduque no murió: huyó a las montañas [Sesión 3]. Las notas de la sesión 4 lo confirman."),
    ("pt", "O arquiduque fugiu para as montanhas [Sessão 3]."),
    ("fr", "L'archiduc ne meurt pas : il s'enfuit [Session 3]."),
    ("de", "Der Erzherzog floh in die Berge [Sitzung 3]."),
    ("it", "L'arciduca non è morto: è fuggito [Sessione 3]."),
    ("pl", "Arcyksiążę nie zginął: uciekł w góry [1925-02-10]. Notatki z sesji to potwierdzają."),
    ("nl", "De aartshertog vluchtte de bergen in [Sessie 3]."),
])
def test_an_answer_that_tells_something_does_not(code, text):
    assert not abstains(compose("?", text, "llm", "", reranker="none", language=code))
