"""bot/listening.py and bot/flood.py: which thread messages are questions, and flood control (pure)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.flood import FloodGate
from bot.listening import hear, is_acknowledgement, is_command
from oracle.lexicon import languages, lexicon


def heard(text: str, **facts) -> str | None:
    values = {"bot_id": 42, "mentions_oracle": False, "replies_to_oracle": False, "replies_to_member": False}
    return hear(text, **(values | facts)).question


@pytest.mark.parametrize("text", [
    "and then what?", "and then what", "who was the monk?", "ok so who is he", "what about the bell",
    "tell me about the compass", "wait, where did we leave the cart", "the old mage who was with him?",
    "so?", "ok?", "...and then?", "… and then?", "what about 3 goblins",
])
def test_questions_are_heard(text):
    assert heard(text) == text


@pytest.mark.parametrize("language, text", [
    ("es", "y luego qué pasó"), ("es", "¿quién era el monje"), ("es", "dime quién era el monje"),
    ("pt", "e depois o que aconteceu"), ("pt", "quem era o monge"), ("fr", "et ensuite"), ("de", "und dann"),
    ("es", "who was the monk"),  # players ask in English whatever the notes' language
])
def test_questions_are_heard_in_the_campaign_s_language(language, text):
    assert heard(text, language=language) == text


@pytest.mark.parametrize("language, text", [
    ("en", "go on"), ("en", "keep going"), ("en", "ok, continue"), ("es", "sigue"), ("pt", "continua"), ("pl", "dalej"),
    ("es", "go on"),  # English is heard in every campaign
])
def test_asking_the_story_to_go_on_is_heard(language, text):
    assert heard(text, language=language) == text


@pytest.mark.parametrize("language, text", [("en", "go on, roll it"), ("en", "sigue"), ("pl", "dalej Tobin")])
def test_go_on_said_of_something_else_or_in_another_language_is_a_remark(language, text):
    assert heard(text, language=language) is None


@pytest.mark.parametrize("text", [
    "thanks!", "thank you so much", "lol", "LMAO", "hahaha", "👍", "❤️", "🎲🎲", "ok cool thx",
    "!!", "...", "<:nat20:123456789012345678>",
])
def test_acknowledgements_are_not(text):
    assert heard(text) is None and is_acknowledgement(text)


@pytest.mark.parametrize("language, text", [
    ("es", "gracias!"), ("es", "vale"), ("es", "muchas gracias"), ("es", "jajaja"),
    ("pt", "valeu!"), ("pt", "obrigado"), ("pt", "kkkk"), ("pt", "beleza, entendi"),
    ("fr", "merci beaucoup"), ("de", "danke, alles klar"), ("it", "grazie mille"), ("pl", "dzięki"),
])
def test_acknowledgements_are_not_in_the_campaign_s_language(language, text):
    assert heard(text, language=language) is None and is_acknowledgement(text, lexicon(language))


def test_a_word_of_one_language_decides_nothing_in_another():
    """"e" opens a Portuguese follow-up ("e depois"); in an English campaign it is a remark's first word."""
    assert heard("e depois o que aconteceu", language="pt") is not None
    assert heard("e depois o que aconteceu", language="en") is None
    assert heard("valeu", language="en") is None  # and not a question in English: a remark
    assert not is_acknowledgement("valeu", lexicon("en"))


@pytest.mark.parametrize("text", ["!r 1d20", "!!roll", ".roll d20", "$balance", ";;play bard song", "?help", "!init"])
def test_other_bots_commands_are_not(text):
    assert heard(text) is None and is_command(text, "!?.$;")


def test_remarks_and_replies_to_members_are_not_but_the_oracle_is_always_heard():
    assert heard("I think it was the monk all along") is None
    assert heard("who was it then?", replies_to_member=True) is None
    assert heard("thanks", replies_to_oracle=True) == "thanks"
    assert heard("<@42> lol", mentions_oracle=True) == "lol"
    assert heard("<@!42> !r 1d20", mentions_oracle=True) == "!r 1d20"
    assert heard("<@42>", mentions_oracle=True) is None  # a bare mention says nothing
    assert heard("") is None  # no message-content intent: unmentioned text is blank


def test_prefixes_are_configurable():
    assert heard("%roll", prefixes="%") is None
    assert heard("!what about the bell", prefixes="%") == "!what about the bell"
    assert not is_command("!r 1d20", "") and heard("!who was it", prefixes="") == "!who was it"


@given(st.sampled_from(languages()).flatmap(
           lambda code: st.tuples(st.just(code), st.lists(st.sampled_from(sorted(lexicon(code).acknowledgements)),
                                                          min_size=1, max_size=5))),
       st.sampled_from(["", "!", "!!", ".", " 👍", " :)"]))
def test_any_few_acknowledgement_words_are_not_a_question(said, end):
    code, words = said
    assert heard(" ".join(words) + end, language=code) is None


def gate(burst=3, every=10.0, waiting=2):
    now = [0.0]
    return FloodGate(burst, every, waiting, clock=lambda: now[0]), now


def test_a_burst_passes_then_questions_wait_then_a_flood_is_dropped():
    flood, now = gate()
    assert [flood.reserve(1) for _ in range(6)] == [0.0, 0.0, 0.0, 10.0, 20.0, None]
    assert flood.reserve(2) == 0.0  # members are counted apart
    now[0] = 5.0  # half a token back: still two waiting
    assert flood.reserve(1) is None
    now[0] = 30.0  # both waiting questions have had their turn, and one token is back
    assert flood.reserve(1) == 0.0
    assert flood.reserve(1) == 10.0


def test_a_question_not_delivered_gives_its_token_back():
    flood, _ = gate(burst=1)
    assert flood.reserve(7) == 0.0
    flood.refund(7)
    assert flood.reserve(7) == 0.0
    flood.refund(7)
    flood.refund(7)  # never more than the burst
    assert [flood.reserve(7), flood.reserve(7)] == [0.0, 10.0]


def test_no_refill_time_means_no_limit():
    flood, _ = gate(burst=1, every=0.0, waiting=0)
    assert [flood.reserve(1) for _ in range(50)] == [0.0] * 50


@given(st.lists(st.tuples(st.floats(0, 60), st.booleans()), max_size=40))
def test_waits_never_exceed_the_queue_and_never_go_back_in_time(steps):
    flood, now = gate(burst=2, every=5.0, waiting=3)
    for advance, refund in steps:
        now[0] += advance
        delay = flood.reserve(1)
        if delay is not None:
            assert 0.0 <= delay <= 5.0 * 3 + 1e-9
            if refund:
                flood.refund(1)


@pytest.mark.parametrize("text", [
    "are you coming on friday?", "did you see that?", "will you bring snacks?", "ok, are you sure?",
    "can you make it next week?", "r u coming?",
])
def test_questions_put_to_someone_at_the_table_are_not(text):
    assert heard(text) is None


@pytest.mark.parametrize("text", [
    "do you know who sold the compass?", "can you remind me what the ledger said?", "could you tell me more",
    "do you remember the archduke's name?", "what do you think happened to the archduke?",
])
def test_asking_the_oracle_to_tell_is_heard(text):
    assert heard(text) == text


def test_a_message_that_mentions_a_member_or_a_role_is_table_talk_unless_it_mentions_the_oracle():
    assert heard("is Pip the heir?", mentions_member=True) is None
    assert heard("is Pip the heir?", mentions_member=True, mentions_oracle=True) == "is Pip the heir?"
    assert heard("is Pip the heir?") == "is Pip the heir?"
