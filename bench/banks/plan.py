"""The banks: one row of the table each, made of one or more parts (a notes folder and its questions)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.common import DATA_DIR, EVAL_DIR, REPO

LOCOMO_DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")

@dataclass(frozen=True)
class Part:
    """One notes folder with its bank: one index per version."""

    name: str
    notes: Path
    bank: Path


@dataclass(frozen=True)
class Bank:
    """One row of the table: one part, or several reported as one (LoCoMo)."""

    name: str
    parts: tuple[Part, ...]
    vault: bool = False


def all_banks() -> list[Bank]:
    locomo = EVAL_DIR / "locomo"
    banks = [
        Bank("sample", (Part("sample", REPO / "notes", REPO / "notes" / "questions.jsonl"),)),
        Bank("crd3", (Part("crd3", EVAL_DIR / "crd3" / "notes", DATA_DIR / "crd3_dev.jsonl"),)),
        Bank("locomo", tuple(Part(f"locomo-{c}", locomo / c / "notes", locomo / c / "questions.jsonl")
                             for c in LOCOMO_DEV)),
        Bank("scifact", (Part("scifact", EVAL_DIR / "scifact" / "notes",
                              EVAL_DIR / "scifact" / "questions.train.jsonl"),)),
    ]
    for bank in sorted((DATA_DIR / "vaults").glob("*.dev.jsonl")):  # new banks appear here
        name = bank.name.removesuffix(".dev.jsonl")
        banks.append(Bank(name, (Part(f"vault-{name}", EVAL_DIR / "vaults" / name / "notes", bank),), vault=True))
    return banks


def pick_banks(spec: str | None, quick: bool) -> list[Bank]:
    banks = all_banks()
    if spec is None:
        return [b for b in banks if b.vault or b.name == "sample"] if quick else banks
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    known = {b.name for b in banks} | {"vaults"}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"unknown bank {', '.join(unknown)}; the banks: {', '.join(sorted(known))}")
    return [b for b in banks if b.name in wanted or (b.vault and "vaults" in wanted)]


def count_questions(bank: Path) -> int:
    return sum(1 for line in bank.read_text(encoding="utf-8").splitlines() if line.strip())
