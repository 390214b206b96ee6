"""The real vaults' dev banks (bench/data/vaults) stay well formed: each loads, ids are unique, and
every gold path names a note that exists in its vault, as stored on disk."""
from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from oracle.eval_bank import load_bank
from tests.conftest import SHARED_EVAL

BANKS = sorted((Path(__file__).parent.parent / "bench" / "data" / "vaults").glob("*.dev.jsonl"))


def test_there_is_a_bank_per_shared_vault():
    assert {b.name.removesuffix(".dev.jsonl") for b in BANKS} == {
        p.name for p in (SHARED_EVAL / "vaults").iterdir() if (p / "notes").is_dir()
    }


@pytest.mark.parametrize("bank", BANKS, ids=lambda b: b.name.removesuffix(".dev.jsonl"))
def test_every_gold_path_is_a_note_of_its_vault(bank: Path):
    notes = SHARED_EVAL / "vaults" / bank.name.removesuffix(".dev.jsonl") / "notes"
    questions = load_bank(bank)

    assert len({q.id for q in questions}) == len(questions)
    on_disk = {unicodedata.normalize("NFC", p.relative_to(notes).as_posix()) for p in notes.rglob("*.md")}
    missing = [(q.id, path) for q in questions for path in q.relevant if path not in on_disk]
    assert missing == []
    assert all(q.history for q in questions if q.kind == "followup")
