"""Follow-up expansion, pure: one test per case of the rule.

A question that starts with a connective (after any interjection), or is short (≤ 6 words), or
speaks of someone by a third-person pronoun only, and names nobody, is searched with the user's
previous turn in front. A proper noun after the first word, or a matched entity, overrides. The
previous turn is the last non-empty item of the history.
"""
from __future__ import annotations

import pytest

from oracle.retrieve.followup import expand_followup, has_proper_noun, needs_history

PREVIOUS = "Who ambushed the party at the ford?"
HISTORY = ["Who sold the compass?", PREVIOUS]


@pytest.mark.parametrize(
    "question",
    [
        "and what did they find inside the old chapel after the fight?",
        "but why would anyone trust a stranger who lies about everything?",
        "then where did they go once the bridge had fallen down?",
        "so what happened to the ledger after the chapel burned down?",
        "y qué encontraron dentro de la vieja capilla después de la pelea?",
        "pero por qué confiarían en un desconocido que miente sobre todo?",
        "entonces adónde fueron cuando el puente se vino abajo aquella noche?",
        "luego qué pasó con el libro de cuentas cuando ardió la capilla?",
    ],
)
def test_a_leading_connective_prepends_the_previous_turn_even_to_a_long_question(question):
    assert len(question.split()) > 6  # long: only the connective can trigger the expansion
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


@pytest.mark.parametrize("question", ["And then?", "AND what?", "But why?", "Entonces qué?", "Y luego?"])
def test_the_connective_is_case_insensitive(question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


def test_a_connective_must_be_the_whole_first_word():
    question = "someone told me the bridge was destroyed last night, is that true?"
    assert question == expand_followup(question, HISTORY)


@pytest.mark.parametrize("question", ["what about the compass?", "who paid?", "what did the monk sell them?"])
def test_a_short_question_naming_nobody_is_expanded(question):
    assert len(question.split()) <= 6
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


def test_seven_words_is_no_longer_short():
    question = "what did the old monk sell there?"
    assert 7 == len(question.split())
    assert question == expand_followup(question, HISTORY)


@pytest.mark.parametrize(
    "question",
    [
        "ok so how did we get the ship back after all that?",
        "wait, and then what happened at the bridge after the fight?",
        "oh but why would anyone trust a stranger who lies about everything?",
        "vale, y qué encontraron dentro de la vieja capilla después?",
    ],
)
def test_a_connective_after_an_interjection_still_starts_the_question(question):
    assert len(question.split()) > 6
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


def test_an_interjection_alone_is_not_a_connective():
    question = "ok what did the party find inside the old chapel after the fight?"
    assert question == expand_followup(question, HISTORY)


@pytest.mark.parametrize(
    "question",
    [
        "what did we do to the old mage who was with him?",
        "where did she hide the ledger after the chapel burned?",
        "how long had they been following the party before the ford?",
        "qué le dijo ella al capitán cuando llegaron al puente?",
    ],
)
def test_a_long_question_about_someone_by_pronoun_only_is_expanded(question):
    assert len(question.split()) > 6
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


def test_a_pronoun_beside_a_name_does_not_expand():
    question = "what did Mirela tell him about the compass and the bell?"
    assert question == expand_followup(question, HISTORY)
    question = "what did the innkeeper tell him about the compass and the bell?"
    assert question == expand_followup(question, HISTORY, names_entity=True)


def test_a_long_question_without_names_is_unchanged():
    question = "what did the party find inside the old chapel after the fight?"
    assert question == expand_followup(question, HISTORY)


@pytest.mark.parametrize(
    "question",
    [
        "and Mirela?",  # connective, short: still names its subject
        "what about the Saltmarsh?",  # short
        "but why did Teodric leave the party in the middle of that night?",  # connective, long
        "then what did old Wick do?",  # a capitalised word anywhere after the first
    ],
)
def test_a_proper_noun_after_the_first_word_overrides(question):
    assert has_proper_noun(question)
    assert not needs_history(question)
    assert question == expand_followup(question, HISTORY)


def test_a_capitalised_first_word_alone_is_not_a_proper_noun():
    # Every question starts with a capital; only `names_entity` (the matcher) knows "Mirela" is a name.
    assert not has_proper_noun("Mirela?")
    assert f"{PREVIOUS} Mirela?" == expand_followup("Mirela?", HISTORY)
    assert "Mirela?" == expand_followup("Mirela?", HISTORY, names_entity=True)


@pytest.mark.parametrize("question", ["can I see it?", "so I'm next?", "what would I'd have said?"])
def test_the_pronoun_i_is_not_a_proper_noun(question):
    assert not has_proper_noun(question)
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


@pytest.mark.parametrize("question", ["and the candle monk?", "what did old wick sell?"])
def test_names_entity_overrides(question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)
    assert question == expand_followup(question, HISTORY, names_entity=True)
    assert not needs_history(question, names_entity=True)


@pytest.mark.parametrize("history", [[], (), [""], ["", "   ", "\n\t"]])
def test_no_history_leaves_the_question_unchanged(history):
    for question in ["and then what?", "what about the compass?", "???"]:
        assert question == expand_followup(question, history)


def test_the_previous_turn_is_the_last_item_of_history():
    history = ["Who is Mirela?", "What did the monk sell?", "Who ambushed them at the ford?"]
    assert "Who ambushed them at the ford? and then?" == expand_followup("and then?", history)


def test_blank_history_items_are_skipped_and_the_turn_is_stripped():
    history = ["Who is Mirela?", "  Who ambushed them at the ford?\n", "", "   ", "\n"]
    assert "Who ambushed them at the ford? and then?" == expand_followup("and then?", history)


@pytest.mark.parametrize("question", ["???", "...", "🤔", "🎲🎲!", "¿?", ""])
def test_a_question_of_only_punctuation_or_emoji_is_expanded(question):
    assert needs_history(question)
    assert f"{PREVIOUS} {question}".strip() == expand_followup(question, HISTORY)


@pytest.mark.parametrize("question", ["so I’m next?", "and then I'll what?", "so I've lost it?"])
def test_other_forms_of_the_pronoun_i_are_not_proper_nouns(question):
    assert not has_proper_noun(question)
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)


@pytest.mark.parametrize("question", ["AND THEN?", "ok. What now?"])
def test_capitals_that_are_not_names_do_not_block_the_expansion(question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY)
