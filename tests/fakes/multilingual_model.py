"""A small multilingual sentence-transformers model, built here because none can be downloaded.

Its tokenizer is a WordPiece trained on the shared Spanish, Portuguese and Polish vaults; its weights
(a 2-layer BERT) are trained for a few seconds to put a word near its paraphrases: a handful of
Spanish and Portuguese synonym groups, each phrase set inside random sentences of the vaults. So it
knows, as a real multilingual model does and the bundled English one does not, that "palomas correo"
are "cuervos mensajeros". It is built with e5's prompts in its own configuration ("query: ",
"passage: "). It proves the plumbing (tokenizer, windows, prompts, vector size, collection, ONNX),
never retrieval quality.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

from tests.conftest import SHARED_EVAL

VAULTS = ("mythic-bastionland-es", "nyrule3-tormenta", "maski-nyarlathotepa-pl")
PROMPTS = {"query": "query: ", "passage": "passage: "}
DIM = 96
# Phrases that mean the same, as a multilingual model has learned them.
GROUPS = [
    ["pájaros que llevan cartas", "cuervos mensajeros", "aves mensajeras", "palomas correo"],
    ["naufragios", "barcos hundidos", "navíos a pique"],
    ["guarida", "refugio", "madriguera", "escondrijo"],
    ["posada", "taberna", "mesón", "hostal"],
    ["espada", "hoja", "acero", "sable"],
    ["médico", "curandero", "sanador", "galeno"],
    ["rey", "monarca", "soberano"],
    ["asesinato", "homicidio", "crimen", "muerte violenta"],
    ["dinero", "monedas", "oro", "riqueza"],
    ["bosque", "arboleda", "selva", "espesura"],
    ["ladrón", "bandido", "salteador", "forajido"],
    ["hechicero", "brujo", "mago", "nigromante"],
    ["veneno", "ponzoña", "pócima mortal"],
    ["prisión", "cárcel", "calabozo", "mazmorra"],
    ["tormenta", "tempestad", "temporal", "borrasca"],
    ["caballo", "montura", "corcel"],
    ["anciano", "viejo", "abuelo"],
    ["niño", "crío", "muchacho", "chiquillo"],
    ["iglesia", "templo", "santuario", "capilla"],
    ["pelea", "combate", "lucha", "batalla"],
    ["mapa", "carta geográfica", "plano"],
    ["morir", "perecer", "fallecer"],
    ["taverna", "estalagem", "hospedaria"],
    ["navio", "barco", "embarcação"],
    ["ladrão", "bandido", "salteador"],
    ["bruxo", "feiticeiro", "mago"],
    ["prisão", "cadeia", "masmorra"],
    ["tempestade", "temporal", "tormenta"],
]


def vault_texts() -> list[str]:
    return [p.read_text("utf-8") for v in VAULTS for p in sorted((SHARED_EVAL / "vaults" / v / "notes").rglob("*.md"))]


# Seeds 0 to 3 all find the paraphrase below in the top 8 (tests/index/test_multilingual_model.py);
# this one ranks it well clear of the cut, so another CPU's rounding cannot flip the test.
SEED = 3


def build(folder: Path, *, steps: int = 190, seed: int = SEED) -> Path:
    """Build, train and save the model into `folder` (ten to twenty seconds); the folder, for
    ORACLE_EMBED_MODEL."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in the same order: the same model on any machine
    try:
        return _build(folder, steps, seed)
    finally:
        torch.set_num_threads(threads)


def _build(folder: Path, steps: int, seed: int) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    texts = vault_texts()
    words = BertWordPieceTokenizer(lowercase=True, strip_accents=False)
    words.train_from_iterator(texts, vocab_size=8000, min_frequency=2, show_progress=False)
    bare = folder / "transformer"
    tokenizer = BertTokenizerFast(vocab=words.get_vocab(), do_lower_case=True, strip_accents=False)
    tokenizer.save_pretrained(bare)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=DIM, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=2 * DIM, max_position_embeddings=256,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    BertModel(config).save_pretrained(bare)
    model = SentenceTransformer(
        modules=[Transformer(str(bare), max_seq_length=256), Pooling(DIM, "mean"), Normalize()],
        prompts=PROMPTS, device="cpu",
    )
    _train(model, _pairs(texts, steps * 32, random.Random(seed)))
    model.save(str(folder))
    return folder


def _pairs(texts: list[str], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """A phrase as a question; a synonym of it between two random sentences of the vaults as the passage."""
    sentences = [s.strip() for t in texts for s in re.split(r"(?<=[.!?])\s+|\n", t) if 30 < len(s.strip()) < 200]
    out = []
    for _ in range(n):
        asked, written = rng.sample(rng.choice(GROUPS), 2)
        passage = f"{rng.choice(sentences)} {written} {rng.choice(sentences)}"
        out.append((PROMPTS["query"] + asked, PROMPTS["passage"] + passage))
    return out


def _train(model, pairs: list[tuple[str, str]], batch: int = 32) -> None:
    """In-batch negatives (the loss e5 and most sentence models are trained with)."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for start in range(0, len(pairs), batch):
        part = pairs[start:start + batch]
        questions = model(model.preprocess([q for q, _ in part]))["sentence_embedding"]
        passages = model(model.preprocess([p for _, p in part]))["sentence_embedding"]
        loss = torch.nn.functional.cross_entropy(questions @ passages.T * 20, torch.arange(len(part)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
