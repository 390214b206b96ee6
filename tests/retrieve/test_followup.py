"""Follow-up expansion, pure: one test per case of the rule.

A question is searched with the user's previous turn in front when it is elliptical ("what about…",
"and then", "why not", "the same") or has a third-person pronoun before any name in it (a pronoun
after a name is about that name), or starts with a connective (after any interjection), even if it
names someone; otherwise when it is short (≤ 6 words) and names nobody. A proper noun after the first
word, or a matched entity, overrides only that last case. The previous turn is the last
non-empty item of the history.
"""
from __future__ import annotations

import random
import re

import pytest

from oracle.lexicon import languages, lexicon
from oracle.retrieve.followup import (
    asks_what_next,
    dangling_pronoun,
    expand_followup,
    has_proper_noun,
    is_elliptical,
    needs_history,
    went_of,
)

PREVIOUS = "Who ambushed the party at the ford?"
HISTORY = [PREVIOUS]


def lang(question: str) -> str:
    """The language a question of these tests is asked in, as a campaign in that language reads it."""
    spanish = re.search(r"[¿¡áéíóúñ]", question) or question.split()[:1] and question.split()[0].lower().strip("¿,") in {
        "y", "pero", "entonces", "luego", "vale", "qué", "que"}
    return "es" if spanish else "en"


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
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


@pytest.mark.parametrize("question", ["And then?", "AND what?", "But why?", "Entonces qué?", "Y luego?"])
def test_the_connective_is_case_insensitive(question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


def test_a_connective_must_be_the_whole_first_word():
    question = "someone told me the bridge was destroyed last night, is that true?"
    assert question == expand_followup(question, HISTORY, code=lang(question))


@pytest.mark.parametrize("question", ["what about the compass?", "who paid?", "what did the monk sell them?"])
def test_a_short_question_naming_nobody_is_expanded(question):
    assert len(question.split()) <= 6
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


def test_seven_words_is_no_longer_short():
    question = "what did the old monk sell there?"
    assert 7 == len(question.split())
    assert question == expand_followup(question, HISTORY, code=lang(question))


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
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


def test_an_interjection_alone_is_not_a_connective():
    question = "ok what did the party find inside the old chapel after the fight?"
    assert question == expand_followup(question, HISTORY, code=lang(question))


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
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


def test_a_pronoun_after_a_name_does_not_expand_but_beside_an_uncapitalised_entity_it_does():
    # Was "a pronoun beside a name does not expand". After a capitalised name it still does not: the
    # pronoun is taken to be about a name of the question.
    question = "what did Mirela tell him about the compass and the bell?"
    assert dangling_pronoun(question, lang(question)) is None
    assert question == expand_followup(question, HISTORY, code=lang(question))
    # But a matched entity that is not capitalised ("the innkeeper") says nothing of where it is in
    # the question, so it no longer stops a pronoun from taking the thread's subject.
    question = "what did the innkeeper tell him about the compass and the bell?"
    assert "him" == dangling_pronoun(question, lang(question))
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


def test_a_long_question_without_names_is_unchanged():
    question = "what did the party find inside the old chapel after the fight?"
    assert question == expand_followup(question, HISTORY, code=lang(question))


@pytest.mark.parametrize(
    "question",
    [
        "and Mirela?",  # asks the previous question of Mirela
        "but why did Teodric leave the party in the middle of that night?",
        "then what did old Wick do?",
        # In the banks: "it" and "inside", "the final round", "when she turned up" are the thread's.
        "And where did Kleb end up ditching it once we got inside?",  # adventure-log's al-41
        "And who did Tato fight in the final round?",  # raiders' rl-31
        "And what did Lady Carrow say when she turned up?",  # the sample bank's s-041
        "¿y qué le dijo a Ludovico de su serpiente?",  # mythic's mb-24
    ],
)
def test_a_leading_connective_expands_a_question_that_names_someone(question):
    assert has_proper_noun(question)
    expected = f"{PREVIOUS} {question}"
    assert expected == expand_followup(question, HISTORY, code=lang(question))
    assert expected == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


@pytest.mark.parametrize("question", ["what did Wick sell?", "who paid Mirela?", "¿Quién pagó a Mirela?"])
def test_a_proper_noun_after_the_first_word_overrides_shortness(question):
    assert len(question.split()) <= 6 and has_proper_noun(question)
    assert not needs_history(question, code=lang(question))
    assert question == expand_followup(question, HISTORY, code=lang(question))


def test_a_capitalised_first_word_alone_is_not_a_proper_noun():
    # Every question starts with a capital; only `names_entity` (the matcher) knows "Mirela" is a name.
    assert not has_proper_noun("Mirela?")
    assert f"{PREVIOUS} Mirela?" == expand_followup("Mirela?", HISTORY)
    assert "Mirela?" == expand_followup("Mirela?", HISTORY, names_entity=True)


@pytest.mark.parametrize("question", ["can I see it?", "so I'm next?", "what would I'd have said?"])
def test_the_pronoun_i_is_not_a_proper_noun(question):
    assert not has_proper_noun(question)
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


@pytest.mark.parametrize("question", ["the candle monk?", "what did old wick sell?"])
def test_names_entity_overrides(question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))
    assert question == expand_followup(question, HISTORY, names_entity=True, code=lang(question))
    assert not needs_history(question, names_entity=True)


@pytest.mark.parametrize("history", [[], (), [""], ["", "   ", "\n\t"]])
def test_no_history_leaves_the_question_unchanged(history):
    for question in ["and then what?", "what about the compass?", "???"]:
        assert question == expand_followup(question, history, code=lang(question))


def test_the_previous_turn_and_the_latest_turn_that_named_the_subject_are_searched():
    history = ["Who is Mirela?", "What did the monk sell?", "Who ambushed them at the ford?"]
    assert "Who is Mirela? Who ambushed them at the ford? and then?" == expand_followup("and then?", history)
    named = ["What happened at the ford?", "What did the monk sell?", "Who ambushed Teodric?"]
    assert "What happened at the ford? Who ambushed Teodric? and then?" == expand_followup("and then?", named)


@pytest.mark.parametrize("code, history, question, expected", [
    # maski-nyarlathotepa-pl's mk-19: "this place" is JuJu House, asked of two turns before.
    ("pl", ["Co znaleźliśmy w JuJu House?", "A ta książka z Harvardu, skąd się tam wzięła?"],
     "Kto w ogóle prowadzi to miejsce?",
     "Co znaleźliśmy w JuJu House? A ta książka z Harvardu, skąd się tam wzięła? Kto w ogóle prowadzi to miejsce?"),
    # The previous turn names someone else: the thread's subject still comes first.
    ("en", ["Who is Mirela?", "Why did Teodric leave?"], "and then?", "Who is Mirela? Why did Teodric leave? and then?"),
])
def test_the_turn_that_opened_the_thread_is_searched_too(code, history, question, expected):
    assert expected == expand_followup(question, history, code=code)


def test_a_thread_keeps_its_subject_from_its_first_question(history=("¿Quién es Facktoré?", "¿Y qué hizo en la sesión 3?")):
    assert "¿Quién es Facktoré? ¿Y qué hizo en la sesión 3? ¿y después?" == expand_followup(
        "¿y después?", history, code="es")


def test_blank_history_items_are_skipped_and_the_turn_is_stripped():
    history = ["Who is Mirela?", "  Who ambushed them at the ford?\n", "", "   ", "\n"]
    assert "Who is Mirela? Who ambushed them at the ford? and then?" == expand_followup("and then?", history)


@pytest.mark.parametrize("code, question", [
    ("pt", "e depois, o que aconteceu com o grupo na estrada para o castelo?"),
    ("fr", "et ensuite, où sont-ils allés après la bataille du vieux pont ?"),
    ("de", "und dann, wohin ist die Gruppe nach dem Kampf an der Brücke gegangen?"),
])
def test_follow_up_words_of_the_vaults_language(code, question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=code)


def test_a_word_of_one_language_never_decides_a_question_in_another():
    # Spanish "y" opens a follow-up in a Spanish campaign; in an English one this long question stands alone.
    question = "y qué encontraron dentro de la vieja capilla después de la pelea?"
    assert question == expand_followup(question, HISTORY, code="en")
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code="es")


@pytest.mark.parametrize("question", ["???", "...", "🤔", "🎲🎲!", "¿?", ""])
def test_a_question_of_only_punctuation_or_emoji_is_expanded(question):
    assert needs_history(question, code=lang(question))
    assert f"{PREVIOUS} {question}".strip() == expand_followup(question, HISTORY, code=lang(question))


@pytest.mark.parametrize("question", ["so I’m next?", "and then I'll what?", "so I've lost it?"])
def test_other_forms_of_the_pronoun_i_are_not_proper_nouns(question):
    assert not has_proper_noun(question)
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


@pytest.mark.parametrize("question", ["AND THEN?", "ok. What now?"])
def test_capitals_that_are_not_names_do_not_block_the_expansion(question):
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, code=lang(question))


# A pronoun or an ellipsis keeps the thread's subject even when the question names someone else.


@pytest.mark.parametrize(
    ("history", "question"),
    [
        # raiders-of-the-lost-dice: "she" is Thinora; the Barbed Ruin is who she did not fight.
        (["Who is Thinora?"], "Why didn't she come with us to fight the Barbed Ruin?"),
        (["Tell me about our deal with Akistos."], "Did he ever say who built the Vault of Leverage?"),
        # adventure-log (al-29): the matcher finds a session titled "…the Ship", not the captain.
        (["Who is Captain Alabaster?"], "What was the name of the ship he captained?"),
        # ebullient-heist: "he" is the one met at the Tiger's Eye, not anyone in Waterdeep.
        (["Who did we meet at the Tiger's Eye?"], "What does he do for a living in Waterdeep?"),
        (["¿Quién es Thinora?"], "¿Por qué ella no vino con nosotros a luchar contra Malachai?"),
    ],
)
def test_a_pronoun_before_another_name_keeps_the_subject(history, question):
    assert dangling_pronoun(question, lang(question))
    expected = f"{history[-1]} {question}"
    assert expected == expand_followup(question, history, code=lang(question))
    assert expected == expand_followup(question, history, names_entity=True, code=lang(question))


def test_a_name_that_opens_the_question_ties_no_pronoun():
    # Every question starts with a capital: the first word is not known to be a name.
    question = "Thinora, why did she leave the monastery so early?"
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


@pytest.mark.parametrize(
    "question",
    [
        "what did Mirela tell her brother about the compass?",  # a possessive after the name
        "did Teodric say where he was going after the ford?",  # a subject after the name
        "What did Lady Carrow say when she turned up?",
        "What did Vex and Sefa find when they sneaked into the camp that night?",  # s-044
        "¿Qué dijo Mirela cuando ella llegó al puente aquella noche?",
        # Stand-alone questions of the banks: the pronoun is a name said before it.
        "How much did the Counting Man add to the debt when Vex mocked him?",  # sample s-008
        "What gifts did Bok give us after Tato's fight with him up in the tree?",  # raiders' rl-05
        "Go through our whole history with Captain Paij, from joining her crew to breaking her out.",
        "When we fought the Barbed Ruin, why didn't she come?",  # the cost: taken to be the Barbed Ruin
    ],
)
def test_a_pronoun_after_a_name_is_about_the_question(question):
    assert dangling_pronoun(question, lang(question)) is None
    assert not is_elliptical(question, lang(question))
    assert question == expand_followup(question, HISTORY, code=lang(question))
    assert question == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


@pytest.mark.parametrize(
    "question",
    [
        "what about the Saltmarsh?",  # was "a proper noun overrides": it asks the previous question of it
        "ok, what about Mirela?",
        "how about Teodric?",
        "And then what did Mirela do once the bridge had fallen down?",
        "Why not Thinora?",
        "so what else did Mirela find in the old chapel after the fight?",
        "Did Mirela do the same?",
        "same for Teodric?",
        "¿Y qué hay de Mirela?",
        "¿Y Mirela hizo lo mismo?",
        "y luego qué hizo Mirela?",
        "¿Por qué no Teodric?",
    ],
)
def test_an_elliptical_question_expands_even_when_it_names_someone(question):
    assert is_elliptical(question, lang(question))
    assert f"{PREVIOUS} {question}" == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


@pytest.mark.parametrize(
    "question",
    [
        "Is Mirela the same person as the hooded woman at the ford?",  # says the same as what
        "¿Mirela hizo lo mismo que Teodric en el puente?",
        "what did the monk say about the compass at the old chapel?",  # "about", not "what about"
        "why did nobody go back for the compass at the old chapel?",  # not "why not"
    ],
)
def test_words_of_an_ellipsis_that_are_not_one(question):
    assert not is_elliptical(question, lang(question))
    assert question == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


@pytest.mark.parametrize(
    "question",
    [
        "What did Redhand swear afterwards?",  # the sample bank's s-039
        "What did we learn from the Vault of Leverage?",  # raiders' rl-32
    ],
)
def test_a_question_naming_its_subject_with_no_dangling_pronoun_is_unchanged(question):
    assert dangling_pronoun(question, lang(question)) is None
    assert not is_elliptical(question, lang(question))
    assert question == expand_followup(question, HISTORY, names_entity=True, code=lang(question))


@pytest.mark.parametrize("code, question", [
    ("en", "And then what?"), ("en", "ok so what happened next?"), ("en", "then?"), ("en", "AND AFTER THAT?"),
    ("en", "what did they do next?"), ("en", "where did we go after that?"), ("en", "what's next?"),
    ("en", "tell me what happened to us afterwards"), ("en", "go on"),
    ("es", "¿Y luego?"), ("es", "¿Y luego qué?"), ("es", "¿Y qué pasó después?"), ("es", "¿Y después de eso?"),
    ("pt", "E depois?"), ("pt", "E o que aconteceu depois?"), ("pt", "E depois disso?"),
    ("pl", "A co było dalej?"), ("pl", "I co potem?"), ("pl", "A co się stało potem?"), ("pl", "A co się z nią potem stało?"),
    ("de", "Und was dann?"),
    ("de", "Wie ging es weiter?"), ("fr", "Que s'est-il passé ensuite ?"), ("fr", "Et après ça ?"),
    ("it", "E poi?"), ("it", "Cosa è successo dopo?"), ("nl", "En toen?"), ("nl", "Wat gebeurde er daarna?"),
    ("es", "and then what?"),  # English is read in every campaign
])
def test_a_question_asking_only_what_came_next(code, question):
    assert asks_what_next(question, code)


@pytest.mark.parametrize("code, question", [
    ("en", "And then what did the duke do?"),  # it asks something: searched by its words
    ("en", "What happened to the duke?"), ("en", "so?"), ("en", "and?"), ("en", "What is next to the chapel?"),
    ("en", ""), ("en", "???"), ("en", "What happened after the duel?"), ("en", "What happened next session?"),
    ("en", "who did that?"), ("en", "what now?"),
    ("es", "¿Y qué más?"),  # what else, not what next
    ("pt", "E o que aconteceu?"),  # what happened, not what next
    ("es", "¿Y qué pasó después del duelo?"),
])
def test_a_question_that_asks_something_else_is_not_what_came_next(code, question):
    assert not asks_what_next(question, code)


@pytest.mark.parametrize("code", languages())
def test_what_came_next_is_told_by_its_words_in_any_order_not_by_whole_phrases(code):
    """Any arrangement of a language's words that name nothing around one of its `next` words asks what
    came next; the same question with a word that names a thing ("Vexhollow") asks about that thing."""
    lex = lexicon(code)
    markers = sorted(" ".join(m) for m in lex.next)
    said = sorted({*lex.connectives, *lex.interjections, *lex.pronouns, *lex.happen, *lex.questions}
                  - {*markers, *(" ".join(m) for m in lex.before)})  # a `before` word too goes neither way
    rng = random.Random(code)
    for _ in range(200):
        words = rng.sample(said, rng.randint(0, 4)) + [rng.choice(markers)]
        rng.shuffle(words)
        question = " ".join(words).capitalize() + "?"
        assert asks_what_next(question, code), question
        named = words[:]
        named.insert(rng.randint(0, len(named)), "Vexhollow")
        assert not asks_what_next(" ".join(named) + "?", code), named
    assert not asks_what_next(" ".join(rng.sample(said, 4)) + "?", code)  # nothing says "next"


@pytest.mark.parametrize("code, question, went", [
    ("en", "What did Kleb do after that?", ("on", ("kleb",))), ("en", "And then what did the duke want?", ("on", ("duke", "want"))),
    ("es", "¿Y qué hizo Brank luego?", ("on", ("brank",))), ("pl", "A co Henry potem zrobił?", ("on", ("henry",))),
    ("en", "and then what?", ("on", ())), ("en", "Who is Kleb?", None),
    ("en", "And before that?", ("back", ())), ("en", "What was Kleb doing earlier?", ("back", ("kleb",))),
    ("es", "¿Y antes de eso?", ("back", ())), ("pt", "E o que a Iaris fazia antes disso?", ("back", ("iaris",))),
    ("pl", "A co Henry robił wcześniej?", ("back", ("henry",))), ("de", "Und davor?", ("back", ())),
    ("en", "What happened after the duel but before the storm?", None),  # both ways: neither
])
def test_which_way_a_question_goes_from_what_was_told_and_what_it_names(code, question, went):
    assert went == went_of(question, code)


def test_what_came_next_is_said_in_the_campaigns_language_or_english_only():
    assert not asks_what_next("¿Y luego?", "pl")
    assert not asks_what_next("A co było dalej?", "es")


def test_a_polish_pronoun_is_read_in_any_of_its_cases():
    """Polish declines its pronouns: "z nią" (with her), "o nim" (about him), "dla niego" (for him)."""
    for question in ["Co się stało z nią w Kairze?", "Co wiemy o nim od Eliasa?", "Kto pracował dla niego w Londynie?"]:
        assert dangling_pronoun(question, "pl"), question
