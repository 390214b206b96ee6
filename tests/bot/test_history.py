"""The bot's thread history in SQLite: what a follow-up needs, kept across restarts and across
versions of the file."""
from __future__ import annotations

import sqlite3

from bot.history import ThreadHistory
from oracle import Turn

# The file as a bot from before campaigns, and before answers kept the passage they told, left it.
OLD_SCHEMA = """
CREATE TABLE threads (thread_id INTEGER PRIMARY KEY, guild_id INTEGER, channel_id INTEGER NOT NULL,
                      owner_id INTEGER NOT NULL, created TEXT NOT NULL DEFAULT (datetime('now')));
CREATE TABLE turns (id INTEGER PRIMARY KEY, thread_id INTEGER NOT NULL, role TEXT NOT NULL,
                    content TEXT NOT NULL, created TEXT NOT NULL DEFAULT (datetime('now')));
INSERT INTO threads (thread_id, guild_id, channel_id, owner_id) VALUES (7, 1, 2, 3);
INSERT INTO turns (thread_id, role, content) VALUES (7, 'user', 'Who is Ilsa?'), (7, 'assistant', 'The harbourmaster.');
"""


async def test_an_answer_keeps_the_passage_it_told_across_a_restart(tmp_path):
    path = tmp_path / "bot.sqlite3"
    history = await ThreadHistory.open(path)
    await history.add_thread(7, 1, 2, 3, "default")
    await history.add_turns(7, [Turn("user", "Who is Ilsa?"), Turn("assistant", "The harbourmaster.", "chunk-9")])
    await history.close()
    history = await ThreadHistory.open(path)
    try:
        assert [Turn("user", "Who is Ilsa?"), Turn("assistant", "The harbourmaster.", "chunk-9")] == await history.turns(7, 6)
    finally:
        await history.close()


async def test_a_history_from_an_older_bot_opens_with_its_threads_and_turns(tmp_path):
    path = tmp_path / "bot.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
    history = await ThreadHistory.open(path)
    try:
        assert "default" == await history.campaign_of(7)
        # Its answers told no passage: a follow-up searches the thread's question again.
        assert [Turn("user", "Who is Ilsa?"), Turn("assistant", "The harbourmaster.")] == await history.turns(7, 6)
        await history.add_turns(7, [Turn("user", "and then?"), Turn("assistant", "She fined us.", "chunk-4")])
        assert Turn("assistant", "She fined us.", "chunk-4") == (await history.turns(7, 6))[-1]
    finally:
        await history.close()
