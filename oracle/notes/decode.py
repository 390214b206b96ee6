"""Bytes to a note's text: encodings game masters' files really come in, and what is not a note."""
from __future__ import annotations

from ..errors import OracleError


class NoteError(OracleError, ValueError):
    """The file cannot be read as a note; the message is the reason shown to the game master."""


# ---------------------------------------------------------------------------------------------
# Decoding


def decode(data: bytes, *, allow_empty: bool = False) -> tuple[str, list[str]]:
    """Bytes to text with `\\n` line ends. Returns (text, warnings); raises NoteError if binary."""
    warnings: list[str] = []
    sample = data[:8192]
    if sample.count(0) * 50 > len(sample):  # over 2% NUL bytes: a binary file, not stray NULs
        raise NoteError("binary file (NUL bytes), not a Markdown note")
    if b"\x00" in data:  # a stray NUL in a text note: drop it, keep the note
        warnings.append(f"removed {data.count(0)} NUL bytes")
        data = data.replace(b"\x00", b"")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Notes written on Windows are usually cp1252; latin-1 decodes anything, as a last resort.
        try:
            text = data.decode("cp1252")
            warnings.append(f"not UTF-8 (byte {exc.start}); decoded as Windows-1252")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
            warnings.append(f"not UTF-8 (byte {exc.start}); decoded as Latin-1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    controls = sum(1 for ch in text[:8192] if ord(ch) < 32 and ch not in "\n\t\f")
    if controls > max(8, len(text[:8192]) // 20):
        raise NoteError("binary file (control characters), not a Markdown note")
    if not text.strip() and not allow_empty:
        raise NoteError("empty note")
    return text, warnings
