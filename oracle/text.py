"""Text as every stage compares it: names and words case-, accent- and possessive-insensitive, and
the words a question can do without."""
from __future__ import annotations

import re
import unicodedata

from .lexicon import language

# The words a question can do without, English and Spanish (`oracle/lexicon/en.toml`, `es.toml`); the
# keyword path reads the vault's own language's (`Lexicon.stopwords`).
STOPWORDS = language("en").stopwords | language("es").stopwords


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


def clipped(text: str, limit: int = 200) -> str:
    """A player's text as a log line shows it: its head, on one line, and how long it was."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else f"{flat[:limit]}… ({len(flat)} characters)"
