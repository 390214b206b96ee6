"""Watching a notes folder: edits that arrive in pieces end in exactly one reingest, with the right
result; hidden and temporary files are never a change. Real files, real inotify, real ingest."""
from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from watchfiles import Change

from oracle.index.ingest import ingest
from oracle.types import IngestReport
from oracle.watch import NotesFilter, WatchError, watch_notes

QUIET = 0.5  # seconds; every piece of an edit below comes sooner than this after the one before
STEP = 0.2


def labels(settings) -> list[str]:
    with sqlite3.connect(settings.sqlite_path) as db:
        return sorted({r[0] for r in db.execute("SELECT label FROM chunks WHERE visibility = 'public'")})


def text_of(settings, label: str) -> str:
    with sqlite3.connect(settings.sqlite_path) as db:
        return " ".join(r[0] for r in db.execute("SELECT text FROM chunks WHERE label = ?", (label,)))


class Watching:
    """watch_notes in a task, its reports collected."""

    def __init__(self, index) -> None:
        self.index = index
        self.reports: list[IngestReport] = []
        self.errors: list[Exception] = []
        self.started = asyncio.Event()
        self.arrived = asyncio.Event()

    async def on_change(self, report: IngestReport) -> None:
        self.reports.append(report)
        self.arrived.set()

    async def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        self.arrived.set()

    async def __aenter__(self) -> Watching:
        self.task = asyncio.create_task(
            watch_notes(self.index, quiet=QUIET, on_change=self.on_change, on_error=self.on_error, started=self.started)
        )
        await asyncio.wait_for(self.started.wait(), 10)
        return self

    async def __aexit__(self, *exc) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def settled(self) -> None:
        """The first report, then long enough (several quiet periods) for any further one to show."""
        await asyncio.wait_for(self.arrived.wait(), 120)
        await asyncio.sleep(4 * QUIET)


async def test_an_edit_in_pieces_ends_in_exactly_one_reingest(quick_mini_campaign, make_settings, open_quick_index):
    mini_notes = quick_mini_campaign.notes  # ingested once for the session, copied here
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    assert "World: GODS" in labels(settings)
    async with Watching(index) as watching:
        (mini_notes / "sessions" / "Session 5.md").write_text("The party reached the Glass Orchard at dusk.\n")
        await asyncio.sleep(STEP)
        (mini_notes / "world" / "GODS.md").unlink()
        await asyncio.sleep(STEP)
        (mini_notes / ".obsidian" / "workspace.json").write_text("{}")  # hidden: never a change
        (mini_notes / "sessions" / ".Session 6.md.swp").write_text("x")
        # A sync writing one file in three pieces, each sooner than the quiet period.
        slow = mini_notes / "sessions" / "Session 6.md"
        pieces = ["Mirela opened the sealed letter on the ferry. ", "It named the bell-ringer of Greyhaven. ",
                  "Teodric burned it before the harbour watch could read it.\n"]
        for piece in pieces:
            with slow.open("a", encoding="utf-8") as f:
                f.write(piece)
            await asyncio.sleep(STEP)
        await watching.settled()
    assert [] == watching.errors
    assert 1 == len(watching.reports), [(r.added, r.changed, r.removed) for r in watching.reports]
    report = watching.reports[0]
    assert (["sessions/Session 5.md", "sessions/Session 6.md"], [], ["world/GODS.md"]) == (
        report.added, report.changed, report.removed)
    assert "World: GODS" not in labels(settings)
    assert {"Session 5", "Session 6"} <= set(labels(settings))
    assert "".join(pieces).strip() == text_of(settings, "Session 6").strip()


async def test_hidden_and_temporary_files_are_never_a_change(quick_mini_campaign, make_settings, open_quick_index):
    mini_notes = quick_mini_campaign.notes  # ingested once for the session, copied here
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    async with Watching(index) as watching:
        (mini_notes / ".obsidian" / "workspace.json").write_text("{}")
        (mini_notes / ".git").mkdir()
        (mini_notes / ".git" / "HEAD.md").write_text("ref")
        (mini_notes / "sessions" / "Session 4.md~").write_text("backup")
        (mini_notes / "sessions" / "#Session 4.md#").write_text("autosave")
        (mini_notes / "map.png").write_bytes(b"\x89PNG")
        await asyncio.sleep(4 * QUIET)
        assert [] == watching.reports
        # ...while a real edit is one, after the quiet period.
        with (mini_notes / "sessions" / "Session 4.md").open("a") as f:
            f.write("Old Wick blew out the last candle.\n")
        await watching.settled()
    assert [(["sessions/Session 4.md"])] == [r.changed for r in watching.reports]


async def test_a_change_during_a_reingest_brings_one_more_after_it(mini_notes, make_settings, open_quick_index):
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    async with Watching(index) as watching:
        (mini_notes / "sessions" / "Session 5.md").write_text("The Glass Orchard.\n")
        await asyncio.wait_for(watching.arrived.wait(), 120)  # the first ingest is a full one: long
        watching.arrived.clear()
        (mini_notes / "sessions" / "Session 7.md").write_text("The Salt Gate.\n")
        await watching.settled()
    assert 2 == len(watching.reports)
    assert ["sessions/Session 7.md"] == watching.reports[1].added
    assert "Session 7" in labels(settings)


@pytest.mark.parametrize(
    "path, wanted",
    [
        ("sessions/Session 5.md", True),
        ("compendium.yaml", True),
        ("sessions", True),  # a folder renamed or deleted
        (".obsidian/workspace.md", False),
        ("sessions/.sync-conflict.md", False),
        ("sessions/.syncthing.Session 5.md.tmp", False),
        ("sessions/Session 5.md~", False),
        ("sessions/Session 5.md.swp", False),
        ("sessions/4913", False),
        ("sessions/#Session 5.md#", False),
        ("sessions/Session 5.md.part", False),
        ("map.png", False),
        ("var/oracle.sqlite3", False),
        ("var/chroma", False),
    ],
)
def test_which_paths_are_changes(tmp_path, path, wanted):
    keep = NotesFilter(tmp_path, ignore=(tmp_path / "var",))
    assert wanted == keep(Change.modified, str(tmp_path / path))
    assert not keep(Change.added, str(tmp_path.parent / "elsewhere.md"))


async def test_a_missing_folder_is_a_clear_error(make_settings, open_quick_index, tmp_path):
    index = open_quick_index(make_settings(tmp_path / "nowhere"))
    with pytest.raises(WatchError, match="cannot watch the notes folder .*nowhere: it does not exist"):
        await watch_notes(index, quiet=QUIET)


def test_filter_folder_is_resolved(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert NotesFilter(link)(Change.added, str(Path(tmp_path) / "a.md"))


async def test_every_campaign_of_a_library_is_watched_and_named(tmp_path, make_settings, quick_embedder):
    from oracle.campaigns import Campaign, Campaigns
    from oracle.index.library import Library
    from oracle.watch import watch_campaigns
    from tests.conftest import write_notes

    notes = {name: write_notes(tmp_path / name, {"sessions/Session 1.md": f"The {name} table met.\n"})
             for name in ("ember", "harbour")}
    campaigns = Campaigns(tuple(Campaign(n, p, tmp_path / "var" / n) for n, p in notes.items()), source=tmp_path / "c.toml")
    library = await Library.open(make_settings(tmp_path), campaigns, embedder=quick_embedder, worker=False)
    seen: list[tuple[str, list[str]]] = []
    arrived = asyncio.Event()

    async def on_change(campaign, report) -> None:
        seen.append((campaign.name, report.added))
        if len(seen) == 3:
            arrived.set()

    task = asyncio.create_task(watch_campaigns(library, quiet=QUIET, on_change=on_change, catch_up=True))
    try:
        for _ in range(600):  # both catch-up ingests done: the folders are watched
            if len(seen) == 2:
                break
            await asyncio.sleep(0.1)
        (notes["harbour"] / "sessions" / "Session 2.md").write_text("The Gull set sail.\n")
        await asyncio.wait_for(arrived.wait(), 120)
        await asyncio.sleep(4 * QUIET)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await library.close()
    assert [("ember", ["sessions/Session 1.md"]), ("harbour", ["sessions/Session 1.md"])] == sorted(seen[:2])
    assert [("harbour", ["sessions/Session 2.md"])] == seen[2:]


def test_a_folder_named_with_a_dot_is_a_change(tmp_path):
    keep = NotesFilter(tmp_path)
    (tmp_path / "2024.05").mkdir()
    assert keep(Change.added, str(tmp_path / "2024.05"))
    assert keep(Change.deleted, str(tmp_path / "Act 2. The Fall"))  # gone: a folder or a file, it counts
    (tmp_path / "map.png").write_bytes(b"\x89PNG")
    assert not keep(Change.added, str(tmp_path / "map.png"))
    assert not keep(Change.deleted, str(tmp_path / "Session 4.md~"))


async def test_a_folder_with_a_dot_renamed_then_moved_out(mini_notes, make_settings, open_quick_index, tmp_path):
    arc = mini_notes / "Act 2. The Fall"
    arc.mkdir()
    (arc / "Bridge.md").write_text("# The bridge at Corvel\nThe bridge at Corvel fell in the night.\n")
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await ingest(index)
    async with Watching(index) as watching:
        arc.rename(mini_notes / "Act 2.5 The Fall")
        await watching.settled()
        assert [(["Act 2.5 The Fall/Bridge.md"], ["Act 2. The Fall/Bridge.md"])] == [
            (r.added, r.removed) for r in watching.reports]
        watching.arrived.clear()
        (mini_notes / "Act 2.5 The Fall").rename(tmp_path / "elsewhere.1")
        await watching.settled()
    assert [] == watching.errors
    assert 2 == len(watching.reports)
    assert ([], ["Act 2.5 The Fall/Bridge.md"]) == (watching.reports[1].added, watching.reports[1].removed)
    with sqlite3.connect(settings.sqlite_path) as db:
        assert 0 == db.execute("SELECT count(*) FROM chunks WHERE text LIKE '%Corvel%'").fetchone()[0]


async def test_a_watch_survives_its_folder_being_made_again_and_one_campaign_failing(
    tmp_path, make_settings, quick_embedder, monkeypatch, caplog
):
    """Supervised per campaign: a folder deleted and made again (as a sync tool does) is watched
    again and caught up; a campaign whose folder is missing, or whose watch fails with any error, is
    logged, shown, retried, and never stops another's."""
    import shutil

    import oracle.watch as watch_mod
    from oracle.campaigns import Campaign, Campaigns
    from oracle.index.library import Library
    from oracle.watch import watch_campaigns
    from tests.conftest import write_notes

    monkeypatch.setattr(watch_mod, "FOLDER_CHECK", 0.2)
    monkeypatch.setattr(watch_mod, "FIRST_PAUSE", 0.3)
    ember = write_notes(tmp_path / "ember", {"sessions/Session 1.md": "The ember table met.\n"})
    harbour = tmp_path / "harbour"  # missing at the start
    campaigns = Campaigns((Campaign("ember", ember, tmp_path / "var" / "ember"),
                           Campaign("harbour", harbour, tmp_path / "var" / "harbour")), source=tmp_path / "c.toml")
    library = await Library.open(make_settings(tmp_path), campaigns, embedder=quick_embedder, worker=False)
    seen: list[tuple[str, list[str]]] = []
    states: dict = {}
    real_ingest = watch_mod.ingest
    failures = []

    async def flaky_ingest(index, **kwargs):
        if index.settings.notes_dir == harbour and not failures:
            failures.append(1)
            raise RuntimeError("a bug nobody foresaw")
        return await real_ingest(index, **kwargs)

    monkeypatch.setattr(watch_mod, "ingest", flaky_ingest)

    async def on_change(campaign, report) -> None:
        seen.append((campaign.name, report.added))

    async def until(condition, what: str) -> None:
        for _ in range(600):
            if condition():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"never: {what} (seen {seen}, states {states})")

    task = asyncio.create_task(watch_campaigns(library, quiet=QUIET, on_change=on_change, catch_up=True, states=states))
    try:
        await until(lambda: ("ember", ["sessions/Session 1.md"]) in seen, "ember's catch-up")
        await until(lambda: "does not exist" in states["harbour"].stopped, "harbour's missing folder shown")
        assert states["ember"].since and not states["ember"].stopped

        write_notes(harbour, {"sessions/Session 1.md": "The Gull set sail.\n"})  # the folder appears
        await until(lambda: ("harbour", ["sessions/Session 1.md"]) in seen, "harbour caught up, after its failure")
        assert failures and not states["harbour"].stopped

        shutil.rmtree(ember)  # a sync tool replaces the whole folder
        write_notes(ember, {"sessions/Session 1.md": "The ember table met.\n", "sessions/Session 2.md": "Ash fell.\n"})
        await until(lambda: ("ember", ["sessions/Session 2.md"]) in seen, "the new ember folder caught up")
        (ember / "sessions" / "Session 3.md").write_text("The embers cooled.\n")
        await until(lambda: ("ember", ["sessions/Session 3.md"]) in seen, "a change in the new folder")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await library.close()
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("watching the notes of campaign harbour stopped (a bug nobody foresaw)" in m for m in logged)
    assert any("watching the notes of campaign ember stopped" in m and "removed or replaced" in m for m in logged)
