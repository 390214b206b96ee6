"""Text as every stage compares it: names and words case-, accent- and possessive-insensitive, and
the words a question can do without."""
from __future__ import annotations

import re
import unicodedata

STOPWORDS = frozenset(
    """a about after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was
    we were what when where which while who whom why will with would you your yours yourself yourselves
    did does tell happened happen know anything something ever
    el la los las un una unos unas de del y o que en por para con se su sus lo al es qué quién cómo""".split()
)


def normalize(text: str) -> str:
    """Case-, accent- and possessive-insensitive form used for every name comparison."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.casefold().replace("’", "'")
    text = re.sub(r"(?<=\w)'s\b", "", text)
    text = re.sub(r"\s+", " ", text).strip(" \t\n.,;:!?\"'()[]")
    return re.sub(r"^(?:the|a|an) (?=\S)", "", text)  # "The Old Stag" is "Old Stag"


_EDGES = " \t\n.,;:!?\"'()[]{}*_<>|~`#"


def text_words(text: str) -> list[str]:
    """The words of running text in the form `normalize` gives names: "Vex's," reads as "vex"."""
    words = []
    for token in normalize_text(text).split():
        word = re.sub(r"(?<=\w)'s$", "", token.strip(_EDGES)).strip(_EDGES)
        if word:
            words.append(word)
    return words


def normalize_text(text: str) -> str:
    """`normalize` for running text: keeps the punctuation that separates words."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return text.casefold().replace("’", "'")
