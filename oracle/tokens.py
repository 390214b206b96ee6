"""Counting tokens before a request is sent, and cutting text to a number of tokens.

The answer model's own tokenizer (qwen2.5's 151k-entry BPE, or whichever model is configured) cannot
be installed here, so the count is an estimate that must never fall short: a prompt the estimate
says fits but the server finds longer is cut from the front, and the front holds the citation rules.

The estimate splits text into pieces and charges each at least one token:
- a word costs one token per three characters, rounded up, and at least one. English prose averages
  about four characters per BPE token and one word is rarely more than one token per three letters
  (a rare name such as "Emberdusk" is 3-4 pieces); short words cost one, as in every BPE vocabulary;
- every digit costs one: qwen2's pre-tokenizer splits numbers into single digits;
- every other visible character (punctuation, a letter the word pattern does not cover) costs one;
- a run of line breaks costs one, spaces cost nothing (BPE folds a space into the next word).
On the sample campaign and the Critical Role log it stays above the bundled all-MiniLM-L6-v2
WordPiece count (a 30k vocabulary, so more pieces than a 151k BPE makes of the same text) by a
margin the tests measure (`tests/test_tokens.py`). The cost of the margin is context left unused;
the cost of a shortfall is a prompt cut from the front.

Each chat message adds the chat template's framing (`<|im_start|>role\\n … <|im_end|>\\n`: five
tokens in ChatML); MESSAGE_OVERHEAD rounds that up, and PROMPT_OVERHEAD covers the assistant
turn's opening the template appends.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

MESSAGE_OVERHEAD = 8
PROMPT_OVERHEAD = 8

_PIECES = re.compile(r"\d|[^\W\d_]+|\n+|[^\S\n]+|.", re.S)


def estimate_tokens(text: str) -> int:
    """An upper estimate of the tokens a BPE model makes of `text` (see the module's docstring)."""
    total = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isspace():
            total += 1 if first == "\n" else 0
        elif first.isdigit() or len(piece) == 1:
            total += 1
        else:
            total += -(-len(piece) // 3)
    return total


def message_tokens(messages: Iterable[Mapping[str, str]]) -> int:
    """The estimated prompt of a chat request: every message with its framing, then the reply's opening."""
    return PROMPT_OVERHEAD + sum(MESSAGE_OVERHEAD + estimate_tokens(m.get("content") or "") for m in messages)


def trim_to_tokens(text: str, max_tokens: int) -> str:
    """The longest head of `text` whose estimate fits `max_tokens`, cut at a paragraph boundary when
    one fits, else at a line, else at a word; "" when not even one word fits."""
    if estimate_tokens(text) <= max_tokens:
        return text
    for separator in ("\n\n", "\n", " "):
        parts = text.split(separator)
        kept: list[str] = []
        used = 0
        for part in parts:
            cost = estimate_tokens(part) + (estimate_tokens(separator) if kept else 0)
            if used + cost > max_tokens:
                break
            kept.append(part)
            used += cost
        head = separator.join(kept).rstrip()
        if head.strip():
            return head
    return ""
