"""The command line speaks as a player unless told `--gm`: what a player reads of `ask`, `recap`,
`who` and `status`, in text and `--json`, names no host, port, path or error, and counts only what
players can read; the game master's keeps the detail and names the policy of who reads what.

One vault, ingested once: `sessions/Session 3.md` is public, `sessions/Session 4.md` is the game
master's prep for a session not yet played (`visibility: gm`, a higher number), and Mirela is named
in both. Ollama is a closed port on 127.0.0.1.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

import oracle.index.index
from oracle import cli
from oracle.answer.trace import (
    PLAYER_INCOMPLETE,
    PLAYER_REASON,
    PLAYER_RERANK_OFF,
    RerankRecord,
    Trace,
)
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.status import PLAYER_OLLAMA, PLAYER_WINDOW_UNKNOWN, model_name
from oracle.texts import texts
from tests.conftest import closed_port_url, quick_settings, write_notes

NO_MODEL = texts().no_model_running  # what a player reads with no Ollama at all
VAULT = {
    "sessions/Session 3.md": """
        # Session 3 — The Ford
        Mirela and Teodric crossed the ford at dawn. Captain Dunstan Vale waited there with his riders.
        Mirela paid the toll in silver, and Vale let the party pass.
    """,
    "sessions/Session 4.md": """
        ---
        visibility: gm
        ---
        # Session 4 — The Salt Gate
        PREP-MARK: Mirela will meet Dunstan Vale at the Salt Gate. Mirela finds the ledger there.
        Mirela trusts Vale; Mirela is wrong.
    """,
    "sheets/Mirela_Vane.md": """
        # Mirela Vane
        A wandering cartographer who trusts maps more than people.
    """,
}
POLICY = "players read only sessions, sheets (ORACLE_PLAYER_NOTES); game master only: TODO.md (ORACLE_GM_NOTES)"


@pytest.fixture(scope="module")
def vault(tmp_path_factory, quick_embedder) -> tuple[Path, Path]:
    """(notes, data): the vault, ingested once with the session's stand-in model (what a player reads
    is judged here, not the ranking)."""
    root = tmp_path_factory.mktemp("players")
    notes = write_notes(root / "notes", VAULT)
    # The policy the commands run under (`run`): an index built under another one is refused to players.
    settings = quick_settings(notes, root / "data", closed_port_url(), annotate=False,
                              player_notes=["sessions", "sheets"], gm_notes=["TODO.md"])

    async def build() -> None:
        async with Index(settings, embedder=quick_embedder) as index:
            report = await ingest(index)
            assert {"sessions/Session 4.md"} == {p for p, n in report.secrets.items() if n < 0}

    asyncio.run(build())
    return notes, root / "data"


@pytest.fixture
def run(vault, quick_embedder, monkeypatch, tmp_path, capsys):
    """`oracle …` against the vault as a player or a game master runs it: (exit code, stdout)."""
    notes, data = vault
    monkeypatch.chdir(tmp_path)  # no developer .env read
    for key in [k for k in os.environ if k.startswith(("ORACLE_", "OLLAMA_"))]:
        monkeypatch.delenv(key)
    host = closed_port_url()
    monkeypatch.setenv("OLLAMA_HOST", host)
    monkeypatch.setenv("ORACLE_OLLAMA_PROBE_TIMEOUT", "2")
    monkeypatch.setenv("ORACLE_ANNOTATE", "false")
    monkeypatch.setenv("ORACLE_PLAYER_NOTES", "sessions, sheets")  # what the vault already is
    monkeypatch.setenv("ORACLE_GM_NOTES", "TODO.md")
    # The session's model, not one loaded per command.
    monkeypatch.setattr(oracle.index.index, "load_embedder", lambda settings: quick_embedder)

    def run_(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli.main([*argv, "--data", str(data), *(["--notes", str(notes)] if argv[0] != "status" else [])])
        return code, capsys.readouterr().out

    run_.host = host  # type: ignore[attr-defined]
    run_.paths = (notes, data)  # type: ignore[attr-defined]
    return run_


def machine_details(run, text: str) -> list[str]:
    """Every host, URL, port and path outside the notes folder a text names."""
    port = run.host.rsplit(":", 1)[1]
    found = re.findall(rf"127\.0\.0\.1|localhost|https?:|(?<!\d){port}(?!\d)|Traceback|Error\b", text)
    found += re.findall(r"(?:^|[\s\"'(`])(?:/|~/|[A-Za-z]:\\)[^\s\"']*", text)  # an absolute path
    found += [str(p) for p in (*run.paths, Path.cwd(), Path.home()) if str(p) in text]
    return found


# ---------------------------------------------------------------------------------------------
# 1. ask: nothing of the machine in a player's output


def test_a_players_ask_json_names_no_host_port_or_path(run):
    code, out = run("ask", "Who waited at the ford?", "--json")
    data = json.loads(out)
    assert (0, "passages") == (code, data["mode"])
    assert [] == machine_details(run, out), out
    # A player learns that no model runs, not where it was looked for.
    assert (NO_MODEL, NO_MODEL) == (data["reason"], data["trace"]["reason"])
    assert data["answer"].startswith(f"The Oracle could not write an answer ({NO_MODEL}).")
    assert "Session 3" in data["fragments"]


def test_the_game_masters_ask_json_keeps_the_reason(run):
    code, out = run("ask", "Who waited at the ford?", "--json", "--gm")
    data = json.loads(out)
    reason = f"Ollama is not reachable at {run.host}"
    assert (0, "passages", reason, reason) == (code, data["mode"], data["reason"], data["trace"]["reason"])
    assert f"({reason})" in data["answer"]


def test_a_players_ask_in_text_with_its_trace_names_no_host(run):
    code, out = run("ask", "Who waited at the ford?", "--trace")
    assert 0 == code and "Passages, not an answer" in out and NO_MODEL in out
    assert [] == machine_details(run, out), out
    code, out = run("ask", "Who waited at the ford?", "--trace", "--gm")
    assert 0 == code and f"Ollama is not reachable at {run.host}" in out


# ---------------------------------------------------------------------------------------------
# 2. recap and who: only what the reader can read


def test_a_players_recap_is_of_the_last_session_players_can_read(run):
    code, out = run("recap", "--json")
    data = json.loads(out)
    assert (0, "Recap of Session 3", "passages") == (code, data["trace"].get("search_query"), data["mode"])
    assert ["Session 3"] == [c["label"] for c in data["citations"]] == data["fragments"]
    assert "PREP-MARK" not in out and "Session 4" not in out and "Salt Gate" not in out
    assert [] == machine_details(run, out), out
    assert NO_MODEL == data["reason"]

    # The GM-only session is not there for players even when named, by number or by a word of its title.
    for named in ("4", "Session 4", "Salt Gate"):
        code, out = run("recap", named, "--json")
        data = json.loads(out)
        assert ("not_found", f"The notes hold no session matching “{named}”.") == (data["mode"], data["answer"])

    code, out = run("recap")  # in text too
    assert 0 == code and "Session 3" in out and "Session 4" not in out and "PREP-MARK" not in out
    assert [] == machine_details(run, out), out


def test_the_game_masters_recap_is_of_the_last_session(run):
    code, out = run("recap", "--json", "--gm")
    data = json.loads(out)
    assert (0, ["Session 4"]) == (code, data["fragments"])
    assert "PREP-MARK" in data["answer"] and f"Ollama is not reachable at {run.host}" == data["reason"]


def test_a_players_dossier_counts_only_public_mentions(run):
    code, out = run("who", "Mirela", "--json")
    dossier = json.loads(out)["dossier"]
    assert (0, "Mirela Vane") == (code, dossier["name"])
    assert ("Session 3", "Session 3") == (dossier["first"], dossier["last"])
    mentions = {m["label"]: m["count"] for m in dossier["mentions"]}
    assert {"Session 3": 2, "Sheet: Mirela_Vane": mentions["Sheet: Mirela_Vane"]} == mentions
    assert "Session 4" not in out and "sessions/Session 4.md" not in out

    code, out = run("who", "Mirela")  # in text too
    assert 0 == code and "last seen Session 3" in out and "Session 4" not in out

    code, out = run("who", "Mirela", "--json", "--gm")
    dossier = json.loads(out)["dossier"]
    assert ("Session 3", "Session 4") == (dossier["first"], dossier["last"])
    assert 4 == {m["label"]: m["count"] for m in dossier["mentions"]}["Session 4"]


# ---------------------------------------------------------------------------------------------
# 3. status: a player's counts what players read; the game master's names the policy


def test_a_players_status_counts_public_text_and_names_no_host_or_policy(run):
    code, out = run("status", "--json")
    status = json.loads(out)
    assert (0, 1, "en") == (code, status["sessions"], status["language"])
    assert {"notes_dir", "policy", "withheld", "sessions_gm_only", "chunks_by_visibility", "entities_gm"}.isdisjoint(status)
    assert ({"ok": False, "reason": PLAYER_OLLAMA}, PLAYER_OLLAMA) == (status["ollama"], status["model_loaded"]["reason"])
    assert PLAYER_WINDOW_UNKNOWN == status["context"]["reason"]
    assert [] == machine_details(run, out), out
    assert "ORACLE_PLAYER_NOTES" not in out and "TODO.md" not in out

    code, out = run("status")
    assert 0 == code and "as players read it" in out and "oracle status --gm" in out
    assert "language of the notes" in out and "English (en)" in out
    assert [] == machine_details(run, out), out
    assert "who reads what" not in out and "TODO.md" not in out


def test_the_game_masters_status_names_the_policy_and_the_host(run):
    code, out = run("status", "--json", "--gm")
    status = json.loads(out)
    assert (0, 1, 1, POLICY) == (code, status["sessions"], status["sessions_gm_only"], status["policy"])
    assert (run.host, f"Ollama is not reachable at {run.host}") == (status["ollama"]["host"], status["ollama"]["reason"])

    code, out = run("status", "--gm")
    flat = " ".join(out.replace("│", " ").split())  # a long cell wraps within its column
    assert 0 == code and "who reads what" in flat and "players read only sessions, sheets" in flat
    assert run.host in flat


# ---------------------------------------------------------------------------------------------
# The pieces that decide


def test_a_trace_for_players_keeps_no_reason_of_the_machine():
    host = "http://10.0.0.7:11434"
    trace = Trace("passages", f"Ollama is not reachable at {host}", rerank=RerankRecord(
        "cross-encoder", False, "off: cannot load the cross-encoder '/srv/models/ce': OSError: no such file", []),
        incomplete=f"Ollama at {host} closed the connection mid-reply")
    shown = trace.for_players().to_json()
    assert (PLAYER_REASON, PLAYER_RERANK_OFF, PLAYER_INCOMPLETE) == (
        shown["reason"], shown["rerank"]["reason"], shown["incomplete"])
    assert host not in json.dumps(shown) and "/srv" not in json.dumps(shown)
    assert host in json.dumps(trace.to_json())  # the game master's is as it was
    # The Oracle's own words stay: a reranker that chose, a question nothing matched.
    used = Trace("llm", "", rerank=RerankRecord("llm", True, "chose 3", []))
    assert "chose 3" == used.for_players().rerank.reason
    assert "no passage matched" == Trace("not_found", "no passage matched").for_players().reason


@pytest.mark.parametrize("model, shown", [
    ("bundled:all-MiniLM-L6-v2", "bundled:all-MiniLM-L6-v2"),
    ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
    ("/srv/models/bge-small/", "bge-small"),
    ("~/models/bge-small", "bge-small"),
    ("./models/bge-small", "bge-small"),
    ("C:\\models\\bge-small", "bge-small"),
])
def test_a_player_reads_a_models_name_never_its_folder(model, shown):
    assert shown == model_name(model)


def test_one_rule_for_exit_codes_and_one_refusal_of_an_empty_question(run, capsys):
    """0 for an answer, an honest "nothing on that" included; 2 for bad input, the same sentence on
    every command (`oracle --help` says the rule)."""
    for argv in (["ask", "  "], ["search", ""], ["who", " "]):
        capsys.readouterr()
        code = cli.main(argv)  # refused before any index is opened
        said = capsys.readouterr()
        err = " ".join(said.err.split())
        assert (2, "") == (code, said.out), argv
        assert err.startswith(f"oracle {argv[0]}: ") and err.endswith(
            texts().empty_question if argv[0] != "who" else "Give a name to look up."), err
    assert 0 == run("who", "Nobodyhere")[0]  # the Compendium has no entry: an honest answer
    assert 0 == run("recap", "99")[0]  # no such session: the same
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "Exit status, on every command: 0 for an answer" in " ".join(capsys.readouterr().out.split())
