"""Ingest end to end with real SQLite, real Chroma and the real bundled model."""
from __future__ import annotations

import sqlite3

import pytest

from oracle.index.annotate import PROMPT_VERSION
from oracle.index.ingest import ingest
from oracle.index.lock import IngestBusy, IngestLock
from oracle.index.store import StoreError
from oracle.types import GM, PUBLIC, EmbeddingWindow


def rows(settings, sql, params=()):
    with sqlite3.connect(settings.sqlite_path) as db:
        return db.execute(sql, params).fetchall()


def labels(settings, visibility=PUBLIC):
    return sorted({r[0] for r in rows(settings, "SELECT label FROM chunks WHERE visibility = ?", (visibility,))})


async def chroma_state(index):
    vectors = await index.vectors()
    ids = await vectors.all_ids()
    return ids


async def test_ingest_builds_every_store(mini_notes, make_settings, open_quick_index):
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    report = await ingest(index)

    assert (sorted(report.added), report.changed, report.removed) == (
        ["gm/Plans.md", "npcs/Brother_Aldous.md", "sessions/Session 4.md", "sessions/campaign-log.md",
         "sheets/Mirela_Vane.md", "world/GODS.md", "world/The_True_Heir.md"], [], [])
    assert [] == report.skipped
    # One label per source: the log (a hub in the sessions folder) by its name, each of its sessions as
    # its own section; a session note by its file name; the session numbers beside the label.
    assert ["Session 4", "Sheet: Brother_Aldous", "Sheet: Mirela_Vane", "World: GODS", "campaign-log",
            "campaign-log › Session 1", "campaign-log › Session 2", "campaign-log › Session 3"] == labels(settings)
    assert ["Note: Plans", "World: The_True_Heir", "campaign-log › Session 1", "campaign-log › Session 3"] == labels(
        settings, GM)
    assert [("Session 4", "[4]"), ("campaign-log › Session 1", "[1]"), ("campaign-log › Session 2", "[2]"),
            ("campaign-log › Session 3", "[3]")] == rows(
        settings, "SELECT DISTINCT label, sessions FROM chunks WHERE sessions != '[]' ORDER BY label")
    assert {"note", "sheet", "world"} == {r[0] for r in rows(settings, "SELECT kind FROM chunks WHERE sessions = '[]'")}
    # No secret text in any public chunk; every secret in a GM chunk.
    public_text = " ".join(r[0] for r in rows(settings, "SELECT text FROM chunks WHERE visibility = 'public'"))
    gm_text = " ".join(r[0] for r in rows(settings, "SELECT text FROM chunks WHERE visibility = 'gm'"))
    for marker in ["SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR"]:
        assert marker not in public_text and marker in gm_text
    # Line ranges point at the file.
    session1 = "SELECT start_line, end_line FROM chunks WHERE label = 'campaign-log › Session 1' AND visibility = ?"
    assert [(6, 6)] == rows(settings, session1, (GM,))
    assert [(3, 5)] == rows(settings, session1, (PUBLIC,))
    # Every chunk has windows in SQLite and in Chroma, with the chunk's visibility.
    window_ids = {r[0] for r in rows(settings, "SELECT id FROM windows")}
    assert report.chunks == len(rows(settings, "SELECT DISTINCT chunk_id FROM windows"))
    assert window_ids == await chroma_state(index)
    assert report.windows_embedded == len(window_ids)
    vectors = await index.vectors()
    _, chunk_ids, _ = await vectors.vectors(visibility=GM)
    assert set(chunk_ids) == {r[0] for r in rows(settings, "SELECT id FROM chunks WHERE visibility = 'gm'")}
    # Ollama is down: no annotations, with the reason.
    assert (0, report.chunks) == (report.annotations_done, report.annotations_missing)
    assert "not reachable" in report.annotation_note


async def test_windows_fit_the_model(mini_notes, make_settings, open_index, embedder):
    long_session = "## Session 9 — The Long Night\n" + " ".join(
        f"Mirela counted star number {i} above the Saltmarsh." for i in range(400))
    (mini_notes / "sessions" / "Session 9.md").write_text(long_session)
    settings = make_settings(mini_notes, session_max_words=5000)
    index = open_index(settings)
    await ingest(index)
    store = await index.store()
    chunk = (await store.chunks_by_ids([r[0] for r in rows(settings, "SELECT id FROM chunks WHERE label = 'Session 9'")]))[0]
    windows = embedder.windows([chunk])
    assert len(windows) > 10
    assert max(embedder.token_count(w.text) for w in windows) <= embedder.max_tokens
    # Together the windows cover every word of the chunk.
    covered = set(" ".join(w.text.split("\n", 1)[1] for w in windows).split())
    assert set(chunk.text.split()) <= covered
    # A search reads the chunk off the window id, never from Chroma's metadata.
    assert all(EmbeddingWindow.chunk_of(w.id) == chunk.id == w.chunk_id for w in windows)
    assert EmbeddingWindow.chunk_of(EmbeddingWindow.make_id("notes/a:b.md#2", 7)) == "notes/a:b.md#2"


async def test_compendium_from_frontmatter_and_proper_nouns(mini_notes, make_settings, open_quick_index):
    settings = make_settings(mini_notes)
    await ingest(open_quick_index(settings))
    aliases = rows(settings, "SELECT e.name, a.alias, a.visibility FROM aliases a JOIN entities e ON e.id = a.entity_id")
    assert ("Brother Aldous", "Old Wick", PUBLIC) in aliases
    assert ("Mirela Vane", "Mira", PUBLIC) in aliases
    assert ("Mirela Vane", "Mirela", PUBLIC) in aliases  # a first name found in the text
    assert ("The True Heir", "the Lost Prince", GM) in aliases
    assert "Dunstan Vale" in {a[0] for a in aliases}  # a recurring proper noun, no LLM needed
    # Old Wick is named in Session 4 only as a nickname: the mention is there, and public.
    mentions = rows(settings, "SELECT c.label, m.visibility FROM mentions m JOIN entities e ON e.id = m.entity_id"
                              " JOIN chunks c ON c.id = m.chunk_id WHERE e.name = 'Brother Aldous' ORDER BY c.label")
    assert ("Session 4", PUBLIC) in mentions and ("campaign-log › Session 1", PUBLIC) in mentions


async def test_reingest_unchanged_does_nothing(mini_notes, make_settings, open_quick_index, fake_ollama):
    settings = make_settings(mini_notes, ollama_host=fake_ollama.url)
    index = open_quick_index(settings)
    first = await ingest(index)
    chats = len(fake_ollama.chat_requests())
    assert first.chunks == chats == first.annotations_done
    before = rows(settings, "SELECT id FROM chunks ORDER BY id")

    second = await ingest(index)
    assert (0, 0, len(fake_ollama.chat_requests())) == (second.windows_embedded, second.annotations_missing, chats)
    assert (7, [], [], []) == (second.unchanged, second.added, second.changed, second.removed)
    assert before == rows(settings, "SELECT id FROM chunks ORDER BY id")


async def test_the_served_folder_and_stamp_change_with_what_an_ingest_commits_and_only_then(
    mini_notes, make_settings, open_quick_index
):
    """Every process opens the folder the index names when it changes (docs/processes.md): a reingest
    that changed nothing keeps it and the stamp, so the bot opens nothing after a quiet timer run."""
    from oracle.index import folders
    from oracle.oracle import Oracle

    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await ingest(index)
    store = await index.store()
    first, first_folder = await store.generation(), await store.meta_value(folders.SERVED)
    await ingest(index)
    assert (first, first_folder) == (await store.generation(), await store.meta_value(folders.SERVED))
    session = mini_notes / "sessions" / "Session 4.md"
    session.write_text(session.read_text() + "\nOld Wick blew out every candle but one.\n")
    await ingest(index)
    second, served = await store.generation(), await store.meta_value(folders.SERVED)
    assert second != first and served != first_folder
    assert first_folder == await store.meta_value(folders.BEFORE)
    # This process's own ingest opened the folder it served: the next question opens nothing.
    vectors = await index.vectors()
    await Oracle(index).search("Who blew out the candles?")
    assert vectors is await index.vectors()
    # Another process's commit naming another folder: opened at the next question, once.
    with sqlite3.connect(settings.sqlite_path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (first_folder, folders.SERVED))
    await Oracle(index).search("Who blew out the candles?")
    reopened = await index.vectors()
    assert reopened is not vectors and reopened.in_thread.path == settings.chroma_path / first_folder
    await Oracle(index).search("Who blew out the candles?")
    assert reopened is await index.vectors()


async def test_editing_one_session_reembeds_only_it(mini_notes, make_settings, open_quick_index, fake_ollama):
    settings = make_settings(mini_notes, ollama_host=fake_ollama.url)
    index = open_quick_index(settings)
    await ingest(index)
    before = dict(rows(settings, "SELECT id, label FROM chunks WHERE visibility = 'public'"))
    windows_before = {r[0] for r in rows(settings, "SELECT id FROM windows")}
    chats_before = len(fake_ollama.chat_requests())

    log = mini_notes / "sessions" / "campaign-log.md"
    log.write_text(log.read_text().replace("ambushed them at the ford.", "ambushed them at the ford at dawn."))
    report = await ingest(index)

    after = dict(rows(settings, "SELECT id, label FROM chunks WHERE visibility = 'public'"))
    assert ["campaign-log › Session 2"] == sorted(before[i] for i in set(before) - set(after))
    assert ["campaign-log › Session 2"] == sorted(after[i] for i in set(after) - set(before))
    assert ["sessions/campaign-log.md"] == report.changed
    assert 1 == report.windows_embedded
    assert 1 == len(fake_ollama.chat_requests()) - chats_before  # only the edited chunk is annotated
    windows_after = {r[0] for r in rows(settings, "SELECT id FROM windows")}
    assert 1 == len(windows_before - windows_after) == len(windows_after - windows_before)
    assert windows_after == await chroma_state(index)


async def test_deleting_a_file_leaves_nothing_behind(mini_notes, make_settings, open_quick_index):
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await ingest(index)
    gone = {r[0] for r in rows(settings, "SELECT id FROM chunks WHERE path = 'sessions/Session 4.md'")}
    assert gone
    (mini_notes / "sessions" / "Session 4.md").unlink()
    report = await ingest(index)
    assert ["sessions/Session 4.md"] == report.removed
    marks = ",".join("?" * len(gone))
    assert [] == rows(settings, f"SELECT id FROM chunks WHERE id IN ({marks})", tuple(gone))
    assert [] == rows(settings, f"SELECT id FROM windows WHERE chunk_id IN ({marks})", tuple(gone))
    assert [] == rows(settings, f"SELECT chunk_id FROM mentions WHERE chunk_id IN ({marks})", tuple(gone))
    assert [] == rows(settings, "SELECT path FROM files WHERE path = 'sessions/Session 4.md'")
    assert {r[0] for r in rows(settings, "SELECT id FROM windows")} == await chroma_state(index)


class Crash(Exception):
    pass


@pytest.mark.parametrize("stage, done", [("scan", 0), ("embed", 1), ("commit", 0), ("commit", 1)])
async def test_an_interrupted_ingest_leaves_a_whole_index_and_the_next_run_completes(
    stage, done, mini_notes, make_settings, open_quick_index
):
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await ingest(index)
    snapshot = rows(settings, "SELECT id, text FROM chunks ORDER BY id")
    mentions = rows(settings, "SELECT * FROM mentions ORDER BY entity_id, chunk_id")

    (mini_notes / "sessions" / "Session 5.md").write_text("The party found the drowned bell under the Saltmarsh.")
    log = mini_notes / "sessions" / "campaign-log.md"
    log.write_text(log.read_text().replace("Weeping Bridge", "Weeping Stone Bridge"))

    def crash_at(event):
        if event.stage == stage and event.done >= done:
            raise Crash(stage)

    with pytest.raises(Crash):
        await ingest(index, progress=crash_at)
    if (stage, done) == ("commit", 1):
        # Killed after the commit, before orphan windows were deleted: the new index is served.
        assert "Session 5" in labels(settings)
    else:
        assert snapshot == rows(settings, "SELECT id, text FROM chunks ORDER BY id")
        assert mentions == rows(settings, "SELECT * FROM mentions ORDER BY entity_id, chunk_id")

    report = await ingest(index)
    assert "Session 5" in labels(settings)
    expected_added = [] if (stage, done) == ("commit", 1) else ["sessions/Session 5.md"]
    assert expected_added == report.added
    if stage != "scan":  # the windows stored before the kill are reused, not embedded again
        assert 0 == report.windows_embedded
    window_ids = {r[0] for r in rows(settings, "SELECT id FROM windows")}
    chunk_ids = {r[0] for r in rows(settings, "SELECT id FROM chunks")}
    assert window_ids == await chroma_state(index)  # no orphan windows
    assert {r[0] for r in rows(settings, "SELECT chunk_id FROM windows")} == chunk_ids
    assert set() == {r[0] for r in rows(settings, "SELECT chunk_id FROM mentions")} - chunk_ids


async def test_a_second_ingest_is_refused(mini_notes, make_settings):
    settings = make_settings(mini_notes)
    with IngestLock(settings.lock_path, by="gm#1234"):
        with pytest.raises(IngestBusy) as err:
            with IngestLock(settings.lock_path, by="someone else"):
                pass
    assert str(err.value).startswith("an ingest is already running (started by gm#1234 at ")
    with IngestLock(settings.lock_path, by="later"):  # released: free again
        pass


async def test_annotations_are_cached_and_filled_in_later(mini_notes, make_settings, open_quick_index, fake_ollama):
    down = make_settings(mini_notes)
    first = await ingest(open_quick_index(down))
    assert 0 == first.annotations_done

    fake_ollama.responder = lambda request: {
        "summary": "Mirela meets Brother Aldous in the Lantern Market.",
        "entities": [{"name": "Lantern Market", "aliases": [], "kind": "place"},
                     {"name": "Invented Dragon", "aliases": [], "kind": "creature"}],
    }
    up = make_settings(mini_notes, ollama_host=fake_ollama.url)
    second = await ingest(open_quick_index(up))
    assert (second.chunks, 0) == (second.annotations_done, second.annotations_missing)
    assert 0 == second.windows_embedded
    cached = rows(up, "SELECT count(*) FROM annotations WHERE model = ? AND prompt_version = ?", (up.model, PROMPT_VERSION))
    assert [(second.chunks,)] == cached
    # Every request is an annotation of a chunk's public or GM text, with the JSON schema.
    request = fake_ollama.chat_requests()[0]
    assert "summary" in request["format"]["properties"]
    names = {r[0] for r in rows(up, "SELECT name FROM entities")}
    assert "Lantern Market" in names  # grounded in the text
    assert "Invented Dragon" not in names  # not in any chunk: dropped


async def test_chroma_server_by_url(mini_notes, make_settings, open_quick_index, tmp_path):
    from testing.chroma_server import ChromaServer

    with ChromaServer(tmp_path / "server") as chroma:
        url = chroma.url
        settings = make_settings(mini_notes, chroma_url=url)
        index = open_quick_index(settings)
        report = await ingest(index)
        assert report.windows_embedded > 0
        assert not settings.chroma_path.exists()  # nothing embedded on disk: it all went to the server
        vectors = await index.vectors()
        embedder = await index.embedder()
        hits = await vectors.query(await embedder.encode_query("who sold the brass compass?"), 3, visibility=PUBLIC)
        top = rows(settings, "SELECT label FROM chunks WHERE id = ?", (hits[0].chunk_id,))
        assert [("campaign-log › Session 1",)] == top
        # A server serves every process as it is: no folder, no draft, and nothing to open afresh.
        session = mini_notes / "sessions" / "Session 4.md"
        session.write_text(session.read_text() + "\nOld Wick blew out every candle but one.\n")
        assert (await ingest(index)).windows_embedded > 0
        assert vectors is await index.vectors()
        assert not settings.chroma_path.exists()
        again = await vectors.query(await embedder.encode_query("who sold the brass compass?"), 3, visibility=PUBLIC)
        assert hits[0] == again[0]  # the edit was to another session


async def test_an_index_from_an_older_oracle_is_migrated_in_place(mini_notes, make_settings, open_index):
    # The real model: the fused order before and after the migration is compared, and it rests on
    # the dense ranking (the stand-in's ranks part at the old labels).
    from oracle.index.schema import SCHEMA_VERSION
    from oracle.index.store import Store
    from oracle.oracle import Oracle

    # No preference for sessions' records: until the next ingest the old labels move the keyword path's
    # scores of the heads by a hair, and with the preference that hair swaps the first two places here.
    settings = make_settings(mini_notes, telling_prior=0.0, kindless_prior=0.0)
    await ingest(open_index(settings))
    before = await Oracle(open_index(settings)).search("What did the Candle Monk sell?")
    new_labels = labels(settings)
    with sqlite3.connect(settings.sqlite_path) as db:  # as schema 1 left it: no covering indexes, no stemming
        refs = db.execute("SELECT chunk_id, kind, key FROM refs ORDER BY 1, 2, 3").fetchall()
        assert "session:1" in {key for _, kind, key in refs if kind == "to"}  # "back in session 1"
        assert {"session:1", "session:2", "session:3", "session:4"} <= {key for _, kind, key in refs if kind == "name"}
        sessions = db.execute("SELECT id, sessions FROM chunks ORDER BY id").fetchall()
        # and the labels it gave, with no session numbers beside them: every session, the log's
        # sections too, was "Session N", the log's preamble a note; its chunker was version 1
        db.execute("UPDATE chunks SET label = 'Session ' || json_extract(sessions, '$[0]') WHERE kind = 'session'")
        db.execute("UPDATE chunks SET label = 'Note: campaign-log' WHERE label = 'campaign-log'")
        db.execute("ALTER TABLE chunks DROP COLUMN sessions")
        db.execute("ALTER TABLE files DROP COLUMN entity")  # and no conventions of the vault kept per note
        db.execute("ALTER TABLE files DROP COLUMN facts")
        for old in ("TRIGGER chunks_ai", "TRIGGER chunks_ad", "TRIGGER public_fts_ai", "TRIGGER public_fts_ad",
                    "TRIGGER public_fts_au", "VIEW public_chunks", "TABLE public_fts"):
            db.execute(f"DROP {old}")  # and search head and text themselves, not a copy of them
        db.execute("ALTER TABLE chunks DROP COLUMN kw_head")
        db.execute("ALTER TABLE chunks DROP COLUMN kw_text")
        db.execute("UPDATE meta SET value = '1' || substr(value, 2) WHERE key = 'chunking'")
        db.execute("DROP TRIGGER chunks_refs_ad")  # and no references between notes
        db.execute("DROP TABLE refs")
        for name in ("chunks_visibility", "chunks_n_visibility", "mentions_entity_visibility", "chunks_id_cover"):
            db.execute(f"DROP INDEX {name}")
        db.executescript("""
            DROP TABLE chunks_fts;
            CREATE VIRTUAL TABLE chunks_fts USING fts5(
                head, text, content='chunks', content_rowid='n', tokenize='unicode61 remove_diacritics 2');
            CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
                INSERT INTO chunks_fts(rowid, head, text) VALUES (new.n, new.head, new.text);
            END;
            CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
                INSERT INTO chunks_fts(chunks_fts, rowid, head, text) VALUES ('delete', old.n, old.head, old.text);
            END;
            INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
        """)
        assert not db.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'ambushing'").fetchone()[0]
        db.execute("PRAGMA user_version = 1")

    after = await Oracle(open_index(settings)).search("What did the Candle Monk sell?")
    assert [(h.chunk.id, h.rank) for h in after.fused] == [(h.chunk.id, h.rank) for h in before.fused]
    # The file as the older Oracle left it, kept beside the index: the way back.
    [kept] = (settings.data_dir / "backups").glob("oracle.schema-1.*.sqlite3")
    with sqlite3.connect(kept) as db:
        assert (1, "ok") == (db.execute("PRAGMA user_version").fetchone()[0],
                             db.execute("PRAGMA integrity_check").fetchone()[0])
    with sqlite3.connect(settings.sqlite_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        stemmed = db.execute(
            "SELECT c.label FROM chunks_fts JOIN chunks c ON c.n = chunks_fts.rowid WHERE chunks_fts MATCH 'ambushing'"
        ).fetchall()
        migrated_refs = db.execute("SELECT chunk_id, kind, key FROM refs ORDER BY 1, 2, 3").fetchall()
        migrated_sessions = db.execute("SELECT id, sessions FROM chunks ORDER BY id").fetchall()
        db.execute("DELETE FROM chunks WHERE label = 'Session 2'")
        orphan_refs = db.execute("SELECT count(*) FROM refs WHERE chunk_id NOT IN (SELECT id FROM chunks)").fetchone()
        db.rollback()
    assert {"chunks_visibility", "chunks_n_visibility", "mentions_entity_visibility", "chunks_id_cover"} <= names
    assert [("Session 2",)] == stemmed  # the old labels stay until the next ingest
    assert migrated_sessions == sessions  # each session's number, read off its old label
    assert migrated_refs == refs  # filled from the stored chunks as an ingest fills them
    assert orphan_refs == (0,)  # and the trigger that drops a deleted chunk's references is back

    # The next ingest reads every note again (a new chunker): the labels are this Oracle's.
    report = await ingest(open_index(settings))
    assert (7, 0) == (len(report.changed), report.unchanged)
    assert new_labels == labels(settings)
    assert refs == rows(settings, "SELECT chunk_id, kind, key FROM refs ORDER BY 1, 2, 3")
    assert sessions == rows(settings, "SELECT id, sessions FROM chunks ORDER BY id")

    with sqlite3.connect(settings.sqlite_path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer Oracle"):
        await Store.open(settings.sqlite_path)
