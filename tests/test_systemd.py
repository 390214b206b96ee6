"""The systemd units in `systemd/` start what the project installs, with arguments it accepts.

systemd itself is not here: each unit's ExecStart is run from this checkout's virtualenv instead of
/opt/oracle/.venv, with its paths moved into a temporary folder."""
from __future__ import annotations

import importlib.util
import shlex
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.chroma_server import wait_for_heartbeat

REPO = Path(__file__).resolve().parent.parent
UNITS = REPO / "systemd"
VENV_BIN = "/opt/oracle/.venv/bin/"


def unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections, each key with all its values (systemd allows a key more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), defaultdict(list))
            continue
        assert current is not None, f"{name}: {line!r} outside a section"
        key, _, value = line.partition("=")
        current[key].append(value)
    return sections


def exec_start(name: str) -> list[str]:
    """The unit's command line, its program taken from this checkout's virtualenv."""
    (command,) = unit(name)["Service"]["ExecStart"]
    argv = shlex.split(command)
    assert argv[0].startswith(VENV_BIN), f"{name} runs {argv[0]}, not a program of the project's virtualenv"
    program = Path(sys.executable).parent / argv[0].removeprefix(VENV_BIN)
    assert program.exists(), f"{name} runs {argv[0]}, which the install does not provide"
    return [str(program), *argv[1:]]


@pytest.mark.parametrize("name", sorted(p.name for p in UNITS.glob("*.service")))
def test_every_service_runs_a_program_the_install_provides(name):
    exec_start(name)


def test_the_bot_service_runs_the_bot_module():
    argv = exec_start("oracle-bot.service")
    assert argv[1:] == ["-m", "bot"]
    assert importlib.util.find_spec("bot.__main__") is not None


def test_the_reingest_service_runs_a_command_the_cli_has():
    argv = exec_start("oracle-reingest.service")
    done = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "--campaign" in done.stdout  # the unit's comment tells how to reingest one campaign


def test_the_timer_starts_the_reingest_service():
    timer = unit("oracle-reingest.timer")
    assert timer["Timer"]["Unit"] == ["oracle-reingest.service"]
    assert (UNITS / "oracle-reingest.service").exists()


def test_the_chroma_service_serves_its_folder_on_localhost_only(tmp_path):
    service = unit("oracle-chroma.service")["Service"]
    argv = exec_start("oracle-chroma.service")
    options = dict(zip(argv[2::2], argv[3::2]))
    assert argv[1] == "run" and set(options) == {"--path", "--host", "--port"}
    # No authentication and game-master-only windows inside: never on a public address.
    assert options["--host"] == "127.0.0.1"
    # The hardening leaves the store writable.
    assert service["ReadWritePaths"] == [options["--path"]]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv[argv.index(options["--path"])] = str(tmp_path / "chroma")
    argv[argv.index(options["--port"])] = str(port)
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_heartbeat(f"http://127.0.0.1:{port}", 30.0)
        assert server.poll() is None
    finally:
        server.terminate()
        server.wait(10)
