"""Which messages in an Oracle thread are questions for the Oracle. Pure: text and facts in, a verdict out.

People at a table talk in the thread the answer opened: they thank, laugh, roll dice with another
bot, and answer each other. Only some of it is for the Oracle:

1. A message that mentions the Oracle, or replies to one of its messages, always is.
2. A message that starts with another bot's command prefix (`!r 1d20` for Avrae, `?help`, `.roll`,
   `$bal`, `;;play`; `ORACLE_IGNORE_PREFIXES`) is not. An ellipsis ("...and then?") is not a prefix.
3. A reply to another member's message is not, nor one that mentions another member or a role
   ("@GM is Pip the heir?"): they are talking to each other.
4. An acknowledgement or reaction-like message is not: only emoji, punctuation or a few words all of
   which are thanks, laughter or agreement ("thanks!", "ok cool", "lol", "👍", "gracias", "jajaja",
   "vale", "valeu", "merci"): the words of the campaign's language and English (`[listening]` of
   `oracle/lexicon/*.toml`). Words with a question mark ask something ("so?", "ok?") and are questions.
5. A remark is not: a message with no question mark that does not open (after an "ok", "wait",
   "hmm") with a question word, a connective or a request ("who", "and", "tell me", "what about";
   "quién", "y", "dime", "quem", "conta") is members talking ("I think it was the monk all along"),
   unless it asks the story to go on as the Oracle reads that ("go on", "keep going", "sigue").
6. A question put to "you" about the asked one's doings ("are you coming on friday?", "did you see
   that?") is not, unless it asks to be told something ("do you know…", "can you remind me…").
7. Anything else is a follow-up question.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from oracle import DEFAULT, Lexicon, asks_what_next, fold, lexicon

DEFAULT_PREFIXES = "!?.$;"
MAX_ACK_WORDS = 5
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_LAUGH = re.compile(r"^(?:(?:ha|ja|he|je|hi|ji)+h?|a?ha+|l+o+l+|x+d+)$")


@dataclass(frozen=True)
class Heard:
    """What the Oracle makes of a message in its thread: `question` is None when it is not one."""

    question: str | None
    why: str


def strip_mentions(content: str, bot_id: int | None) -> str:
    if bot_id is not None:
        content = content.replace(f"<@{bot_id}>", " ").replace(f"<@!{bot_id}>", " ")
    return " ".join(content.split())


def is_command(text: str, prefixes: str) -> bool:
    """Another bot's command: a prefix character right before a word ("!r", ".roll", ";;play")."""
    if not text or not prefixes or text[0] not in prefixes:
        return False
    if text.startswith("..") or text.startswith("…"):
        return False  # an ellipsis
    rest = text[1:]
    if rest[:1] and rest[0] in prefixes and rest[0] == text[0]:
        rest = rest[1:]  # ";;play", "!!roll"
    return bool(rest) and (rest[0].isalnum())


def _is_emoji_or_mark(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "PSZ" or category in ("Mn", "Me", "Cf", "Co", "Cs")


def is_acknowledgement(text: str, words_of: Lexicon | None = None) -> bool:
    """Only emoji, punctuation and at most a few thanks/laughter/agreement words."""
    acknowledgements = (words_of or lexicon()).acknowledgements
    stripped = re.sub(r"<a?:\w+:\d+>", " ", text)  # custom emoji
    if all(_is_emoji_or_mark(ch) for ch in stripped):
        return True  # emoji or punctuation only ("👍", "?!", "❤️")
    words = [w.casefold() for w in _WORD.findall(stripped)]
    if not words or len(words) > MAX_ACK_WORDS or "?" in stripped:
        return False  # "so?" and "ok?" ask something
    if any(ch.isdigit() for ch in stripped):
        return False
    return all(fold(w) in acknowledgements or _LAUGH.match(w) for w in words)


def is_question_like(text: str, words_of: Lexicon | None = None) -> bool:
    """A question mark, or a question word, connective or request first (after interjections)."""
    if "?" in text or "¿" in text:
        return True
    said = words_of or lexicon()
    words = [fold(w) for w in _WORD.findall(text)]  # the data files' words are folded: "después" is "despues"
    first = next((w for w in words if w not in said.interjections), "")
    return first in said.questions or first in said.connectives


def is_asked_of_someone(text: str, words_of: Lexicon | None = None) -> bool:
    """A question to "you" about what they do ("are you coming on friday?"), not a request to be told."""
    said = words_of or lexicon()
    words = [fold(w) for w in _WORD.findall(text)]
    words = words[next((i for i, w in enumerate(words) if w not in said.interjections), len(words)):]
    if len(words) < 2 or words[0] not in said.you_asks or words[1] not in said.you:
        return False
    return not any(w in said.telling for w in words[2:4])


def hear(
    content: str,
    *,
    bot_id: int | None,
    mentions_oracle: bool,
    replies_to_oracle: bool,
    replies_to_member: bool,
    mentions_member: bool = False,
    prefixes: str = DEFAULT_PREFIXES,
    language: str = DEFAULT,
) -> Heard:
    """`language`: the campaign's notes'; its words are heard with English's (`[listening]`)."""
    said = lexicon(language)
    text = strip_mentions(content, bot_id)
    if not text:
        return Heard(None, "nothing to read")  # without the message-content intent, unmentioned text is blank
    if mentions_oracle or replies_to_oracle:
        return Heard(text, "addressed to the Oracle")
    if is_command(text, prefixes):
        return Heard(None, "another bot's command")
    if replies_to_member:
        return Heard(None, "a reply to another member")
    if mentions_member:
        return Heard(None, "addressed to another member")
    if is_acknowledgement(text, said):
        return Heard(None, "an acknowledgement")
    if not is_question_like(text, said) and not asks_what_next(text, language):
        return Heard(None, "a remark")
    if is_asked_of_someone(text, said):
        return Heard(None, "a question to someone at the table")
    return Heard(text, "a follow-up")
