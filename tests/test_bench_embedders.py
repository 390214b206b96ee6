"""bench.embedders measures models it builds with a candidate's shape: what the Oracle loads from such a
folder is that shape (vector size, limit, prompts, pooling, vocabulary rows), or the costs it prints
would be another model's."""
from __future__ import annotations

from dataclasses import replace

import pytest

from bench.embedder_shapes import E5_PROMPTS, Model, build, built, by_name, weights_bytes
from oracle.index.embed import Embedder

TINY = Model("tiny-xlm-roberta", "a test shape", "xlm-roberta", vocab=40_000, layers=1, hidden=32, intermediate=64,
             heads=2, positions=130, max_tokens=128, pooling="cls", prompts=E5_PROMPTS)


@pytest.mark.integration  # loads a model with the Oracle's Embedder
def test_the_oracle_loads_the_shape_that_was_asked(tmp_path):
    folder = tmp_path / TINY.name
    build(TINY, folder)
    assert built(TINY, folder) and not built(replace(TINY, layers=2), folder)

    embedder = Embedder(str(folder), query_backend="onnx", cache_dir=tmp_path / "cache")
    assert (TINY.hidden, TINY.max_tokens) == (embedder.dim, embedder.max_tokens)
    assert (embedder.prompts.query, embedder.prompts.passage) == E5_PROMPTS
    [rows] = {p.shape[0] for name, p in embedder.model.named_parameters() if "word_embeddings" in name}
    assert TINY.vocab == rows
    # Weights on disk are the parameters in fp32, the vocabulary's rows most of them.
    params = sum(p.numel() for p in embedder.model.parameters())
    assert params * 4 <= weights_bytes(folder) < params * 4 * 1.01
    # The word pieces a vault gives are spread over the whole vocabulary, as a real one's are.
    ids = embedder.model.tokenizer("Los cuervos mensajeros del Encierro de Maquenda")["input_ids"]
    assert max(ids) > TINY.vocab // 2 and max(ids) < TINY.vocab
    # CLS pooling keeps questions on torch, as the Oracle does for bge-m3.
    embedder.prepare_queries()
    assert "torch" == embedder.query_runtime
    assert (TINY.hidden,) == embedder.encode_query("¿Quién cría palomas?").shape


def test_the_candidates_have_the_published_shapes():
    # config.json of each model: hidden size × layers, and the vocabulary of XLM-R (250,002) or of the
    # BERT models built on it (250,037).
    shapes = {m.name: (m.arch, m.vocab, m.layers, m.hidden, m.pooling) for m in map(by_name, (
        "paraphrase-multilingual-MiniLM-L12-v2", "multilingual-e5-small", "multilingual-e5-base", "bge-m3"))}
    assert {"paraphrase-multilingual-MiniLM-L12-v2": ("bert", 250_037, 12, 384, "mean"),
            "multilingual-e5-small": ("bert", 250_037, 12, 384, "mean"),
            "multilingual-e5-base": ("xlm-roberta", 250_002, 12, 768, "mean"),
            "bge-m3": ("xlm-roberta", 250_002, 24, 1024, "cls")} == shapes
