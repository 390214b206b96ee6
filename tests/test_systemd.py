"""The systemd units in `systemd/` start what the project installs, with arguments it accepts, and
the install in docs/operations.md ("Running it as a service") makes what they need, in order.

systemd itself is not here: each unit's ExecStart is run from this checkout's virtualenv instead of
/opt/oracle/.venv, with its paths moved into a temporary folder; where `systemd-analyze` is installed,
it verifies the units."""
from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from testing.chroma_server import wait_for_heartbeat

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
    options = dict(zip(argv[2::2], argv[3::2], strict=False))
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


# --- The install: docs/operations.md's "Running it as a service" and the units agree ------------

INSTALL_DOC = REPO / "docs" / "operations.md"
INSTALL_HEADING = "## Running it as a service"
CHECKOUT = "/opt/oracle"
SERVICES = ("oracle-bot.service", "oracle-reingest.service")
# Folders a service's sandbox hides: ProtectHome= covers the first three, PrivateTmp= the last two.
HOME_FOLDERS = ("/home", "/root", "/run/user")
TMP_FOLDERS = ("/tmp", "/var/tmp")


def install_section() -> str:
    text = INSTALL_DOC.read_text()
    start = text.index(f"\n{INSTALL_HEADING}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def install_commands() -> list[list[str]]:
    """The section's shell lines, in order, as argument lists; `a && b` is two commands."""
    commands: list[list[str]] = []
    in_block = shell = False
    for line in install_section().splitlines():
        line = line.strip()
        if line.startswith("```"):
            in_block = not in_block
            shell = in_block and line in ("```sh", "```bash")
            continue
        if shell and line and not line.startswith("#"):
            argv: list[str] = []
            for word in shlex.split(line, comments=True):
                if word == "&&":
                    commands.append(argv)
                    argv = []
                else:
                    argv.append(word)
            commands.append(argv)
    assert commands, f"no shell lines under {INSTALL_HEADING!r} in {INSTALL_DOC.name}"
    return commands


def options(argv: list[str], flags: str = "") -> tuple[dict[str, str | bool], list[str]]:
    """`install`'s and `useradd`'s options and operands: options taking a value, and `flags` without one."""
    found: dict[str, str | bool] = {}
    operands: list[str] = []
    words = iter(argv[1:])
    for word in words:
        if word in flags.split():
            found[word] = True
        elif word.startswith("-"):
            found[word] = next(words)
        else:
            operands.append(word)
    return found, operands


def first(commands: list[list[str]], test) -> int:
    """The index of the first command `test` accepts; fails if none does."""
    for i, argv in enumerate(commands):
        if test(argv):
            return i
    raise AssertionError("the install in docs/operations.md has no such line")


def is_start(argv: list[str]) -> bool:
    return argv[:2] in (["systemctl", "start"], ["systemctl", "enable"])


def service(name: str) -> dict[str, list[str]]:
    return unit(name)["Service"]


def environment_of(name: str) -> dict[str, str]:
    """The unit's own Environment= settings."""
    env = {}
    for line in service(name).get("Environment", []):
        for assignment in shlex.split(line):
            key, _, value = assignment.partition("=")
            env[key] = value
    return env


def environment_file() -> tuple[str, Path]:
    """The EnvironmentFile= the services read, and the file of this checkout the install puts there."""
    (path,) = {p.lstrip("-") for name in SERVICES for p in service(name)["EnvironmentFile"]}
    for argv in install_commands():
        if argv[0] == "install":
            found, operands = options(argv, "-d")
            if not found.get("-d") and operands[-1:] == [path]:
                (source,) = operands[:-1]
                assert source.startswith(f"{CHECKOUT}/"), f"{path} is installed from {source}, not from the checkout"
                return path, REPO / source.removeprefix(f"{CHECKOUT}/")
    raise AssertionError(f"the install never puts {path} in place")


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=value lines, as systemd's EnvironmentFile= reads them when values hold no quote, backslash or $."""
    env = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        assert sep and key.isidentifier() and key == key.upper(), f"{path.name}:{number}: not NAME=value"
        # Where systemd (quotes, escapes, $VAR expansion) and a .env reader could disagree.
        assert not set(value) & set("'\"\\$"), f"{path.name}:{number}: quotes, backslashes and $ read differently"
        env[key] = value.strip()
    return env


def under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def readable(unit_service: dict[str, list[str]], path: str) -> bool:
    """Whether the service's sandbox shows `path` (ProtectSystem= makes folders read-only, never hides them)."""
    hidden = [p.lstrip("-") for line in unit_service.get("InaccessiblePaths", []) for p in line.split()]
    if any(under(path, folder) for folder in hidden):
        return False
    if unit_service.get("PrivateTmp", ["no"])[-1] in ("yes", "true", "on", "1"):
        if any(under(path, folder) for folder in TMP_FOLDERS):
            return False
    if any(under(path, folder) for folder in HOME_FOLDERS):
        protect_home = unit_service.get("ProtectHome", ["no"])[-1]
        if protect_home in ("yes", "true", "on", "1"):
            return False  # and no bind mount can show it there (systemd.exec, BindPaths=)
        if protect_home == "tmpfs":
            binds = [b.lstrip("-").split(":") for key in ("BindPaths", "BindReadOnlyPaths")
                     for line in unit_service.get(key, []) for b in line.split()]
            return any(under(path, bind[1] if len(bind) > 1 else bind[0]) for bind in binds)
    return True


def seconds(span: str) -> float:
    """A systemd time span of the forms the units use: 30, 30s, 5min, 1h."""
    for suffix, factor in (("min", 60), ("h", 3600), ("s", 1)):
        if span.endswith(suffix):
            return float(span.removesuffix(suffix)) * factor
    return float(span)


def test_the_install_copies_every_unit_it_starts_from_the_checkout():
    commands = install_commands()
    copy = commands[first(commands, lambda a: a[0] == "cp" and a[-1] == "/etc/systemd/system/")]
    copied = {Path(source).name for source in copy[1:-1]}
    for source in copy[1:-1]:
        assert source.startswith(f"{CHECKOUT}/systemd/") and (REPO / source.removeprefix(f"{CHECKOUT}/")).is_file()
    started = {argv[-1] for argv in commands if is_start(argv)}
    assert {"oracle-bot", "oracle-reingest"} <= started
    for name in started:
        assert (name if "." in name else f"{name}.service") in copied, f"the install starts {name} without copying it"
    reload_ = first(commands, lambda a: a == ["systemctl", "daemon-reload"])
    assert commands.index(copy) < reload_ < first(commands, is_start)
    # The first ingest runs before the bot, which would otherwise start on an empty index.
    ingest = first(commands, lambda a: a == ["systemctl", "start", "oracle-reingest"])
    assert ingest < first(commands, lambda a: is_start(a) and a[-1] == "oracle-bot")


def test_the_checkout_and_virtualenv_are_where_the_units_run_them():
    commands = install_commands()
    for name in (*SERVICES, "oracle-chroma.service"):
        (command,) = service(name)["ExecStart"]
        assert shlex.split(command)[0].startswith(VENV_BIN)
    for name in SERVICES:
        assert service(name)["WorkingDirectory"] == [CHECKOUT]
    clone = first(commands, lambda a: a[:2] == ["git", "clone"] and a[-1] == CHECKOUT)
    venv = first(commands, lambda a: a[1:3] == ["-m", "venv"] and a[-1] == VENV_BIN.removesuffix("/bin/"))
    pip = first(commands, lambda a: a[0] == f"{VENV_BIN}pip" and a[1:] == ["install", "-e", CHECKOUT])
    assert clone < venv < pip < first(commands, is_start)
    assert commands[venv][0] == "python3.11"  # requires-python: 3.11
    apt = commands[first(commands, lambda a: a[:2] == ["apt-get", "install"])]
    used = {argv[0] for argv in commands}
    for package, program in (("python3.11", "python3.11"), ("python3.11-venv", "python3.11"), ("git", "git"),
                             ("acl", "setfacl"), ("curl", "curl")):
        assert program not in used or package in apt, f"the install runs {program} without installing {package}"
    # The services read no .env there: nothing in the install writes one.
    assert not any(f"{CHECKOUT}/.env" in argv for argv in commands)


def test_the_user_and_every_folder_a_service_writes_are_made_before_it_starts():
    commands = install_commands()
    starts = first(commands, is_start)
    for name in SERVICES:
        s = service(name)
        (user,), (group,) = s["User"], s["Group"]
        useradd = first(commands, lambda a, user=user: a[0] == "useradd" and a[-1] == user)
        found, _ = options(commands[useradd], "--system")
        assert found.get("--system") and found.get("--shell") == "/usr/sbin/nologin"
        # Its home is a folder it may write (caches under ~/.cache), not the read-only checkout.
        assert found.get("--home-dir") in s["ReadWritePaths"]
        for folder in s["ReadWritePaths"]:
            made = first(commands, lambda a, folder=folder: a[0] == "install" and options(a, "-d")[1] == [folder])
            found, _ = options(commands[made], "-d")
            assert found.get("-d") and found.get("-o") == user and found.get("-g") == group, commands[made]
            assert useradd < made < starts


def test_the_install_puts_the_environment_file_readable_by_root_only():
    commands = install_commands()
    path, template = environment_file()
    assert template.is_file()
    folder = str(Path(path).parent)
    made = first(commands, lambda a: a[0] == "install" and options(a, "-d")[1] == [folder])
    assert options(commands[made], "-d")[0].get("-d")
    copied = first(commands, lambda a: a[0] == "install" and options(a, "-d")[1][-1:] == [path])
    found, _ = options(commands[copied], "-d")
    assert (found.get("-m"), found.get("-o")) == ("600", "root"), "the token is in it"
    assert made < copied < first(commands, is_start)


def test_the_environment_file_never_replaces_what_a_unit_sets():
    # systemd reads EnvironmentFile= after Environment=: a setting in both takes the file's value.
    _, template = environment_file()
    settings = read_env_file(template)
    for name in SERVICES:
        for key, value in environment_of(name).items():
            assert settings.get(key, value) == value, f"{template.name} replaces {name}'s {key}={value}"


def test_the_services_get_their_data_folder_and_the_vault(monkeypatch):
    from bot.settings import BotSettings
    from oracle.settings import Settings

    _, template = environment_file()
    for name in SERVICES:
        env = {**environment_of(name), **read_env_file(template)}  # the order systemd applies them in
        for key in [k for k in os.environ if k.startswith(("ORACLE_", "DISCORD_", "OLLAMA_"))]:
            monkeypatch.delenv(key)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        settings, bot_settings = Settings(_env_file=None), BotSettings(_env_file=None)
        assert [str(settings.data_dir)] == service(name)["ReadWritePaths"]
        assert settings.notes_dir.is_absolute(), "a relative vault would depend on WorkingDirectory="
        assert settings.campaigns is None and not bot_settings.token.get_secret_value()
        assert env["HF_HUB_OFFLINE"] == "1"


def test_the_vault_is_readable_in_the_services_sandbox():
    commands = install_commands()
    _, template = environment_file()
    notes = read_env_file(template)["ORACLE_NOTES_DIR"]
    acl_targets = [argv[-1] for argv in commands if argv[:2] == ["setfacl", "-R"]]
    assert notes in acl_targets, "the install gives the oracle user no read access to the shipped vault path"
    assert any(under(t, "/home") for t in acl_targets), "the install shows no vault under /home"
    for name in SERVICES:
        s = service(name)
        (user,) = s["User"]
        for argv in commands:
            if argv[:2] == ["setfacl", "-R"]:
                assert argv[2:4] == ["-m", f"u:{user}:rX,d:u:{user}:rX"], argv
        assert ["runuser", "-u", user, "--", "ls", notes] in commands
        for target in acl_targets:
            assert readable(s, target), f"{name} cannot see {target}"
    # What the units had before: a vault under /home was hidden from them.
    assert not readable({"ProtectHome": ["true"]}, "/home/alice/Obsidian/Campaign")


def test_the_bot_and_the_reingest_run_alike():
    bot, reingest = (service(name) for name in SERVICES)
    for key in ("User", "Group", "WorkingDirectory", "EnvironmentFile", "Environment", "ReadWritePaths",
                "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
                "ProtectKernelTunables", "ProtectKernelModules", "ProtectControlGroups", "RestrictSUIDSGID",
                "RestrictRealtime", "LockPersonality", "RestrictAddressFamilies", "CapabilityBoundingSet",
                "MemoryMax", "KillSignal", "TimeoutStopSec"):
        assert bot.get(key) == reingest.get(key), key
    assert unit(SERVICES[0])["Unit"]["After"] == unit(SERVICES[1])["Unit"]["After"]


def test_the_bot_stops_in_time_and_restarts_only_what_a_restart_can_mend():
    bot = service("oracle-bot.service")
    assert bot["Restart"] == ["on-failure"]
    assert "2" in bot["RestartPreventExitStatus"][-1].split()
    assert bot.get("KillSignal", ["SIGTERM"]) == ["SIGTERM"]
    assert 30 <= seconds(bot["TimeoutStopSec"][-1]) < 90  # room for questions in flight; below the default 90 s
    # Never failed for good by a start limit, and a crash loop stays under Discord's 1,000 gateway
    # logins a day.
    assert unit("oracle-bot.service")["Unit"]["StartLimitIntervalSec"] == ["0"]
    assert 86400 / seconds(bot["RestartSec"][-1]) < 1000


@pytest.mark.parametrize("setting", [{"DISCORD_TOKEN": ""}, {"DISCORD_TOKEN": "x", "ORACLE_K": "many"}])
def test_a_startup_failure_exits_with_a_status_the_unit_does_not_restart(tmp_path, setting):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORACLE_", "DISCORD_", "OLLAMA_"))}
    env.update(environment_of("oracle-bot.service"), ORACLE_DATA_DIR=str(tmp_path / "data"),
               ORACLE_NOTES_DIR=str(REPO / "notes"), **setting)
    done = subprocess.run(exec_start("oracle-bot.service"), cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert str(done.returncode) in service("oracle-bot.service")["RestartPreventExitStatus"][-1].split(), done.stderr
    assert "DISCORD_TOKEN" in done.stderr or "ORACLE_K" in done.stderr


@pytest.mark.parametrize("name", ["oracle-bot.service", "oracle-reingest.service", "oracle-reingest.timer"])
def test_the_units_install_comments_are_the_install_lines(name):
    install = install_commands()
    lines = [line.removeprefix("#").strip() for line in (UNITS / name).read_text().splitlines()
             if line.startswith("#   ")]
    commands = [argv for line in lines for argv in [shlex.split(line)] if argv[0] in
                ("useradd", "install", "cp", "systemctl", "journalctl")]
    assert commands, f"{name} shows no install lines"
    for argv in commands:
        assert argv in install, (
            f"{name}'s comment has {shlex.join(argv)!r}, which the install in docs/operations.md does not"
        )


def test_systemd_analyze_verifies_the_units(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is missing on this machine: the units were not verified by systemd")
    # verify wants every ExecStart program to exist: the units run this checkout's virtualenv instead.
    for path in [*UNITS.glob("*.service"), *UNITS.glob("*.timer")]:
        text = path.read_text().replace(VENV_BIN, f"{Path(sys.executable).parent}/")
        (tmp_path / path.name).write_text(text)
    names = sorted(str(p) for p in tmp_path.iterdir())
    done = subprocess.run([analyze, "verify", "--man=no", *names], capture_output=True, text=True, timeout=120,
                          check=False)
    # verify exits 0 even when it ignores a line it cannot parse: its output must be empty too.
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr


def test_the_timer_runs_on_the_quarter_hours_and_catches_up_a_missed_one():
    timer = unit("oracle-reingest.timer")["Timer"]
    # Persistent= only remembers OnCalendar= runs: with OnBootSec/OnUnitInactiveSec alone it did nothing.
    assert (["*:0/15"], ["true"]) == (timer["OnCalendar"], timer["Persistent"])
    assert "15 minutes" in (UNITS / "oracle-reingest.timer").read_text().splitlines()[0]


def test_a_timer_run_that_finds_an_ingest_under_way_is_not_a_failed_unit():
    argv = exec_start("oracle-reingest.service")
    assert argv[1:] == ["ingest", "--if-idle"]


def test_oracle_run_runs_a_command_as_the_bot_service_does(tmp_path):
    """`systemd/oracle-run ARGS` hands `oracle ARGS` to systemd-run with the bot unit's user, settings
    file, environment, folder and protections (systemd itself is not here: a stand-in records what
    it was asked)."""
    import json

    fake = tmp_path / "bin" / "systemd-run"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    done = subprocess.run([str(UNITS / "oracle-run"), "status", "--gm", "a question, with spaces"],
                          capture_output=True, text=True, env=env, timeout=30, check=True)
    argv = json.loads(done.stdout)
    at = argv.index(VENV_BIN + "oracle")
    assert argv[at + 1:] == ["status", "--gm", "a question, with spaces"]
    assert (Path(sys.executable).parent / "oracle").exists()  # the program the install provides
    options = argv[:at]
    asked = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in options if o.startswith("--") and "=" in o}
    properties = [options[i + 1] for i, o in enumerate(options) if o == "-p"]
    setenv = [options[i + 1] for i, o in enumerate(options) if o == "-E"]
    service = unit("oracle-bot.service")["Service"]
    assert [asked["--uid"], asked["--gid"], asked["--working-directory"]] == [
        *service["User"], *service["Group"], *service["WorkingDirectory"]
    ]
    assert setenv == service["Environment"]
    for key in ("EnvironmentFile", "ProtectSystem", "ProtectHome", "ReadWritePaths", "NoNewPrivileges"):
        assert [f"{key}={v}" for v in service[key]] == [p for p in properties if p.startswith(key + "=")]
    assert {"--wait", "--pipe"} <= set(options)  # the command's output and exit status come back


def test_the_nightly_backup_runs_a_command_the_cli_has(tmp_path):
    argv = exec_start("oracle-backup.service")
    assert unit("oracle-backup.timer")["Timer"]["Unit"] == ["oracle-backup.service"]
    assert argv[1] == "backup" and argv[2].startswith(unit("oracle-backup.service")["Service"]["ReadWritePaths"][0])
    done = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_the_cpu_build_the_docs_install_is_the_release_the_project_pins():
    import re
    import tomllib

    pinned = [d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
              if d.startswith("torch==")]
    assert len(pinned) == 1
    for doc in (REPO / "README.md", REPO / "docs" / "operations.md"):
        lines = [line for line in doc.read_text().splitlines() if "download.pytorch.org/whl/cpu" in line]
        assert lines, doc
        for line in lines:
            assert re.findall(r"torch==[\w.]+", line) == pinned, (doc, line)
