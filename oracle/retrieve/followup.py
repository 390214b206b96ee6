"""Follow-up expansion: deterministic, no LLM.

"And then what?" cannot be searched alone. A question that needs the thread is searched together
with the user's previous turn; the question answered stays the user's own words, only the search
query changes. A question needs the thread, in this order:

1. When it has no words ("???").
2. When it is elliptical, even if it names someone: it opens (after any interjection or connective)
   with "what about", "how about", "and then", "why not", "what else" ("qué hay de", "y luego",
   "por qué no"…), or says "the same"/"same" ("lo mismo") without saying the same *as* what.
   "What about the Saltmarsh?" asks the previous question again of the Saltmarsh.
3. When a third-person pronoun for a person (he, him, his, she, her, they, them, their…; él, ella,
   ellos, ellas) comes before any name in the question, even if a name follows: "Why didn't she come
   with us to fight the Barbed Ruin?" is about the thread's "she", not the Barbed Ruin. A pronoun
   after a name is taken to be about a name of the question: "did Teodric say where he was going",
   "what did Mirela tell her brother", "when Vex mocked him". A name is a capitalised word past a
   sentence's start. A name the Compendium matched but not capitalised (`names_entity`) says nothing
   of where it is, so it ties no pronoun: "what did the innkeeper tell him" expands.
4. Otherwise a name (a capitalised word, or `names_entity`) says the question names its subject:
   "and Mirela?", "but why did Teodric leave?" stay as they are.
5. Otherwise when it opens with a connective (and, but, then, so; y, pero, entonces, luego), after
   any interjection ("ok so how…"), or is short (≤ 6 words).

Only 2 and 3 expand a question that names someone. Rule 3 is the narrow one on purpose: a pronoun
after a name in a question that stands alone is nearly always that name ("what gifts did Bok give
us after Tato's fight with him"), and the previous turn glued to such a question is noise.
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
# Elliptical openers: the question borrows the rest of the previous one.
OPENERS = (
    ("what", "about"), ("how", "about"), ("and", "then"), ("why", "not"), ("what", "else"),
    ("qué", "hay", "de"), ("que", "hay", "de"), ("y", "luego"), ("y", "después"), ("y", "despues"),
    ("por", "qué", "no"), ("por", "que", "no"), ("qué", "más"), ("que", "más"),
)  # fmt: skip
# "the same" borrows what it is the same as, unless the question says it: "the same ship as…".
SAME = {"same": "as", "mismo": "que"}  # the word, and the word that says "as what"
# Third-person pronouns for a person: tied to the question by a name before them, else to the thread.
PRONOUNS = {
    "he", "him", "his", "she", "her", "hers", "they", "them", "their", "theirs", "él", "ella", "ellos", "ellas",
}  # fmt: skip
SHORT_WORDS = 6
_WORD = re.compile(r"[^\W_][\w'’-]*")


_PRONOUN_I = {"i", "i'm", "i'd", "i'll", "i've"}
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)\W*$")


def _is_name(question: str, m: re.Match) -> bool:
    word = m.group().replace("’", "'")
    if not word[0].isupper() or word.lower() in _PRONOUN_I or (len(word) > 1 and word.isupper()):
        return False
    return not _SENTENCE_START.search(question[: m.start()])


def has_proper_noun(question: str) -> bool:
    """A capitalised word inside a sentence: Mirela, the Saltmarsh.

    Not a sentence's first word, not "I" in any form, not a shouted ALL-CAPS word.
    """
    return any(_is_name(question, m) for m in _WORD.finditer(question))


def is_elliptical(question: str) -> bool:
    """Opens with "what about", "and then", "why not"…, or says "the same" without "as" what."""
    words = [w.lower().replace("’", "'") for w in _WORD.findall(question)]
    for i, word in enumerate(words):
        if any(tuple(words[i : i + len(opener)]) == opener for opener in OPENERS):
            return True
        if word not in INTERJECTIONS and word not in CONNECTIVES:
            break
    for i, word in enumerate(words):
        if word in SAME and (word != "mismo" or words[i - 1 : i] == ["lo"]) and SAME[word] not in words[i + 1 :]:
            return True
    return False


def dangling_pronoun(question: str) -> str | None:
    """The first third-person pronoun for a person with no name before it in the question, if any."""
    for m in _WORD.finditer(question):
        if _is_name(question, m):
            return None
        if m.group().lower() in PRONOUNS:
            return m.group().lower()
    return None


def needs_history(question: str, *, names_entity: bool = False) -> bool:
    """Whether the question must be searched with the thread: the module's rule, in its order."""
    words = _WORD.findall(question)
    if not words:
        return True
    if is_elliptical(question) or dangling_pronoun(question):
        return True
    if names_entity or has_proper_noun(question):
        return False
    lowered = [w.lower() for w in words]
    first = next((w for w in lowered if w not in INTERJECTIONS), "")
    return first in CONNECTIVES or len(words) <= SHORT_WORDS


def expand_followup(question: str, history: Sequence[str], *, names_entity: bool = False) -> str:
    """The text to search for: the question, prefixed by the previous user turn when it needs one."""
    previous = next((h.strip() for h in reversed(history) if h and h.strip()), "")
    if previous and needs_history(question, names_entity=names_entity):
        return f"{previous} {question}".strip()
    return question
