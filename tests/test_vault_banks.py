"""The real vaults' dev banks (bench/data/vaults) stay well formed: each loads, ids are unique, and
every gold path names a note that exists in its vault, as stored on disk; the gold audit reads notes as a person would."""
from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from bench.gold_audit import audit
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


def test_the_gold_audit_names_a_note_above_the_gold_that_holds_the_answer(tmp_path: Path):
    (tmp_path / "PCs").mkdir()
    (tmp_path / "PCs" / "Tato.md").write_text("* Pseudodragon named Parsnip\n", encoding="utf-8")
    (tmp_path / "Osoby.md").write_text("Rozmawialiśmy z Gaviganem w fundacji.\n", encoding="utf-8")
    (tmp_path / "Session 36.md").write_text("Tato names the pseudodragon Parsnip.\n", encoding="utf-8")
    (tmp_path / "Other.md").write_text("Nothing of the kind.\n", encoding="utf-8")

    def place(path: str) -> dict:
        return {"label": path[:-3], "path": path, "sessions": [], "paths": {"keyword": 1}}

    questions = [
        {"id": "a", "relevant": ["Session 36.md"], "fused": [place("Other.md"), place("PCs/Tato.md"), place("Session 36.md")]},
        {"id": "b", "relevant": ["Session 36.md"], "fused": [place("Osoby.md"), place("Session 36.md")]},
        {"id": "c", "relevant": ["Session 36.md"], "fused": [place("Session 36.md"), place("PCs/Tato.md")]},
    ]
    answers = {"a": "Parsnip", "b": "rozmawialismy z Gaviganem", "c": "Parsnip"}
    # Tato's page holds the answer above the gold; the Polish page holds it with its diacritics; a note
    # below the first gold is not read.
    assert audit(tmp_path, questions, answers, depth=10) == [("a", 2, "PCs/Tato.md"), ("b", 1, "Osoby.md")]
    assert audit(tmp_path, questions, answers, depth=1) == [("b", 1, "Osoby.md")]
