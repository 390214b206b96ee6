"""The game master's retrieval views: `oracle eval` (metrics against hand-computed values, bank
parsing, the command end to end) and `oracle search` (its panels and its JSON).

The end-to-end tests run the real CLI over the mini campaign with the real bundled model, Ollama
down (the reranker keeps the fused order) or a fake Ollama on 127.0.0.1 whose reranker reverses it.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from oracle.cli import main
from oracle.eval import answer_shown, answer_terms_shown, exact_dense, first_words_blocks, lost_at
from oracle.eval_bank import BankError, entry_ranks, hit, load_bank, matches, mrr, ndcg, recall
from oracle.types import Chunk
from testing.ollama_server import FakeOllama
from tests.conftest import (
    MINI_CAMPAIGN,
    SHARED_EVAL,
    closed_port_url,
    request_kind,
    write_notes,
)


def chunk(label: str, path: str, part: int = 1) -> Chunk:
    return Chunk(f"{label}:{part}", path, label, "session", part, 1, label, 1, 2, "text", "hash")


# Ranked as the fused list would be: Session 3 comes in two parts, which count once, at rank 1.
RANKED = [
    chunk("Session 3", "sessions/log.md", 1),
    chunk("Session 2", "sessions/log.md"),
    chunk("Session 3", "sessions/log.md", 2),
    chunk("Sheet: Mira", "sheets/Mira.md"),
    chunk("Session 5", "sessions/Session 5.md"),
]


def test_units_collapse_parts_and_entries_match_label_or_path():
    relevant = ["session 3", "sheets/mira", "SHEETS/MIRA.MD", "Session 9", "sessions/log"]
    assert {"session 3": 1, "sheets/mira": 3, "SHEETS/MIRA.MD": 3, "Session 9": None, "sessions/log": 1} == entry_ranks(
        relevant, RANKED
    )


def test_a_session_entry_matches_what_records_that_session():
    """`Session 12` names whatever records session 12, whatever its label: a file named otherwise, a
    hub's section; never another session, and a label or path still matches as before."""
    fall = Chunk("f:1", "sessions/012 - The Fall.md", "012 - The Fall", "session", 1, 1, "", 1, 2, "t", "h",
                 sessions=(12,))
    section = Chunk("l:1", "log.md", "log › Session 12", "session", 1, 1, "", 1, 2, "t", "h", sessions=(12,))
    two = Chunk("d:1", "sessions/Session 8-9.md", "Session 8-9", "session", 1, 1, "", 1, 2, "t", "h", sessions=(8, 9))
    for entry in ("Session 12", "session  012", " SESSION 12 "):
        assert matches(entry, fall) and matches(entry, section), entry
    assert (matches("Session 8", two), matches("Session 9", two), matches("Session 8-9", two)) == (True, True, True)
    assert not any(matches(e, fall) for e in ("Session 1", "Session 2", "Session 120", "12"))
    assert matches("012 - The Fall", fall) and matches("sessions/012 - the fall", fall)
    assert not matches("Session 12", chunk("Sheet: Mira", "sheets/Mira.md"))


def test_metrics_on_a_hand_ranked_list():
    relevant = ["Session 3", "sheets/Mira.md", "Session 9"]
    assert recall(relevant, RANKED) == pytest.approx(2 / 3)
    assert recall(relevant, RANKED, 2) == pytest.approx(1 / 3)  # the sheet is the third unit
    assert recall([], RANKED) == 0.0
    assert (1.0, 0.0) == (hit(relevant, RANKED, 1), hit(["Session 9"], RANKED, 10))
    assert (1.0, 1 / 3, 0.0) == (mrr(relevant, RANKED), mrr(["sheets/Mira.md"], RANKED), mrr(["Session 9"], RANKED))
    # Gold at unit ranks 1 and 3 of three gold entries: (1 + 1/log2 4) / (1 + 1/log2 3 + 1/log2 4).
    assert ndcg(relevant, RANKED) == pytest.approx(1.5 / (1 + 1 / math.log2(3) + 0.5))
    assert ndcg(relevant, RANKED, k=2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg(["Session 2"], RANKED) == pytest.approx(1 / math.log2(3))


def test_evidence_is_lost_at_the_first_stage_without_it():
    union, fused, final = RANKED, RANKED[1:], RANKED[:1]
    stages = [("retrieval", union, None), ("fusion", fused, 2), ("rerank", final, 2)]
    assert lost_at("Session 9", stages) == "retrieval"
    assert lost_at("Sheet: Mira", stages) == "fusion"  # unit rank 3 of the fused list, k = 2
    assert lost_at("Session 2", stages) == "rerank"
    assert lost_at("Session 3", stages) is None


def test_exact_dense_ranks_chunks_by_their_best_window():
    matrix = np.array([[1, 0], [0.6, 0.8], [0.8, 0.6], [0, 1]], dtype=np.float32)
    chunks = ["a", "b", "a", "c"]
    assert ["b", "a"] == exact_dense(np.array([0.6, 0.8], dtype=np.float32), chunks, matrix, 2)
    assert ["a", "b", "c"] == exact_dense(np.array([1, 0], dtype=np.float32), chunks, matrix, 5)
    assert [] == exact_dense(np.array([1, 0], dtype=np.float32), [], np.zeros((0, 0), dtype=np.float32), 5)


def test_a_bank_is_read_with_its_defaults(tmp_path):
    bank = tmp_path / "bank.jsonl"
    bank.write_text(
        '{"id": "a", "question": "Who?", "relevant": ["Session 1"], "kind": "entity", "answer": " Brother Aldous "}\n'
        "\n"
        '{"question": "and then?", "relevant": [], "history": ["Who?"]}\n',
        encoding="utf-8",
    )
    first, second = load_bank(bank)
    assert ("a", "Who?", ("Session 1",), "entity", ()) == (first.id, first.question, first.relevant, first.kind, first.history)
    assert ("q3", (), "", ("Who?",)) == (second.id, second.relevant, second.kind, second.history)
    assert ("Brother Aldous", "") == (first.answer, second.answer)


@pytest.mark.parametrize(
    "answer, shown, share",
    [
        ("Tock, a brass clockwork owl", "[Sheet: Pell] Tock is an owl of brass, and clockwork.", 1.0),
        ("the Bog Lamb", "They hunted bog lambs.", 1.0),  # stems: "lambs" is "lamb"
        ("600 crowns", "He added 600 in penalties.", 0.5),  # one of two key terms
        ("Vex's debt", "The debts of Vex were paid.", 1.0),  # possessive and plural
        ("to hold what I could not let go", "She made it to hold on.", 1 / 3),  # {hold, let, go}
        ("What was it?", "anything", None),  # no key term: not measured
    ],
)
def test_answer_shown_counts_the_answers_key_terms_in_the_text(answer, shown, share):
    assert share == answer_terms_shown(answer, shown)
    assert (share == 1.0) == answer_shown(answer, shown)


def test_the_first_words_baseline_quotes_sixty_words_of_each_of_five_passages():
    words = " ".join(f"w{i}" for i in range(65))
    passages = [Chunk(f"c{i}", "sessions/log.md", f"Session {i}", "session", 1, 1, "", 3, 9, words, "h") for i in range(6)]
    blocks = first_words_blocks(passages)
    assert 5 == len(blocks)
    assert "[Session 0] (sessions/log.md, lines 3–9)\n> " + " ".join(f"w{i}" for i in range(60)) + " …" == blocks[0]


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"question": "Who?"}\n{"question": "Who?",\n', "bank.jsonl:2: not a bank line"),
        ('{"relevant": ["Session 1"]}\n', "bank.jsonl:1: not a bank line ('question')"),
        ('["a list"]\n', "bank.jsonl:1: not a bank line (a line is one JSON object)"),
        ('{"question": "Who?", "relevant": "Session 1"}\n', 'bank.jsonl:1: not a bank line ("relevant" and "history" are lists)'),
        ('{"question": "Who?", "answer": ["Aldous"]}\n', 'bank.jsonl:1: not a bank line ("answer" is a string)'),
        ("\n\n", "holds no questions"),
    ],
)
def test_a_bad_bank_names_the_line(tmp_path, text, message):
    bank = tmp_path / "bank.jsonl"
    bank.write_text(text, encoding="utf-8")
    with pytest.raises(BankError, match=re.escape(message)):
        load_bank(bank)


# ---------------------------------------------------------------------------------------------
# The command, end to end

BANK = [
    {"id": "e1", "question": "Who sold Mirela the brass compass?", "relevant": ["Session 1"], "kind": "entity",
     "answer": "Brother Aldous"},
    {"id": "a1", "question": "What did the Candle Monk do in the chapel?", "relevant": ["Session 4"], "kind": "alias",
     "answer": "lit every candle"},
    {
        "id": "r1",
        "question": "Where did Mirela travel, from the market to the bridge?",
        "relevant": ["Session 1", "Session 2", "Session 3"],
        "kind": "arc",
    },
    {"id": "f1", "question": "and then what?", "history": ["Who ambushed Mirela at the ford?"], "relevant": ["Session 2"], "kind": "followup"},
    {"id": "s1", "question": "Who is the lost prince?", "relevant": ["world/The_True_Heir"], "kind": "secret",
     "answer": "Pip is the lost prince"},
    {"id": "u1", "question": "Who won the dragon race on the moon?", "relevant": [], "kind": "unanswerable"},
]

OVERALL_KEYS = {
    "union_recall", "paths_union_recall", "linked_recall", "pool_recall", "fused_recall_at_k", "final_recall_at_k", "context_recall", "mrr", "ndcg_at_10",
    "arc_coverage_union", "arc_coverage_at_k", "arc_coverage_context",
}  # fmt: skip


def write_bank(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> tuple[Path, Path, Path]:
    """Notes, a bank and a data folder that the first eval builds and later ones reuse."""
    root = tmp_path_factory.mktemp("eval")
    notes = write_notes(root / "notes", MINI_CAMPAIGN)
    return notes, write_bank(root / "bank.jsonl", BANK), root / "data"


@pytest.fixture
def ollama_down(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", closed_port_url())
    monkeypatch.setenv("ORACLE_OLLAMA_PROBE_TIMEOUT", "2")


@pytest.mark.integration  # the command line loads the real model
def test_eval_json_builds_a_missing_index_and_measures_every_stage(campaign, ollama_down, capsys):
    notes, bank, data = campaign
    assert not data.exists()
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(data), "--json")
    assert 0 == code
    assert (data / "oracle.sqlite3").is_file()  # the index was missing: eval ingested the notes
    result = json.loads(stdout)

    assert (6, 5, 1) == (result["questions"], result["answerable"], result["unanswerable"])
    assert OVERALL_KEYS <= result["overall"].keys()
    assert {"entity", "alias", "arc", "followup", "secret"} == set(result["by_kind"])  # unanswerable: no averages
    assert 0 == result["reranked"]  # Ollama is down: the final list is the fused list
    overall, kinds = result["overall"], result["by_kind"]
    assert overall["final_recall_at_k"] == overall["fused_recall_at_k"]

    # A player's search never finds the GM-only note: lost at retrieval, nowhere else.
    assert 0.0 == kinds["secret"]["union_recall"]
    assert {"id": "s1", "question": "Who is the lost prince?", "kind": "secret", "lost": {"world/The_True_Heir": "retrieval"}} in result["misses"]
    for kind in ("entity", "alias", "followup"):  # one gold source each, named by the question
        assert (1.0, 1.0) == (kinds[kind]["union_recall"], kinds[kind]["hit_at_5"]), kind
    assert 1.0 == kinds["entity"]["mrr"]
    assert 1.0 == kinds["arc"]["union_recall"]

    # The averages are over answerable questions, and the arc coverage is over arc questions only.
    assert overall["union_recall"] == pytest.approx(4 / 5)
    assert overall["arc_coverage_union"] == kinds["arc"]["union_recall"]
    assert overall["arc_coverage_at_k"] == kinds["arc"]["final_recall_at_k"]
    assert kinds["entity"]["arc_coverage_union"] is None
    for stats in (overall, *kinds.values()):
        assert stats["union_recall"] >= stats["pool_recall"] >= stats["fused_recall_at_k"]
        assert stats["union_recall"] >= stats["paths_union_recall"]
        assert stats["recall_at_10"] >= stats["recall_at_5"]
        assert stats["hit_in_pool"] >= stats["hit_at_10"] >= stats["hit_at_5"]
    assert 0 < overall["ann_recall"] <= 1

    # Answer shown. The monk's deed is in the sentence shown. "Brother Aldous" is whole too: the
    # passage that matches shows "… Aldous sold Mirela a brass compass …" and, with the words the
    # weaker passages leave, the sentence before it that names "Brother". The first 60 words of the
    # short session hold both. The secret answer is never shown.
    assert 3 == overall["answers"]
    assert (1.0, 1.0, 0.0) == tuple(kinds[k]["answer_shown"] for k in ("entity", "alias", "secret"))
    assert (1.0, 1.0) == (kinds["entity"]["answer_shown_first_words"], kinds["alias"]["answer_shown_first_words"])
    assert (0.6667, 1.0) == (overall["answer_shown"], kinds["entity"]["answer_terms_shown"])
    assert kinds["arc"]["answer_shown"] is None  # no gold answer given


@pytest.mark.integration  # the command line loads the real model
def test_eval_with_gm_clearance_finds_the_secret_note(campaign, ollama_down, capsys):
    notes, bank, data = campaign
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(data), "--json", "--gm")
    assert 0 == code
    result = json.loads(stdout)
    assert 1.0 == result["by_kind"]["secret"]["union_recall"]
    assert "s1" not in {m["id"] for m in result["misses"] if "world/The_True_Heir" in m["lost"]}


@pytest.mark.integration  # the command line loads the real model
def test_eval_prints_the_stage_table_and_the_misses(campaign, ollama_down, capsys):
    notes, bank, data = campaign
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(data), "--k", "3")
    assert 0 == code
    text = " ".join(stdout.split())
    for row in ("recall in the union of the paths and links", "recall in the union of the three paths",
                "recall, notes linked to the fused top 3", "recall in the fused top 3", "recall in the pool", "MRR (final list)", "nDCG@10 (final list)", "arc coverage, union", "approximate vs exact dense search",
                "answer shown: passages (all key terms)", "answer shown: first 60 words (baseline)"):  # fmt: skip
        assert row in text, row
    assert "5 answerable questions (1 unanswerable)" in text
    assert "misses: where the evidence was lost" in text
    assert "world/The_True_Heir at retrieval" in text


@pytest.mark.integration  # the command line loads the real model
def test_eval_credits_the_notes_linked_to_the_top_k(tmp_path, ollama_down, monkeypatch, capsys):
    """A pool of one: the session that the top result refers to ("back in session 1") reaches the
    pool only through the link, and the eval says so."""
    monkeypatch.setenv("ORACLE_FUSED_POOL", "1")
    notes = write_notes(tmp_path / "notes", MINI_CAMPAIGN)
    ford = {"id": "l1", "question": "Who ambushed Mirela and Teodric at the ford?", "relevant": ["Session 1"]}
    bank = write_bank(tmp_path / "bank.jsonl", [ford])
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(tmp_path / "data"),
                          "--k", "1", "--json")  # fmt: skip
    overall = json.loads(stdout)["overall"]
    assert 0 == code
    assert (0.0, 1.0, 1.0) == (overall["fused_recall_at_k"], overall["linked_recall"], overall["pool_recall"])
    assert overall["union_recall"] == 1.0


@pytest.mark.integration  # the command line loads the real model
def test_eval_reingests_a_stale_index(tmp_path, ollama_down, capsys):
    notes = write_notes(tmp_path / "notes", MINI_CAMPAIGN)
    data = tmp_path / "data"
    harp = {"id": "h1", "question": "Where did the party find the golden harp of Vesh?", "relevant": ["Session 5"]}
    bank = write_bank(tmp_path / "bank.jsonl", [harp])
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(data), "--json")
    assert (0, 0.0) == (code, json.loads(stdout)["overall"]["union_recall"])  # no such session yet

    write_notes(notes, {"sessions/Session 5.md": "The party found the golden harp of Vesh in the flooded crypt.\n"})
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(data), "--json")
    assert 0 == code
    assert (1.0, 1.0) == (json.loads(stdout)["overall"]["union_recall"], json.loads(stdout)["overall"]["mrr"])


@pytest.mark.integration  # the command line loads the real model
def test_eval_says_when_it_indexes_other_notes_into_an_index(tmp_path, ollama_down, capsys):
    """`--data` naming another corpus's index, by mistake: the re-index is said, not silent."""
    data = tmp_path / "data"
    bank = write_bank(tmp_path / "bank.jsonl", [BANK[0]])
    mini = write_notes(tmp_path / "mini", MINI_CAMPAIGN)
    other = write_notes(tmp_path / "other", {"sessions/Session 1.md": "The party sold a brass compass.\n"})
    code, _, stderr = run(capsys, "eval", str(bank), "--notes", str(mini), "--data", str(data), "--json")
    assert (0, "") == (code, stderr)
    code, _, stderr = run(capsys, "eval", str(bank), "--notes", str(other), "--data", str(data), "--json")
    assert 0 == code
    assert f"was built from {mini.resolve()}" in " ".join(stderr.split())


def test_a_bad_bank_is_a_message_not_a_traceback(tmp_path, capsys):
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"question": "Who?"}\nnot json\n', encoding="utf-8")
    code, stdout, stderr = run(capsys, "eval", str(bank), "--data", str(tmp_path / "data"))
    output = " ".join((stdout + stderr).split())
    assert 1 == code
    assert "bank.jsonl:2: not a bank line" in output
    assert "Traceback" not in output
    assert not (tmp_path / "data").exists()  # nothing was ingested for a bank that cannot be read


def reversing_reranker(request: dict):
    """Annotations for ingest; the reranker picks the pool's candidates in reverse order."""
    if request_kind(request) == "annotate":
        return {"summary": "A passage of the campaign log.", "entities": []}
    if request_kind(request) == "rerank":
        numbers = [int(n) for n in re.findall(r"^(\d+)\. \(", request["messages"][-1]["content"], re.M)]
        return {"best": sorted(numbers, reverse=True)}
    return "unused"


def eval_with_a_reversing_reranker(tmp_path, monkeypatch, capsys) -> dict:
    """`oracle eval --json --k 1` of the bank's first question (Session 1: first of the fused list)
    with an Ollama whose reranker reverses the pool; the JSON it printed."""
    notes = write_notes(tmp_path / "notes", MINI_CAMPAIGN)
    bank = write_bank(tmp_path / "bank.jsonl", [BANK[0]])
    with FakeOllama(responder=reversing_reranker) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(tmp_path / "data"), "--json", "--k", "1")
        assert [] != [r for r in fake.chat_requests() if request_kind(r) == "rerank"]
    assert 0 == code
    return json.loads(stdout)


@pytest.mark.integration  # the command line loads the real model
def test_the_final_stage_is_the_rerankers_order(tmp_path, monkeypatch, capsys):
    result = eval_with_a_reversing_reranker(tmp_path, monkeypatch, capsys)
    overall = result["overall"]
    assert 1 == result["reranked"]
    assert (1.0, 0.0) == (overall["fused_recall_at_k"], overall["final_recall_at_k"])
    assert overall["mrr"] < 1.0  # the final list is the reranker's, not the fused one
    assert [{"id": "e1", "question": BANK[0]["question"], "kind": "entity", "lost": {"Session 1": "rerank"}}] == result["misses"]


# ---------------------------------------------------------------------------------------------
# oracle search

HIT_KEYS = {"id", "label", "path", "lines", "rank", "score", "text"}


@pytest.mark.integration  # the command line loads the real model
def test_search_json_shows_each_path_and_the_fused_order(campaign, ollama_down, capsys):
    notes, _, data = campaign
    code, stdout, _ = run(capsys, "search", "and who ambushed them?", "--history", "Mirela rode north to the Saltmarsh",
                          "--notes", str(notes), "--data", str(data), "--json", "--k", "3")  # fmt: skip
    assert 0 == code
    result = json.loads(stdout)
    assert {"question", "search_query", "entities", "paths", "fused", "timings_ms"} <= set(result)
    assert "Mirela rode north to the Saltmarsh and who ambushed them?" == result["search_query"]
    assert {"keyword", "semantic", "entity"} == set(result["paths"])
    assert "Mirela Vane" in {e["name"] for e in result["entities"]}
    for hits in (*result["paths"].values(), result["fused"]):
        assert hits and all(HIT_KEYS == set(h) for h in hits)
        assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    assert "campaign-log › Session 2" == result["fused"][0]["label"]
    assert "Captain Dunstan Vale ambushed them at the ford" in result["fused"][0]["text"]  # the source text
    assert len(result["paths"]["keyword"]) <= max(2 * 3, 3 + 5)  # each path asks for max(2k, k+5)


@pytest.mark.integration  # the command line loads the real model
def test_search_prints_a_panel_per_path_and_the_fused_panel(campaign, ollama_down, capsys):
    notes, _, data = campaign
    code, stdout, _ = run(capsys, "search", "Who is the Candle Monk?", "--notes", str(notes), "--data", str(data), "--k", "2")
    assert 0 == code
    text = " ".join(stdout.split())
    for panel in ("keyword path", "semantic path", "entity path", "fused (distribution-based score fusion)"):
        assert panel in text, panel
    assert 'Brother Aldous ("candle monk")' in text
    assert "npcs/Brother_Aldous.md:" in text
    assert "SECRET" not in text  # a player's view: no GM-only text in any panel


# ---------------------------------------------------------------------------------------------
# The banks' gold answers: every key term is in the public text of the question's gold notes, or
# no passage could ever show it (a typo, or words the notes do not use).

CRD3_NOTES = SHARED_EVAL / "crd3" / "notes"


def public_chunks(notes: Path) -> list[Chunk]:
    from oracle.notes.chunking import chunk_note
    from oracle.notes.parse import parse_note
    from oracle.settings import Settings
    from oracle.types import PUBLIC

    settings = Settings(_env_file=None, notes_dir=notes)
    chunks = []
    for path in sorted(notes.rglob("*.md")):
        note = parse_note(path.relative_to(notes).as_posix(), path.read_bytes(), settings.folder_kinds)
        chunks += [c for c in chunk_note(note) if c.visibility == PUBLIC]
    return chunks


@pytest.mark.parametrize(
    "bank, notes",
    [(Path(__file__).parent.parent / "notes" / "questions.jsonl", Path(__file__).parent.parent / "notes"),
     (Path(__file__).parent.parent / "bench" / "data" / "crd3_dev.jsonl", CRD3_NOTES)],
    ids=["sample", "crd3"],
)  # fmt: skip
def test_every_gold_answer_is_in_its_gold_notes(bank, notes):
    from oracle.answer.excerpts import content_terms
    from oracle.eval_bank import matches

    if not notes.is_dir():
        pytest.skip(f"{notes} is not on this machine")
    chunks = public_chunks(notes)
    questions = load_bank(bank)
    missing = {}
    for q in questions:
        if q.answer:
            gold = " ".join([*(c.text for c in chunks if any(matches(e, c) for e in q.relevant)), *q.relevant])
            held = set(content_terms(gold))
            if absent := [t for t in content_terms(q.answer) if t not in held]:
                missing[q.id] = absent
    assert {} == missing
    assert all(bool(q.answer) == bool(q.relevant) for q in questions)  # every answerable question has one


@pytest.mark.integration  # the command line loads the real model
def test_the_reranker_orders_the_learned_pool_and_eval_shows_both_stages(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ORACLE_FUSION", "learned")
    result = eval_with_a_reversing_reranker(tmp_path, monkeypatch, capsys)
    overall = result["overall"]
    assert ("learned", 1) == (result["fusion"], result["reranked"])
    # The learned stage put Session 1 first; the reranker, reversing the pool, did not.
    assert (1.0, 1.0) == (overall["fused_hit_at_5"], overall["fused_mrr"])
    assert overall["mrr"] < overall["fused_mrr"]


@pytest.mark.integration  # the command line loads the real model
def test_eval_json_lists_each_question_with_its_fused_places(campaign, ollama_down, capsys):
    """`per_question`: each question of the bank, as given, with the fused order as distinct
    (label, path) places: every session of the one-file log keeps its own label beside the path."""
    notes, _, data = campaign
    items = [
        {"id": "e1", "question": "Who sold Mirela the brass compass?", "relevant": ["Session 1"], "kind": "entity"},
        {"id": "p1", "question": "Who is the Candle Monk?", "relevant": ["npcs/Brother_Aldous.md"], "kind": "alias"},
        {"id": "u1", "question": "Who won the dragon race on the moon?", "relevant": [], "kind": "unanswerable",
         "history": ["Did anyone race?"]},
    ]  # fmt: skip
    bank = write_bank(data.parent / "per-question.jsonl", items)
    code, stdout, _ = run(capsys, "eval", str(bank), "--notes", str(notes), "--data", str(data), "--json")
    assert 0 == code
    result = json.loads(stdout)
    assert {"questions", "answerable", "unanswerable", "overall", "by_kind", "misses", "reranked", "fusion"} < set(result)

    per_question = result["per_question"]
    assert [
        ("e1", "Who sold Mirela the brass compass?", "entity", ["Session 1"]),
        ("p1", "Who is the Candle Monk?", "alias", ["npcs/Brother_Aldous.md"]),
        ("u1", "Who won the dragon race on the moon?", "unanswerable", []),
    ] == [(q["id"], q["question"], q["kind"], q["relevant"]) for q in per_question]
    assert {"id", "question", "kind", "relevant", "fused"} == set(per_question[0])

    # A player's fused pool holds every public place of the mini campaign, once each, and never
    # the GM's notes; four places share the log's path, each under its own label.
    log = "sessions/campaign-log.md"
    places = {
        ("campaign-log › Session 1", log), ("campaign-log › Session 2", log), ("campaign-log › Session 3", log),
        ("campaign-log", log),
        ("Session 4", "sessions/Session 4.md"), ("Sheet: Mirela_Vane", "sheets/Mirela_Vane.md"),
        ("Sheet: Brother_Aldous", "npcs/Brother_Aldous.md"), ("World: GODS", "world/GODS.md"),
    }  # fmt: skip
    for q in per_question:
        fused = [(p["label"], p["path"]) for p in q["fused"]]
        assert all({"label", "path", "sessions", "score", "paths"} == set(p) for p in q["fused"])
        assert (8, places) == (len(fused), set(fused)), q["id"]
        # Each place's fused score, best first, and its rank in each path that found it.
        scores = [p["score"] for p in q["fused"]]
        assert scores == sorted(scores, reverse=True)
        assert all(set(p["paths"]) <= {"keyword", "semantic", "entity"} for p in q["fused"])
        assert all(rank >= 1 for p in q["fused"] for rank in p["paths"].values())
    place = per_question[0]["fused"][0]
    assert {"label": "campaign-log › Session 1", "path": log, "sessions": [1]} == {
        k: place[k] for k in ("label", "path", "sessions")}

    # Scored by path: the alias finds the monk's note first, as the label-scored MRR says.
    monk = per_question[1]["fused"][0]
    assert ("Sheet: Brother_Aldous", "npcs/Brother_Aldous.md", []) == (monk["label"], monk["path"], monk["sessions"])
    assert 1 == monk["paths"]["entity"]  # the alias found it, through the Compendium
    assert 1.0 == result["by_kind"]["alias"]["mrr"]


def test_the_readme_s_bank_line_is_a_bank(tmp_path):
    from pathlib import Path

    from oracle.eval_bank import load_bank

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    [line] = [line for line in readme.splitlines() if line.startswith('{"id": ')]
    bank = tmp_path / "bank.jsonl"
    bank.write_text(line)
    [question] = load_bank(bank)
    assert question.relevant and question.answer and question.question.endswith("?")
