"""The two versions of the code: the working tree, and a baseline commit checked out in a worktree of its
own; which `oracle` each version's child processes import."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.common import REPO, log


@dataclass
class Version:
    role: str  # "baseline" or "current"
    tree: Path  # its checkout: PYTHONPATH of its processes
    key: str  # its data folders' key: the commit, or "worktree"
    commit: str  # the commit (for the working tree: HEAD, plus what is changed)
    ref: str


def git(*args: str, cwd: Path = REPO) -> str:
    """A git command that only reads (no optional locks: `status` does not refresh the index)."""
    done = subprocess.run(["git", "--no-optional-locks", "-C", str(cwd), *args],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} in {cwd} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def tree_state(tree: Path) -> dict:
    """What the working tree changes from HEAD in the code (`oracle/`): files, and a hash of the diff."""
    changed = [line for line in git("status", "--porcelain", "--", "oracle", cwd=tree).splitlines() if line]
    diff = git("diff", "HEAD", "--", "oracle", cwd=tree)
    return {"head": git("rev-parse", "HEAD", cwd=tree), "changed": changed,
            "diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else None}


def baseline_tree(ref: str, work: Path) -> Version:
    """A detached worktree of REF under WORK/trees, added once and reused while it is at that commit."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    path = work / "trees" / commit[:12]
    if path.exists():
        at = git("rev-parse", "HEAD", cwd=path)
        if at != commit:
            raise SystemExit(f"{path} is at {at[:12]}, not {commit[:12]} ({ref}): remove it (git worktree remove)")
        if git("status", "--porcelain", cwd=path):
            raise SystemExit(f"{path} has changes of its own: remove it (git worktree remove --force) and run again")
        log(f"baseline {ref}: reusing the worktree {path}")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        add = ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit]
        done = subprocess.run(add, capture_output=True, text=True, check=False)
        if done.returncode and "already registered" in done.stderr:  # the folder was deleted by hand
            done = subprocess.run([*add[:4], "add", "-f", *add[5:]], capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"git worktree add failed: {done.stderr.strip()}")
        log(f"baseline {ref}: worktree of {commit[:12]} added at {path}")
    return Version("baseline", path, commit[:12], commit, ref)


def child_env(version: Version, ollama_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ORACLE_CAMPAIGNS"}
    return env | {
        "PYTHONPATH": str(version.tree),  # first on sys.path: ahead of the editable install's finder
        "ORACLE_ANNOTATE": "false",
        "ORACLE_EMBED_WORKER": "false",
        "OLLAMA_HOST": f"http://127.0.0.1:{ollama_port}",
        "PYTHONUNBUFFERED": "1",
    }


_PROBE = (
    "import json, oracle\n"
    "from oracle.settings import Settings\n"
    "s = Settings()\n"
    "print(json.dumps({'oracle': oracle.__file__, 'k': s.k, 'fusion': s.fusion, 'annotate': s.annotate,"
    " 'embed_worker': s.embed_worker, 'ollama_host': s.ollama_host}))\n"
)


def probe(version: Version, env: dict[str, str], work: Path) -> dict:
    """Which `oracle` a child of this version imports, and its settings: the run stops if it is not
    the version's own."""
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=work, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{version.role}: cannot import oracle from {version.tree}:\n{done.stderr[-2000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(found["oracle"]).resolve().is_relative_to(version.tree.resolve()):
        raise SystemExit(f"{version.role}: a child imported {found['oracle']}, not the package in {version.tree}")
    log(f"{version.role}: children import {found['oracle']} (k={found['k']}, fusion {found['fusion']})")
    return found
