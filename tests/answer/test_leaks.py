"""oracle/answer/leaks.py: the secret runs are exactly the GM-only runs that no public text holds."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracle.answer.leaks import RUN_WORDS, SecretGuard, StreamCheck, runs
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


# How a model may write a word of the notes: in another case or with accents, and between words
# punctuation that normalizing turns into words (™ is "tm", ½ is "1⁄2") or joins to a word, all
# kinds of whitespace, citations and other brackets.
SPELLINGS = {"bell": ["bell", "Béll", "BELL"], "flour": ["flour", "ﬂour"], "king": ["king", "King"]}
# A citation, checked or not, splits no run: the model may cite inside a secret's words.
CITATIONS = [" [Session 3] ", " [Sheet: Kat; Session 2] ", "[Note: the bell]", " [Sesión 4, World: Gods] "]
SPACES = st.sampled_from([" ", "  ", "\n", "\u00a0", "\t", ", ", " — ", "’", *CITATIONS])
BETWEEN = SPACES | st.sampled_from([" ™ ", " ½ ", "™", "-", " [sic] ", " [[Session 1]] ", " [the bell "])


@st.composite
def written(draw, secret: str, n: int) -> str:
    """An answer of public-looking words with, mostly, a stretch of `secret` (often a whole run of
    `n` words) written in it."""
    before, after = draw(st.lists(WORDS, max_size=12)), draw(st.lists(WORDS, max_size=12))
    words = secret.split()
    i = draw(st.integers(0, max(0, len(words) - 1)))
    stretch = words[i : i + draw(st.integers(0, n + 2))]
    out = "".join(draw(st.sampled_from(SPELLINGS.get(w, [w]))) + draw(BETWEEN) for w in before)
    out += "".join(draw(st.sampled_from(SPELLINGS.get(w, [w]))) + draw(SPACES) for w in stretch)
    return out + "".join(draw(st.sampled_from(SPELLINGS.get(w, [w]))) + draw(BETWEEN) for w in after)


@settings(max_examples=400)
@given(st.data(), st.lists(TEXTS, min_size=1, max_size=3), TEXTS, st.integers(2, RUN_WORDS))
def test_an_answer_read_as_it_grows_leaks_exactly_when_one_of_its_beginnings_does(data, secrets, public, n):
    """Read piece by piece as the model writes it, the answer leaks from the first text so far
    that the whole guard would call leaking, and never before."""
    guard = SecretGuard([chunk(text, GM) for text in secrets] + [chunk(public, PUBLIC)], n)
    answer = data.draw(written(secrets[0], n))
    check = StreamCheck(guard)
    leaked = False
    for end in sorted(set(data.draw(st.lists(st.integers(0, len(answer)), max_size=40))) | {len(answer)}):
        leaked = leaked or guard.leaks(answer[:end])
        assert check.leaks(answer[:end]) == leaked


def test_a_text_that_is_not_the_last_one_grown_is_read_whole():
    guard = SecretGuard([chunk("the hollow king is the heir", GM)], n=4)
    check = StreamCheck(guard)
    assert not check.leaks("nothing here yet, friends, nothing at all to see")
    assert check.leaks("the hollow king is")


@pytest.mark.parametrize("pieces", [
    ["pip hid a key", " [Session 3] in", " flour"],  # a citation's words are none of the run's
    ["pip hid a key [Session 3]in", " flour"],  # nor is the window cut inside the citation
    ["pip hid a key [Sess", "ion 3] in", " flour"],  # nor inside one still being written
])
def test_a_secret_cited_as_it_is_written_leaks_when_it_is_whole(pieces):
    guard = SecretGuard([chunk("pip hid a key in flour", GM)], n=6)
    check, text = StreamCheck(guard), ""
    for piece in pieces[:-1]:
        text += piece
        assert not check.leaks(text)
    assert check.leaks(text + pieces[-1]) and guard.leaks(text + pieces[-1])


def test_a_citation_inside_a_secret_does_not_hide_it():
    guard = SecretGuard([chunk("the hollow king is the heir of the drowned bell tower", GM)], n=4)
    assert guard.leaks("The hollow king [Session 9] is the heir [Sheet: Kat; Session 2].")
    assert not guard.leaks("The hollow king [sic] is the heir.")  # not a citation: its word counts
