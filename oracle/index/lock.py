"""One ingest at a time per campaign, across processes."""
from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from ..errors import OracleError
from .store import now


class IngestBusy(OracleError, RuntimeError):
    """Another ingest holds the lock; the message says who started it and when."""



class IngestLock:
    """One ingest at a time, across processes: an advisory lock the OS drops if the holder dies. It is
    also what keeps two processes from ever writing one embedded Chroma folder: only an ingest writes
    it, and the folder is the campaign's (`Settings.chroma_path`, inside the locked data folder)."""

    def __init__(self, path: Path, by: str) -> None:
        self.path = path
        self.by = by
        self._fd: int | None = None

    def __enter__(self) -> IngestLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise IngestBusy(
                f"an ingest is already running (started by {holder.get('by', 'someone')} at "
                f"{holder.get('started', 'an unknown time')}, pid {holder.get('pid', '?')})"
            ) from None
        os.ftruncate(fd, 0)
        started = now()
        os.write(fd, json.dumps({"pid": os.getpid(), "by": self.by, "started": started}).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
