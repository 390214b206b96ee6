"""The candidate embedding models' shapes, and a sentence-transformers folder built with one of them.

Each candidate is built with its real shape (architecture, layers, hidden size, feed-forward size,
heads, positions, vocabulary, pooling, limit, Normalize: `MODELS`, checked against each model's
config.json) and random weights (`torch.manual_seed(0)`): time and memory depend on the shape, not on
the values of the weights. The tokenizer is a WordPiece trained on the shared vaults' notes, its ids
spread over the real vocabulary's rows.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.common import EVAL_DIR

TOKENIZER_VOCAB = 30_000  # word pieces of the WordPiece trained on the vaults (ids spread over the model's)
E5_PROMPTS = ("query: ", "passage: ")


@dataclass(frozen=True)
class Model:
    """A candidate's shape, as its config.json, sentence_bert_config.json and modules.json give it."""

    name: str  # the folder's name: the last part of ORACLE_EMBED_MODEL, as models.toml matches it
    hub: str
    arch: str  # "bert", "xlm-roberta", or "bundled" (the real model, not built)
    vocab: int = 0
    layers: int = 0
    hidden: int = 0
    intermediate: int = 0
    heads: int = 0
    positions: int = 0  # max_position_embeddings
    max_tokens: int = 0  # max_seq_length: what the model reads
    pooling: str = "mean"
    normalize: bool = True
    prompts: tuple[str, str] = ("", "")  # (query, passage), in the model's own configuration
    windows: int = 256  # embedded per run


MODELS = (
    Model("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2 (bundled)", "bundled"),
    # A BERT with XLM-R's vocabulary (its config.json: BertModel, 250,037 word pieces).
    Model("paraphrase-multilingual-MiniLM-L12-v2", "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
          "bert", vocab=250_037, layers=12, hidden=384, intermediate=1536, heads=12, positions=512,
          max_tokens=128, normalize=False),
    Model("multilingual-e5-small", "intfloat/multilingual-e5-small", "bert", vocab=250_037, layers=12, hidden=384,
          intermediate=1536, heads=12, positions=512, max_tokens=512, prompts=E5_PROMPTS),
    Model("multilingual-e5-base", "intfloat/multilingual-e5-base", "xlm-roberta", vocab=250_002, layers=12,
          hidden=768, intermediate=3072, heads=12, positions=514, max_tokens=512, prompts=E5_PROMPTS),
    Model("bge-m3", "BAAI/bge-m3", "xlm-roberta", vocab=250_002, layers=24, hidden=1024, intermediate=4096,
          heads=16, positions=8194, max_tokens=8192, pooling="cls", windows=64),
    # Not run unless asked (--models): bge-m3's size with mean pooling, so its questions go to ONNX.
    Model("multilingual-e5-large", "intfloat/multilingual-e5-large", "xlm-roberta", vocab=250_002, layers=24,
          hidden=1024, intermediate=4096, heads=16, positions=514, max_tokens=512, prompts=E5_PROMPTS, windows=64),
)
DEFAULT_MODELS = tuple(m.name for m in MODELS if m.name != "multilingual-e5-large")


def pick_models(spec: str | None) -> list[Model]:
    if spec is None:
        return [m for m in MODELS if m.name in DEFAULT_MODELS]
    known = {m.name: m for m in MODELS} | {"baseline": MODELS[0]}
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"unknown model {', '.join(unknown)}; the models: {', '.join(m.name for m in MODELS)}")
    return [m for m in MODELS if m in {known[w] for w in wanted}]


def by_name(name: str) -> Model:
    return next(m for m in MODELS if m.name == name)


def vault_notes() -> list[tuple[str, list[Path]]]:
    """(vault, its Markdown notes) for every vault of EVAL_DIR/vaults."""
    root = EVAL_DIR / "vaults"
    if not root.is_dir():
        raise SystemExit(f"no vaults at {root} (set ORACLE_EVAL_DIR)")
    return [(v.name, sorted((v / "notes").rglob("*.md"))) for v in sorted(root.iterdir()) if (v / "notes").is_dir()]



# ---------------------------------------------------------------------------------------------
# Building a model of the real shape


def train_tokenizer(folder: Path, vocab: int):
    """A lower-casing WordPiece trained on the vaults' notes, saved in `folder`, its ids spread evenly
    over a vocabulary of `vocab` rows, as a real multilingual vocabulary spreads a vault's word pieces:
    the rows of the embedding matrix a campaign touches are scattered, not the first few thousand."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    words = BertWordPieceTokenizer(lowercase=True, strip_accents=False)
    files = [str(p) for _, paths in vault_notes() for p in paths]
    words.train(files, vocab_size=TOKENIZER_VOCAB, min_frequency=2, show_progress=False)
    trained = words.get_vocab()
    stride = max(1, vocab // len(trained))
    spread = {piece: i * stride for piece, i in trained.items()}
    # transformers 5: `vocab_file=` silently gives a 5-token vocabulary; the dict is kept whole.
    tokenizer = BertTokenizerFast(vocab=spread, do_lower_case=True, strip_accents=False)
    tokenizer.save_pretrained(folder)
    return tokenizer


def transformer_config(model: Model, tokenizer):
    from transformers import BertConfig, XLMRobertaConfig

    shape = dict(vocab_size=model.vocab, hidden_size=model.hidden, num_hidden_layers=model.layers,
                 num_attention_heads=model.heads, intermediate_size=model.intermediate,
                 max_position_embeddings=model.positions)
    if model.arch == "bert":
        return BertConfig(**shape, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=tokenizer.pad_token_id)
    # XLM-R numbers positions from its padding id: the tokenizer's, so [PAD] is padding to both.
    return XLMRobertaConfig(**shape, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=tokenizer.pad_token_id,
                            bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id)


def build(model: Model, folder: Path) -> None:
    """Save a sentence-transformers model of `model`'s shape, random weights, into `folder`."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertModel, XLMRobertaModel

    staging = folder.with_name(folder.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    bare = staging / "bare"
    tokenizer = train_tokenizer(bare, model.vocab)
    torch.manual_seed(0)
    config = transformer_config(model, tokenizer)
    (BertModel if model.arch == "bert" else XLMRobertaModel)(config).save_pretrained(bare)
    modules = [Transformer(str(bare), max_seq_length=model.max_tokens), Pooling(model.hidden, model.pooling)]
    if model.normalize:
        modules.append(Normalize())
    query, passage = model.prompts
    prompts = {"query": query, "passage": passage} if query or passage else None
    SentenceTransformer(modules=modules, prompts=prompts, device="cpu").save(str(staging / "model"))
    (staging / "model" / "bench-shape.json").write_text(json.dumps(asdict(model)), encoding="utf-8")
    shutil.rmtree(folder, ignore_errors=True)
    (staging / "model").rename(folder)
    shutil.rmtree(staging, ignore_errors=True)


def built(model: Model, folder: Path) -> bool:
    try:
        return json.loads((folder / "bench-shape.json").read_text(encoding="utf-8")) == json.loads(
            json.dumps(asdict(model)))
    except (OSError, ValueError):
        return False


def weights_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.safetensors"))
