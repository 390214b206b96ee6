"""What the benchmarks share: where things are, the notes they index and a fake Ollama (the machine
they ran on is in `bench.machine`, how they print in `bench.printing`).

Paths come from one setting. `EVAL_DIR`, the shared evaluation data, is $ORACLE_EVAL_DIR when set,
else `../shared/eval` beside the checkout when that folder exists, else /work/shared/eval; every
benchmark's default notes or question bank derives from it, `REPO` or `DATA_DIR` (bench/data).
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / "bench" / "data"  # dev banks and question lists written for the benchmarks


def _eval_dir() -> Path:
    if os.environ.get("ORACLE_EVAL_DIR"):
        return Path(os.environ["ORACLE_EVAL_DIR"])
    beside = REPO.parent / "shared" / "eval"
    if beside.is_dir():
        return beside
    return Path("/work/shared/eval")


EVAL_DIR = _eval_dir()
CRD3_NOTES = EVAL_DIR / "crd3" / "notes"  # Critical Role campaign 1: 113 sessions in one Markdown log
CRD3_QUESTIONS = DATA_DIR / "crd3_questions.txt"
SAMPLE_NOTES = REPO / "notes"  # the bundled sample campaign


def log(message: str) -> None:
    """A timestamped progress line on stderr (the table goes to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def python_env(**extra: str) -> dict[str, str]:
    """This environment for a Python child process that imports the repository's packages."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def read_questions(path: Path) -> list[str]:
    """Questions, one a line (blank lines and `#` comments skipped), or the `question` of each line of a
    .jsonl bank."""
    import json

    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if path.suffix != ".jsonl":
            out.append(line)
            continue
        try:
            question = json.loads(line).get("question", "")
        except ValueError:
            continue
        if question:
            out.append(question)
    return out


# ---------------------------------------------------------------------------------------------
# Nothing waits on a model


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def offline() -> None:
    """OLLAMA_HOST at a closed local port and annotations off, for this process and its children."""
    os.environ["OLLAMA_HOST"] = f"http://127.0.0.1:{closed_port()}"
    os.environ["ORACLE_ANNOTATE"] = "false"


def bench_settings(notes_dir: Path, data_dir: Path, **overrides):
    """Settings from nothing but these arguments (no .env file), annotations off, no model reachable
    unless `ollama_host` says otherwise."""
    from oracle.settings import Settings

    fields = {"annotate": False, "ollama_host": os.environ.get("OLLAMA_HOST", "http://127.0.0.1:9")} | overrides
    return Settings(_env_file=None, notes_dir=notes_dir, data_dir=data_dir, **fields)


_FIRST_LABEL = re.compile(r"^\[([^\]\n]+)\] \(", re.M)


def fake_answer(request: dict) -> str:
    """An instant, plausible answer: two sentences citing the first fragment of the context."""
    user = next((m.get("content", "") for m in reversed(request.get("messages") or []) if m.get("role") == "user"), "")
    m = _FIRST_LABEL.search(user)
    if not m:
        return "The notes do not say."
    label = m.group(1)
    return (
        f"The notes describe this in some detail [{label}]. "
        f"The party remembered it differently afterwards, as the same note tells [{label}]."
    )


class FakeOllamaProcess:
    """The fake Ollama (testing/ollama_server.py) answering `fake_answer` in a process of its own, as
    a real Ollama is: its HTTP handling never holds this process's GIL."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "testing.ollama_server", "--port", "0", "--responder", "bench.common:fake_answer"],
            stdout=subprocess.PIPE, text=True, cwd=REPO, env=python_env(),
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.process.kill()
            raise RuntimeError("the fake Ollama process did not start")

    def stop_thread(self) -> None:  # the name FakeOllama's thread mode uses
        self.process.terminate()
        self.process.wait(10)


def start_fake_ollama(in_thread: bool = False):
    """The fake Ollama: a process of its own (the default), or a thread of this process. Either has
    `.url` and `.stop_thread()`."""
    if in_thread:
        from testing.ollama_server import FakeOllama

        return FakeOllama(models=["qwen2.5:14b"], responder=fake_answer).run_in_thread()
    return FakeOllamaProcess()


# ---------------------------------------------------------------------------------------------
# The notes: copied to a temporary folder, one session edited


EDIT_SENTENCE = "Before dawn the party counted their coins twice and still came up one short."
_NOT_PROSE = ("#", ">", "|", "```", "~~~", "---", "<", "%%", "[^")


def copy_notes(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)
    # Sources may be read-only (shared eval data): the copy must be editable and removable.
    for folder, dirs, files in os.walk(dst):
        for name in dirs + files:
            p = Path(folder, name)
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR | (stat.S_IXUSR if p.is_dir() else 0))
    dst.chmod(dst.stat().st_mode | stat.S_IWUSR)


@dataclass
class Edit:
    path: str
    line: int
    session: str


def _prose_lines(lines: list[str], first: int, stop: int) -> list[int]:
    """Lines of running text (not headings, quotes/callouts, tables, comments or fences)."""
    found, in_comment = [], False
    for i in range(first, stop):
        s = lines[i].strip()
        if in_comment:
            if "-->" in s or s.endswith("%%"):
                in_comment = False
            continue
        if s.startswith("<!--") and "-->" not in s[4:]:
            in_comment = True
            continue
        if s == "%%" or (s.startswith("%%") and not s.endswith("%%", 2)):
            in_comment = True
            continue
        if len(s.split()) >= 5 and not s.startswith(_NOT_PROSE) and "%%" not in s and "<!--" not in s:
            found.append(i)
    return found


def edit_one_session(root: Path) -> Edit:
    """Append a sentence to the last prose line of the middle session of the note with the most sessions.

    For a one-file log (like CRD3) that file holds every session, so the edit stays inside one
    session's text. A folder with no session headers gets the sentence on the largest note instead.
    """
    from oracle.notes.sessions import match_header

    best: tuple[Path, list[str], list[int]] | None = None
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or path.is_symlink():
            continue
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
        headers = [i for i, line in enumerate(lines) if match_header(line)]
        key = (len(headers), path.stat().st_size)
        if best is None or key > (len(best[2]), best[0].stat().st_size):
            best = (path, lines, headers)
    if best is None:
        raise SystemExit(f"no Markdown notes under {root}")
    path, lines, headers = best

    target = None
    session = "(no session headers: the largest note)"
    if headers:
        ends = headers[1:] + [len(lines)]
        sizes = [sum(len(line) for line in lines[a:b]) for a, b in zip(headers, ends, strict=True)]
        median = sorted(sizes)[len(sizes) // 2]
        # The session nearest the middle of the log among those of at least median length (a typical
        # session, not a stub), then any other with a line of text.
        order = sorted(range(len(headers)), key=lambda k: (sizes[k] < median, abs(k - len(headers) // 2)))
        for k in order:
            found = _prose_lines(lines, headers[k] + 1, ends[k])
            target = found[-1] if found else None  # the session's last line of text: an addition
            if target is not None:
                session = lines[headers[k]].strip().lstrip("#").strip()
                break
    if target is None:
        found = _prose_lines(lines, 0, len(lines))
        target = found[-1] if found else None
    if target is None:  # nothing prose-like at all: add a paragraph at the end
        lines.append("")
        lines.append(EDIT_SENTENCE)
        target = len(lines) - 1
    else:
        line = lines[target]
        cr = "\r" if line.endswith("\r") else ""
        lines[target] = f"{line.rstrip()} {EDIT_SENTENCE}{cr}"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return Edit(path.relative_to(root).as_posix(), target + 1, session)


def ingest_phases(start: float, end: float, events: list[tuple[float, str, int, int]]) -> dict[str, float]:
    """Wall seconds between an ingest's progress callbacks, events being (time, stage, done, total)."""

    def first(stage: str) -> float | None:
        return next((t for t, s, _, _ in events if s == stage), None)

    def last(stage: str) -> float | None:
        return next((t for t, s, _, _ in reversed(events) if s == stage), None)

    marks = [
        ("open store + Chroma, read meta/manifest", first("scan")),
        ("scan, hash, parse, chunk", last("scan")),
        ("plan, tokenize windows, Chroma lookup", first("embed")),
        ("embed loop (encode + Chroma upsert)", last("embed")),
        ("file records, heads", first("commit")),
        ("read back, Compendium, SQLite commit", last("commit")),
        ("orphan sweep, annotations, meta", end),
    ]
    out, prev = {}, start
    for name, t in marks:
        if t is not None:
            out[name] = t - prev
            prev = t
    return out
