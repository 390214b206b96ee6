"""Follow-up expansion: deterministic, no LLM.

"And then what?" cannot be searched alone. A question that starts with a connective (and, but,
then, so; y, pero, entonces, luego), even after an interjection ("ok so how…"), or is short, or
speaks of someone by a pronoun only ("the old mage who was with him"), and names nobody, is searched
together with the user's previous turn. A proper noun in the question overrides the rule: "and
Mirela?" names its subject. The question answered stays the user's own words; only the search query
changes.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

CONNECTIVES = {"and", "but", "then", "so", "also", "y", "e", "pero", "entonces", "luego", "después", "despues"}
# Said before the question proper: "ok so how did we…", "wait, and then?"
INTERJECTIONS = {
    "ok", "okay", "oh", "ah", "eh", "wait", "hmm", "hm", "um", "uh", "right", "well", "yeah", "alright",
    "vale", "bueno", "oye", "espera",
}  # fmt: skip
# Third-person pronouns: with no name in the question, the person is the previous turn's.
PRONOUNS = {"he", "him", "his", "she", "her", "hers", "they", "them", "their", "theirs", "él", "ella", "ellos", "ellas"}
SHORT_WORDS = 6
_WORD = re.compile(r"[^\W_][\w'’-]*")


_PRONOUN_I = {"i", "i'm", "i'd", "i'll", "i've"}
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)\W*$")


def has_proper_noun(question: str) -> bool:
    """A capitalised word inside a sentence: Mirela, the Saltmarsh.

    Not a sentence's first word, not "I" in any form, not a shouted ALL-CAPS word.
    """
    for m in _WORD.finditer(question):
        word = m.group().replace("’", "'")
        if not word[0].isupper() or word.lower() in _PRONOUN_I or (len(word) > 1 and word.isupper()):
            continue
        if _SENTENCE_START.search(question[: m.start()]):
            continue
        return True
    return False


def needs_history(question: str, *, names_entity: bool = False) -> bool:
    words = _WORD.findall(question)
    if not words:
        return True
    if names_entity or has_proper_noun(question):
        return False
    lowered = [w.lower() for w in words]
    first = next((w for w in lowered if w not in INTERJECTIONS), "")
    return first in CONNECTIVES or len(words) <= SHORT_WORDS or not PRONOUNS.isdisjoint(lowered)


def expand_followup(question: str, history: Sequence[str], *, names_entity: bool = False) -> str:
    """The text to search for: the question, prefixed by the previous user turn when it needs one."""
    previous = next((h.strip() for h in reversed(history) if h and h.strip()), "")
    if previous and needs_history(question, names_entity=names_entity):
        return f"{previous} {question}".strip()
    return question
