"""The synthetic corpus: N renumbered copies of the 1× notes, the 10× and 100× folders."""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

GENERATOR_VERSION = "1"  # bump when the synthetic copies change
MAX_SESSION_NUMBER = 9999  # oracle/sessions.py reads at most 4 digits
SWAP_WORDS = ["quietly", "briefly", "again", "slowly", "together", "later", "soon", "openly", "finally"]


@dataclass
class Copies:
    """The enlarged notes folder and, per file, the map from its session numbers to the original's."""

    notes_dir: Path
    origin: dict[str, dict[int, int]] = field(default_factory=dict)  # file -> {new number: original}
    digest: str = ""


def _session_number_span(line: str) -> tuple[int, int] | None:
    """Where the session number sits in a header line (None if the line is not a header)."""
    from oracle.notes.sessions import match_header

    header = match_header(line)
    if header is None:
        return None
    m = re.search(r"(?i)(?:session|sesi[oó]n|sess[aã]o|sessione|s[eé]ance|sitzung|sessie)\s*(?:#|n[o°º]\.?)?\s*(\d{1,4})", line)
    return (m.start(1), m.end(1)) if m else None


def make_copies(src_dir: Path, dst_dir: Path, n: int) -> Copies:
    """N copies of every Markdown file of `src_dir` (one file per copy); writes only what changed."""
    sources = sorted(p for p in src_dir.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(src_dir).parts))
    if not sources:
        raise SystemExit(f"no Markdown notes under {src_dir}")
    dst_dir.mkdir(parents=True, exist_ok=True)
    copies = Copies(dst_dir)
    wanted: set[str] = set()
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for src in sources:
        lines = src.read_text(encoding="utf-8").split("\n")
        spans = [_session_number_span(line) for line in lines]
        numbers = [int(lines[i][s[0]:s[1]]) for i, s in enumerate(spans) if s]
        step = max(numbers, default=0)
        rel = src.relative_to(src_dir)
        for i in range(n):
            out_rel = rel.with_name(f"{rel.stem}-{i:03d}{rel.suffix}").as_posix()
            origin: dict[int, int] = {}
            out = list(lines)
            rng = random.Random(f"{out_rel}")
            session_lines: list[int] = []
            for k, s in enumerate(spans):
                if s is None:
                    if i and session_lines is not None:
                        session_lines.append(k)
                    continue
                if i:
                    _swap_words(out, session_lines, rng)
                session_lines = []
                original = int(lines[k][s[0]:s[1]])
                new = (original + i * step - 1) % MAX_SESSION_NUMBER + 1
                origin[new] = original
                out[k] = lines[k][: s[0]] + str(new) + lines[k][s[1]:]
            if i:
                _swap_words(out, session_lines, rng)
            text = "\n".join(out)
            path = dst_dir / out_rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            copies.origin[out_rel] = origin
            wanted.add(out_rel)
            digest.update(out_rel.encode() + hashlib.sha256(text.encode()).digest())
    for stale in dst_dir.rglob("*.md"):  # a folder left by a run with other settings
        if stale.relative_to(dst_dir).as_posix() not in wanted:
            stale.unlink()
    copies.digest = digest.hexdigest()
    return copies


def _swap_words(lines: list[str], line_numbers: list[int], rng: random.Random, count: int = 3) -> None:
    """Swap `count` lower-case prose words of a session for other common words (same word count)."""
    candidates = [
        (k, m.start(), m.end())
        for k in line_numbers
        if lines[k].lstrip().startswith(("- ", "* ")) or (lines[k] and lines[k][0].isalpha())
        for m in re.finditer(r"(?<![\w'’-])[a-z]{5,}(?![\w'’-])", lines[k])
    ]
    for k, a, b in sorted(rng.sample(candidates, min(count, len(candidates))), key=lambda c: (c[0], -c[1])):
        lines[k] = lines[k][:a] + rng.choice(SWAP_WORDS) + lines[k][b:]


def corpus_digest(notes_dir: Path) -> str:
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for p in sorted(notes_dir.rglob("*.md")):
        digest.update(p.relative_to(notes_dir).as_posix().encode() + hashlib.sha256(p.read_bytes()).digest())
    return digest.hexdigest()
