"""Notes that index themselves: watch a campaign's notes folder, reingest once it has been quiet.

Notes reach the bot's machine by a sync tool (Obsidian Sync, Syncthing, git) or an editor, a file
at a time and often in pieces. So a change only arms a timer: the reingest starts once the folder
has had no change for `quiet` seconds (ORACLE_WATCH_QUIET, 60 by default), and a change during the
reingest arms it again, for one more reingest after it. Hidden folders and files (`.obsidian/`,
`.git/`, Syncthing's `.stfolder` and temporary `.syncthing.*.tmp`) and editors' temporary files
are never a change; neither is the index itself when its folder sits inside the notes.

    task = asyncio.create_task(watch_notes(library.index("tuesday"), on_change=announce))
    ...
    task.cancel()   # stops watching; an ingest under way is cancelled like any other

    # or every campaign of a Library, each callback told which campaign:
    task = asyncio.create_task(watch_campaigns(library, on_change=announce_in_campaign))

The ingest is the incremental one `oracle ingest` runs, under the same lock: while another ingest
of the campaign runs (`/oracle reingest`, a timer), the watcher waits for quiet again and retries.
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from watchfiles import Change, awatch

from .campaigns import Campaign
from .errors import OracleError
from .index.index import Index
from .index.ingest import ingest
from .index.library import Library
from .index.lock import IngestBusy
from .index.store import now
from .types import IngestReport

_T = TypeVar("_T")

log = logging.getLogger(__name__)

ReportFn = Callable[[IngestReport], Awaitable[None]]
ErrorFn = Callable[[OracleError], Awaitable[None]]

NOTE_SUFFIXES = {".md", ".yaml", ".yml"}  # notes, and the Compendium file
FOLDER_CHECK = 2.0  # seconds between checks that the notes folder is still the one watched
FIRST_PAUSE, LAST_PAUSE = 2.0, 300.0  # seconds before watching again after the watch stopped
# Editors' and sync tools' temporary files: vim (.swp, 4913), emacs (#x#), JetBrains, downloads, partials.
TEMPORARY = re.compile(r"(~|\.sw[a-p]|\.tmp|\.temp|\.part|\.crdownload|\.bak|___jb_\w+___)$|^#.*#$|^4913$", re.I)


class WatchError(OracleError, RuntimeError):
    """The notes folder cannot be watched."""


class NotesFilter:
    """Which changed paths can change the index (watchfiles' `watch_filter`)."""

    def __init__(self, root: Path, ignore: tuple[Path, ...] = ()) -> None:
        # As given and as resolved: the watcher reports paths under the folder it was given.
        self.roots = tuple(dict.fromkeys((root.absolute(), root.resolve())))
        self.ignore = tuple({q for p in ignore for q in (p.absolute(), p.resolve())})

    def __call__(self, change: Change, path: str) -> bool:
        p = Path(path)
        rel = next((p.relative_to(r) for r in self.roots if p.is_relative_to(r)), None)
        if rel is None:
            return False
        if any(part.startswith(".") for part in rel.parts) or any(p.is_relative_to(i) for i in self.ignore):
            return False
        if TEMPORARY.search(p.name):
            return False
        if p.suffix.lower() in NOTE_SUFFIXES or not p.suffix:
            return True
        # A folder's name may hold a dot too ("Act 2. The Fall", "2024.05"). One added is a folder
        # now; one deleted (or renamed: its old name) cannot be told from a file any more, so it counts:
        # a reingest that finds nothing changed costs a scan and tells no one.
        return change == Change.deleted or p.is_dir()


async def watch_notes(
    index: Index,
    *,
    quiet: float | None = None,
    on_change: ReportFn | None = None,
    on_error: ErrorFn | None = None,
    catch_up: bool = False,
    started: asyncio.Event | None = None,
    by: str = "watching the notes",
) -> None:
    """Reingest `index`'s campaign each time its notes folder has changed and then stayed quiet for
    `quiet` seconds (default ORACLE_WATCH_QUIET). Runs until cancelled.

    `on_change(report)` gets each finished ingest's report (an announcement can say what is new);
    `on_error(error)` each failed one (the watcher goes on). `catch_up`: ingest once at the start,
    for what changed while nothing watched. `started` is set once the folder is watched."""
    settings = index.settings
    quiet = settings.watch_quiet if quiet is None else quiet
    root = settings.notes_dir.absolute()
    if not root.is_dir():
        raise WatchError(f"cannot watch the notes folder {root}: it does not exist")
    loop = asyncio.get_running_loop()
    last = _LastChange(loop.time())
    notes_filter = NotesFilter(root, ignore=(settings.data_dir,))
    identity = _identity(root)
    listener = asyncio.create_task(_first_to_end(_listen(root, notes_filter, last), _guard(root, identity)),
                                   name=f"watch {root}")
    await asyncio.sleep(0)  # the listener's first step sets up the watch
    log.info("watching %s (reingest after %g s of quiet)", root, quiet)
    if started is not None:
        started.set()
    if catch_up:
        last.mark(loop.time() - quiet)
    try:
        while True:
            await _until_quiet(last, quiet, listener)
            last.event.clear()
            await _reingest(index, root, last, by=by, on_change=on_change, on_error=on_error)
    finally:
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)


@dataclass
class _LastChange:
    """When the notes last changed, and an event set while a change waits for its reingest."""

    at: float
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def mark(self, at: float) -> None:
        """A change at `at` (the loop's time): a reingest once the folder has been quiet after it."""
        self.at = at
        self.event.set()


async def _listen(root: Path, notes_filter: NotesFilter, last: _LastChange) -> None:
    """Mark each change under `root`; raise once the folder itself is deleted."""
    loop = asyncio.get_running_loop()
    async for changes in awatch(root, watch_filter=notes_filter, step=50, debounce=1600):
        log.debug("notes changed in %s: %s", root, sorted(p for _, p in changes)[:10])
        if any(change == Change.deleted and Path(p) in notes_filter.roots for change, p in changes):
            # Made again at once, the folder may even get the old one's inode: the guard cannot tell.
            raise WatchError(f"the notes folder {root} was removed or replaced")
        last.mark(loop.time())


async def _guard(root: Path, identity: tuple[int, int] | None) -> None:
    """Check every FOLDER_CHECK seconds that `root` is still the folder watched; raise once it is not."""
    # A folder deleted and made again (a sync tool does it) is a new folder the watch never sees.
    while _identity(root) == identity:
        await asyncio.sleep(FOLDER_CHECK)
    raise WatchError(f"the notes folder {root} was removed or replaced")


async def _until_quiet(last: _LastChange, quiet: float, listener: asyncio.Task[None]) -> None:
    """Wait for a change, then until the folder has had none for `quiet` seconds."""
    loop = asyncio.get_running_loop()
    await _until(last.event.wait(), listener)
    while (remaining := last.at + quiet - loop.time()) > 0:
        await _until(asyncio.sleep(remaining), listener)


async def _reingest(index: Index, root: Path, last: _LastChange, *, by: str, on_change: ReportFn | None,
                    on_error: ErrorFn | None) -> None:
    """Reingest after a change and tell how it went; while another ingest runs, mark a change to try again."""
    try:
        report = await ingest(index, by=by)
    except IngestBusy as exc:  # another ingest of this campaign: try again once it is quiet
        log.info("%s; reingesting %s after it", exc, root)
        last.mark(asyncio.get_running_loop().time())
        return
    except OracleError as exc:  # told once: to `on_error` when there is one, else to the log
        log.log(logging.INFO if on_error else logging.WARNING, "reingesting %s after a change failed: %s", root, exc)
        await _tell(on_error, exc)
        return
    log.info("reingested %s: %d added, %d changed, %d removed", root, len(report.added),
             len(report.changed), len(report.removed))
    await _tell(on_change, report)


CampaignReportFn = Callable[[Campaign, IngestReport], Awaitable[None]]
CampaignErrorFn = Callable[[Campaign, OracleError], Awaitable[None]]


@dataclass
class Watching:
    """How one campaign's watch is doing, for the game master's status."""

    since: str = ""  # when it last started watching (UTC, ISO)
    stopped: str = ""  # why it stopped, while it waits to watch again; "" while it watches
    again_in: float = 0.0


async def watch_campaigns(
    library: Library,
    *,
    quiet: float | None = None,
    on_change: CampaignReportFn | None = None,
    on_error: CampaignErrorFn | None = None,
    catch_up: bool = False,
    states: dict[str, Watching] | None = None,
    by: str = "watching the notes",
) -> None:
    """`watch_notes` for every campaign of `library` at once, each callback told which campaign.
    Runs until cancelled. Each
    campaign's watch is supervised on its own: one that stops (its folder removed or replaced, any
    error) is logged, shown in `states`, and started again after a pause that doubles up to five
    minutes, catching up on what changed meanwhile; the others go on."""

    def bind(campaign: Campaign, callback):
        if callback is None:
            return None

        async def call(value) -> None:
            await callback(campaign, value)

        return call

    tasks = [
        asyncio.create_task(
            _supervised(library.index(c), c.name, quiet=quiet, on_change=bind(c, on_change),
                        on_error=bind(c, on_error), catch_up=catch_up, by=by,
                        state=(states if states is not None else {}).setdefault(c.name, Watching())),
            name=f"watch {c.name}",
        )
        for c in library
    ]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _supervised(index: Index, name: str, *, quiet: float | None, on_change: ReportFn | None,
                      on_error: ErrorFn | None, catch_up: bool, by: str, state: Watching) -> None:
    loop = asyncio.get_running_loop()
    pause = FIRST_PAUSE
    while True:
        started = asyncio.Event()
        began = loop.time()
        watcher = asyncio.create_task(watch_notes(index, quiet=quiet, on_change=on_change, on_error=on_error,
                                                  catch_up=catch_up, started=started, by=by))
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({watcher, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if started.is_set():
            state.since, state.stopped, state.again_in = now(), "", 0.0
        try:
            await watcher
        except Exception as exc:  # anything: a watch that ends must say so and come back
            reason = str(exc) or type(exc).__name__
            if loop.time() - began > LAST_PAUSE:
                pause = FIRST_PAUSE  # it had been watching a while: not the same trouble again
            log.error("watching the notes of campaign %s stopped (%s): watching again in %.0f s", name, reason, pause,
                      exc_info=not isinstance(exc, OracleError))
            state.stopped, state.again_in = f"{reason} (at {now()})", pause
        await asyncio.sleep(pause)
        pause = min(pause * 2, LAST_PAUSE)
        catch_up = True  # what changed while nothing watched


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        stat = folder.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


async def _first_to_end(*coroutines: Awaitable[None]) -> None:
    """Run them together until one ends (its error raised); the others are cancelled."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _until(awaitable: Awaitable[object], listener: asyncio.Task[None]) -> None:
    """Wait for `awaitable`, unless the listener stops first (its error is raised: the watch ended)."""
    waiter = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait({waiter, listener}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiter.done():
            waiter.cancel()
    if listener.done():
        listener.result()
        raise WatchError("watching the notes folder stopped")


async def _tell(callback: Callable[[_T], Awaitable[None]] | None, value: _T) -> None:
    """A callback that fails (an announcement that cannot be sent) must not stop the watching."""
    if callback is None:
        return
    try:
        await callback(value)
    except Exception:
        log.exception("the watcher's callback failed")
