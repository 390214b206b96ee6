"""Follow-up expansion: deterministic, no LLM.

"And then what?" cannot be searched alone. A question that needs the thread is searched together
with the user's previous turn, with the latest earlier turn that named the thread's subject when
the previous one names nobody ("¿Quién es Facktoré?", "¿y qué hizo?", "¿y después?": Facktoré is kept),
and with the earliest turn of the history, the question that opened the thread, which says what the
thread is about ("What did we find in JuJu House?", "And that Harvard book?", "Who runs this place?");
the question answered stays the user's own words, only the search query changes. The words are the
vault's language's and English (`oracle/lexicon/*.toml`, `[followup]`). A question needs the thread,
in this order:

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
4. When it opens with a connective (and, but, then, so; y, pero, entonces, luego), after any
   interjection ("ok so how…"), even if it names someone: "And where did Kleb end up ditching it
   once we got inside?" needs the thread for "it" and "inside", "and Mirela?" asks the previous
   question of Mirela.
5. Otherwise a name (a capitalised word, or `names_entity`) says the question names its subject;
   a question that names nobody needs the thread when it is short (≤ 6 words).

Rule 3 is the narrow one on purpose: a pronoun after a name in a question that stands alone is
nearly always that name ("what gifts did Bok give us after Tato's fight with him"), and the
previous turn glued to such a question is noise.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Literal

from ..lexicon import DEFAULT, Lexicon, fold, lexicon, words

SHORT_WORDS = 6
_WORD = re.compile(r"[^\W_][\w'’-]*")


_PRONOUN_I = {"i", "i'm", "i'd", "i'll", "i've"}
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)\W*$")


def _is_name(question: str, m: re.Match[str]) -> bool:
    word = m.group().replace("’", "'")
    if not word[0].isupper() or word.lower() in _PRONOUN_I or (len(word) > 1 and word.isupper()):
        return False
    return not _SENTENCE_START.search(question[: m.start()])


def has_proper_noun(question: str) -> bool:
    """A capitalised word inside a sentence: Mirela, the Saltmarsh.

    Not a sentence's first word, not "I" in any form, not a shouted ALL-CAPS word.
    """
    return any(_is_name(question, m) for m in _WORD.finditer(question))


def _words(question: str) -> list[str]:
    return [fold(w.replace("’", "'")) for w in _WORD.findall(question)]


@cache
def _lexicon(code: str) -> Lexicon:
    return lexicon(code)


def is_elliptical(question: str, code: str = DEFAULT) -> bool:
    """Opens with "what about", "and then", "why not", "y después"…, or says "the same" without
    "as" what."""
    lex = _lexicon(code)
    words = _words(question)
    for i, word in enumerate(words):
        if any(tuple(words[i : i + len(opener)]) == opener for opener in lex.openers):
            return True
        if word not in lex.interjections and word not in lex.connectives:
            break
    for same, as_what in lex.same:
        for i in range(len(words) - len(same) + 1):
            if tuple(words[i : i + len(same)]) == same and as_what not in words[i + len(same) :]:
                return True
    return False


def dangling_pronoun(question: str, code: str = DEFAULT) -> str | None:
    """The first third-person pronoun for a person with no name before it in the question, if any."""
    pronouns = _lexicon(code).pronouns
    for m in _WORD.finditer(question):
        if _is_name(question, m):
            return None
        if fold(m.group()) in pronouns:
            return m.group().lower()
    return None


@cache
def _asks_nothing(code: str) -> frozenset[str]:
    """Words that name no thing a question could ask about: its language's and English's stop words,
    pronouns, connectives, interjections, question words and verbs of happening."""
    lex = _lexicon(code)
    return lex.stopwords | lex.pronouns | lex.connectives | lex.interjections | lex.questions | lex.you | lex.happen


Went = Literal["on", "back"]


@cache
def _went_words(code: str) -> dict[tuple[str, ...], Went]:
    lex = _lexicon(code)
    return {**{phrase: "back" for phrase in lex.before}, **{phrase: "on" for phrase in lex.next}}


def went_of(question: str, code: str = DEFAULT) -> tuple[Went, tuple[str, ...]] | None:
    """Whether a question asks on from what was told (one of its language's `next` words: "then",
    "after that", "luego", "dalej") or back from it (`before`: "before that", "earlier", "antes"),
    and what it names besides: its other words less those that name nothing (one-letter words, the
    "s" of "what's", say nothing either). ("on", ()) for "so what did we do after that?" and "¿Y
    luego qué?", ("on", ("kleb",)) for "What did Kleb do after that?", ("back", ()) for "And before
    that?"; None when it says neither, or both."""
    marks = _went_words(code)
    said, named, went, i = words(question), [], set(), 0
    longest = max(map(len, marks))
    while i < len(said):  # the longest `next` or `before` phrase at each word, the words between them kept
        size = next((n for n in range(longest, 0, -1) if said[i : i + n] in marks), 0)
        if size:
            went.add(marks[said[i : i + size]])
            i += size
            continue
        if len(said[i]) > 1 and said[i] not in _asks_nothing(code):
            named.append(said[i])
        i += 1
    return (went.pop(), tuple(named)) if len(went) == 1 else None


def asks_what_next(question: str, code: str = DEFAULT) -> bool:
    """The question asks only what came next (`went_of`): "What happened after the duel?" and "What
    is next to the chapel?" do not."""
    return went_of(question, code) == ("on", ())


def needs_history(question: str, *, names_entity: bool = False, code: str = DEFAULT) -> bool:
    """Whether the question must be searched with the thread: the module's rule, in its order."""
    words = _WORD.findall(question)
    if not words:
        return True
    if is_elliptical(question, code) or dangling_pronoun(question, code):
        return True
    lex = _lexicon(code)
    if next((w for w in _words(question) if w not in lex.interjections), "") in lex.connectives:
        return True
    return not (names_entity or has_proper_noun(question)) and len(words) <= SHORT_WORDS


def expand_followup(question: str, history: Sequence[str], *, names_entity: bool = False, code: str = DEFAULT) -> str:
    """The text to search for: the question, prefixed by the previous user turn when it needs one, by
    the latest earlier turn that named someone when the previous one names nobody, and by the
    earliest turn given: the thread's opening question, or the oldest the bot keeps of a long thread."""
    turns = [h.strip() for h in history if h and h.strip()]
    if not turns or not needs_history(question, names_entity=names_entity, code=code):
        return question
    context = [turns[-1]]
    if not has_proper_noun(turns[-1]):
        named = next((t for t in reversed(turns[:-1]) if has_proper_noun(t)), None)
        if named is not None:
            context.insert(0, named)
    if context[0] != turns[0]:
        context.insert(0, turns[0])
    return " ".join([*context, question]).strip()
