"""A real Chroma server (`chroma run`, installed with chromadb) on 127.0.0.1, for the tests and the
benchmarks that point ORACLE_CHROMA_URL at one."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen


def wait_for_heartbeat(url: str, seconds: float) -> None:
    """Return once the Chroma server at `url` answers; RuntimeError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urlopen(f"{url}/api/v2/heartbeat", timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the Chroma server at {url} did not answer within {seconds:.0f} s")


class ChromaServer:
    """Started on `port` (else a free one) with its data in `path`; `stop()` (or leaving the `with`) ends it."""

    def __init__(self, path: Path, *, start_seconds: float = 30.0, port: int | None = None) -> None:
        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(path), "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_heartbeat(self.url, start_seconds)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def __enter__(self) -> ChromaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
