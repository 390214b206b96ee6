"""One ingest at a time per campaign, across processes."""
from __future__ import annotations

import fcntl
import json
import os
import pwd
from pathlib import Path

from ..errors import OracleError
from .store import now


class IngestBusy(OracleError, RuntimeError):
    """Another ingest holds the lock; the message says who started it and when."""


class NotWritable(OracleError, PermissionError):
    """The index's folder is not this process's to write; the message says whose it is."""


def check_writable(data_dir: Path) -> None:
    """Refuse, in one sentence, to write an index this process may not write, or, as root, one that
    another user owns (its new files would be root's, and that user, the service, could no longer
    write them). A folder not made yet is this process's to make."""
    server = "on a server installed as docs/operations.md says: /opt/oracle/systemd/oracle-run COMMAND"
    try:
        stat = data_dir.stat()
    except FileNotFoundError:
        return
    except PermissionError:
        raise NotWritable(f"cannot reach the index at {data_dir} (permission denied): run the command as the "
                          f"user that owns it ({server})") from None
    owner = _user(stat.st_uid)
    how = f"run the command as {owner} ({server})"
    if os.geteuid() == 0 and stat.st_uid != 0:
        raise NotWritable(f"the index at {data_dir} belongs to {owner}: as root this would leave files {owner} "
                          f"cannot write; {how}")
    if os.statvfs(data_dir).f_flag & os.ST_RDONLY:
        return  # nobody may write it: the ingest says so in its own words, and keeps the old index
    if not os.access(data_dir, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        raise NotWritable(f"cannot write the index at {data_dir}, which belongs to {owner}: {how}")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"user {uid}"



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
            said = _holder(fd, "is already running")
            os.close(fd)
            raise IngestBusy(said) from None
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


def running(path: Path) -> str | None:
    """The ingest holding the lock at `path`, said in a sentence; None when none runs."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(fd, "is running")
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder(fd: int, what: str) -> str:
    """The ingest holding the lock open at `fd`, in a sentence: who started it, when, its pid."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        holder = {}
    return (f"an ingest {what} (started by {holder.get('by', 'someone')} at "
            f"{holder.get('started', 'an unknown time')}, pid {holder.get('pid', '?')})")
