"""The core's layers run one way: notes ← index ← retrieve ← answer ← oracle ← cli / eval, with the
shared base beneath them all, and nothing in the core imports Discord or the bot. Read from the
source, so a lazy import inside a function counts too.

Each base module has a rung of its own, in the order they import each other today (the word lists
at the bottom, the model client at the top), so `types` can never import `llm` unnoticed.
"""
from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "oracle"

# A module may import its own layer and those below; never one above.
BASE = [
    "errors", "tokens", "context_window", "offload", "lexicon",  # import nothing of the core
    "text", "stems", "texts", "marks", "types",  # the lexicon
    "policy",  # marks, types
    "settings",  # the policy's names
    "deadline", "campaigns",  # settings
    "llm_errors", "llm",  # the errors of a call to Ollama, then the calls
]
LAYERS = {
    **{name: rung for rung, name in enumerate(BASE)},
    "notes": 100,
    "index": 200, "watch": 200, "visibility": 200, "backup": 200,
    "retrieve": 300,
    "answer": 400, "dossier": 400,
    "oracle": 500, "journal": 500,
    "eval": 600, "eval_bank": 600, "eval_answers": 600, "cli": 600,
}
# Parsing notes is pure text: no storage, network or event loop.
PURE = {"notes"}
IO_MODULES = {"os", "sqlite3", "aiosqlite", "chromadb", "asyncio", "httpx", "ollama", "socket", "shutil"}


def module_name(path: Path, core: Path = CORE) -> str:
    parts = list(path.relative_to(core.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "oracle" or len(parts) == 1:
        return None
    return LAYERS[parts[1]]


def imports(path: Path, core: Path = CORE) -> list[tuple[str, int]]:
    """(absolute module, line) of every import in the file, relative ones resolved."""
    here = module_name(path, core).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names] if not node.module else [target]
            else:
                names = [node.module]
            found += [(n, node.lineno) for n in names]
    return found


MODULES = sorted(p for p in CORE.rglob("*.py") if p.name != "__init__.py" or p.parent != CORE)


def test_every_core_module_has_a_layer():
    assert {module_name(p).split(".")[1] for p in MODULES} <= set(LAYERS)


def breaches(path: Path, core: Path = CORE) -> list[str]:
    """Every import of `path` that goes against the layers, as `module:line imports target`."""
    me = module_name(path, core)
    mine = layer(me)
    found = []
    for target, line in imports(path, core):
        top = target.split(".")[0]
        if top in {"discord", "bot"}:
            found.append(f"{me}:{line} imports {target} (the core never imports Discord)")
        elif top == "oracle" and (layer(target) or 0) > mine:
            found.append(f"{me}:{line} imports {target} (a layer above)")
        elif me.split(".")[1] in PURE and top in IO_MODULES:
            found.append(f"{me}:{line} imports {target} (notes are parsed without I/O)")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_run_one_way(path):
    assert [] == breaches(path)


@pytest.mark.parametrize(
    "where, source, expected",
    [
        ("index/store.py", "from ..retrieve.keyword import keyword_path\n", "oracle.index.store:1 imports oracle.retrieve.keyword (a layer above)"),
        ("notes/parse.py", "import sqlite3\n", "oracle.notes.parse:1 imports sqlite3 (notes are parsed without I/O)"),
        ("answer/leaks.py", "def f():\n    import discord\n", "oracle.answer.leaks:2 imports discord (the core never imports Discord)"),
        ("retrieve/fusion.py", "from .. import oracle\n", "oracle.retrieve.fusion:1 imports oracle.oracle (a layer above)"),
        ("types.py", "from .llm import LLM\n", "oracle.types:1 imports oracle.llm (a layer above)"),
        ("lexicon/__init__.py", "from ..text import fold\n", "oracle.lexicon:1 imports oracle.text (a layer above)"),
    ],
)
def test_the_rule_catches_each_breach(tmp_path, where, source, expected):
    """The check above can fail: a copy of the core's shape with one bad import is caught."""
    core = tmp_path / "oracle"
    path = core / where
    path.parent.mkdir(parents=True)
    path.write_text(source)
    assert [expected] == breaches(path, core)


BOT = CORE.parent / "bot"


def bot_breaches(path: Path, public: set[str]) -> list[str]:
    """Every import of the core by the bot that is not a name of its public API (`oracle.__all__`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if a.name.startswith("oracle.")]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.startswith("oracle."):
                found.append(f"{path.name}:{node.lineno} imports {node.module}")
            elif node.module == "oracle":
                found += [f"{path.name}:{node.lineno} imports oracle.{a.name} (not public)"
                          for a in node.names if a.name not in public]
    return found


@pytest.mark.parametrize("path", sorted(BOT.glob("*.py")), ids=lambda p: p.name)
def test_the_bot_uses_the_core_s_public_api_only(path):
    import oracle

    assert [] == bot_breaches(path, set(oracle.__all__))


def test_discord_stays_in_the_bot():
    """The core reads the campaigns file; where a campaign sits on Discord (channels, roles, the
    announce channel, routing) is the bot's (bot/places.py)."""
    said = re.findall(r"\w*(?:channel|role)\w*", (CORE / "campaigns.py").read_text(encoding="utf-8"), re.IGNORECASE)
    assert [] == said


def test_every_public_name_is_what_it_names_even_once_every_module_is_loaded():
    """A public name that is also a module's name ("texts") is set to the module by the import
    system when that module loads: the name must still give the function."""
    import oracle

    assert set(oracle._API) <= set(oracle.__all__)
    for path in MODULES:
        if path.stem != "__main__":  # running it would run the command
            importlib.import_module(module_name(path))
    assert [] == [name for name in oracle.__all__ if isinstance(getattr(oracle, name), types.ModuleType)]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from oracle.index.index import Index\n", "cog.py:1 imports oracle.index.index"),
        ("def f():\n    import oracle.text\n", "cog.py:2 imports oracle.text"),
        ("from oracle import Index, _API\n", "cog.py:1 imports oracle._API (not public)"),
    ],
)
def test_the_bot_rule_catches_each_breach(tmp_path, source, expected):
    path = tmp_path / "cog.py"
    path.write_text(source)
    assert [expected] == bot_breaches(path, {"Index"})


def test_the_benchmarks_and_the_fake_servers_import_no_test_module():
    """The benchmarks and the fake servers (`testing/`) import nothing from `tests/`: what both use
    lives in `testing/`, so a test's change never breaks a benchmark."""
    root = CORE.parent
    found = []
    for path in sorted([*(root / "bench").rglob("*.py"), *(root / "testing").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(root)}:{node.lineno} imports {n}" for n in names
                      if n == "tests" or n.startswith("tests.")]
    assert [] == found


LONGEST = 60  # lines from `def` to a function's last line: past it, a function is a procedure of steps


def long_functions(path: Path, root: Path = CORE.parent) -> list[str]:
    return [f"{path.relative_to(root)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > LONGEST]


def test_no_function_of_the_product_is_a_whole_procedure():
    paths = sorted([*CORE.rglob("*.py"), *BOT.glob("*.py")])
    assert [] == [found for path in paths for found in long_functions(path)]


def test_the_length_rule_catches_a_long_function(tmp_path):
    (tmp_path / "steps.py").write_text("def steps():\n" + "    x = 1\n" * (LONGEST - 1))
    (tmp_path / "procedure.py").write_text("async def procedure():\n" + "    x = 1\n" * LONGEST)
    assert [] == long_functions(tmp_path / "steps.py", tmp_path)
    assert ["procedure.py:1 procedure (61 lines)"] == long_functions(tmp_path / "procedure.py", tmp_path)
