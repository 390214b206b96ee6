"""oracle/answer/leaks.py: the secret runs are exactly the GM-only runs that no public text holds."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from oracle.answer.leaks import RUN_WORDS, SecretGuard, runs
from oracle.types import GM, PUBLIC, ChunkText

WORDS = st.sampled_from("the king bell rang at dawn and pip hid a key in flour".split())
TEXTS = st.lists(WORDS, min_size=0, max_size=40).map(" ".join)


def chunk(text: str, visibility: str) -> ChunkText:
    return ChunkText("id", "Session 1", text, visibility)


@given(st.lists(st.tuples(TEXTS, st.sampled_from([GM, PUBLIC])), max_size=8), st.integers(2, RUN_WORDS))
def test_the_secret_runs_are_the_gm_runs_no_public_text_holds(texts, n):
    chunks = [chunk(text, visibility) for text, visibility in texts]
    gm = set().union(*[runs(c.text, n) for c in chunks if c.visibility == GM])
    public = set().union(*[runs(c.text, n) for c in chunks if c.visibility != GM])
    assert SecretGuard(chunks, n).secret_runs == gm - public


def test_an_answer_repeating_a_secret_leaks_and_public_text_does_not():
    guard = SecretGuard([chunk("the hollow king is the heir of the drowned bell tower", GM),
                         chunk("the heir of the drowned bell tower rang at dawn", PUBLIC)], n=4)
    assert guard.leaks("They say the hollow king is the heir.")
    assert not guard.leaks("The heir of the drowned bell tower rang.")
    assert not SecretGuard([chunk("nothing secret here at all today friends", PUBLIC)], n=4).leaks("anything")
