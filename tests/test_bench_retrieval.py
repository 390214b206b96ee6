"""bench.retrieval's enlarged corpora reuse the 1× vectors: every chunk of a copy finds its original."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bench.retrieval.corpus import make_copies
from bench.retrieval.embedding import _embedder_class
from oracle.notes.chunking import chunk_note
from oracle.notes.parse import parse_note

LOG = "\n".join(
    f"## Session {n}\n\nThe party walked {n} miles through the marsh and argued about the lantern, "
    f"then camped beside the ruined tower while the rain went on.\n"
    for n in range(1, 6)
)


def _chunks(folder: Path, name: str):
    return chunk_note(parse_note(name, (folder / name).read_bytes(), {}))


def test_every_chunk_of_a_copy_maps_to_a_chunk_of_the_original(tmp_path: Path) -> None:
    src = tmp_path / "notes"
    src.mkdir()
    (src / "campaign-log.md").write_text(LOG, encoding="utf-8")
    copies = make_copies(src, tmp_path / "copies", 3)
    originals = _chunks(src, "campaign-log.md")
    source = {(Path(c.path).stem, c.label, c.part, c.visibility): ["vector"] for c in originals}
    reuse = _embedder_class()(SimpleNamespace(), source, copies.origin)

    for copy in ("campaign-log-000.md", "campaign-log-001.md", "campaign-log-002.md"):
        chunks = _chunks(copies.notes_dir, copy)
        assert len(chunks) == len(originals)
        assert all(reuse.origin_key(c) in source for c in chunks), [c.label for c in chunks]
    # The copies really are renumbered: none of copy 2's labels is one of the original's.
    assert {c.label for c in _chunks(copies.notes_dir, "campaign-log-002.md")}.isdisjoint({c.label for c in originals})
