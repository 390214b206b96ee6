"""Several campaigns in one process: the campaigns file (`ORACLE_CAMPAIGNS`).

```toml
[campaigns.tuesday]
notes = "notes/tuesday"         # the campaign's notes folder (required)
data = "var/tuesday"            # its index (default: ORACLE_DATA_DIR/<name>)
model = "qwen2.5:14b"           # default: ORACLE_MODEL
# who reads what in this campaign (default: ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, ORACLE_GM_HEADINGS)
player_notes = ["Session Notes/", "Handouts/"]   # players read only these
gm_notes = ["Session Prep/**", "TODO.md"]        # these are game-master-only
gm_headings = ["GM Notes", "Secrets and Clues"]  # headings whose section is game-master-only

[campaigns.tuesday.discord]     # where the bot serves it: read by the bot (bot/places.py)
```

`player_notes`, `gm_notes` and `gm_headings` are the campaign's own policy (see the README's
"Game-master secrets"): globs relative to its notes folder, and heading names. A key left out takes
the setting's value; an empty list is none (`gm_headings = []`: no heading hides its section).

Relative paths are relative to the file. A bad file is one `CampaignsError` naming the file and the
line, raised at startup before anything opens; a front end checks its own table the same way
(`Campaigns.error_at`). Without the file, `Campaigns.single(settings)` is today's one campaign from
ORACLE_NOTES_DIR.

Each campaign's index is its own (its own SQLite file and Chroma collections), so its secrets and
its game masters stay its own: a campaign's index only ever holds that campaign's notes.
"""
from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from .errors import OracleError
from .settings import Settings

DEFAULT = "default"
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,23}$")
# Who reads what, per campaign: the Settings fields of ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, ORACLE_GM_HEADINGS.
POLICY_KEYS = ("player_notes", "gm_notes", "gm_headings")
# A front end's own table inside a campaign's, which that front end checks.
FRONT_TABLES = ("discord",)


class CampaignsError(OracleError, ValueError):
    """The campaigns file cannot be used; the message names the file, the line and what to change."""


@dataclass(frozen=True)
class Campaign:
    name: str
    notes: Path
    data: Path | None = None  # None: ORACLE_DATA_DIR/<name> (or ORACLE_DATA_DIR itself for the default)
    model: str | None = None  # None: ORACLE_MODEL
    # Its policy of who reads what; None: the setting's (ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, ORACLE_GM_HEADINGS).
    player_notes: tuple[str, ...] | None = None
    gm_notes: tuple[str, ...] | None = None
    gm_headings: tuple[str, ...] | None = None
    # The front ends' own tables ([campaigns.NAME.discord]), as the file gives them.
    fronts: Mapping[str, Mapping[str, object]] = field(default_factory=dict, compare=False)

    def front(self, name: str) -> Mapping[str, object]:
        """A front end's own table of this campaign; empty when the file gives none."""
        return self.fronts.get(name, {})

    def settings(self, base: Settings) -> Settings:
        """The core settings of this campaign: its notes, its index, its model, its policy of who
        reads what; with a shared Chroma server (ORACLE_CHROMA_URL), collections named after it so
        campaigns never share one."""
        data = self.data if self.data is not None else base.data_dir / self.name
        update: dict[str, Any] = {"notes_dir": self.notes, "data_dir": data}
        if self.model:
            update["model"] = self.model
        for key in POLICY_KEYS:
            value = getattr(self, key)
            if value is not None:
                update[key] = list(value)
        if base.chroma_url and self.name != DEFAULT:
            update["collection_prefix"] = f"{self.name}-"
        return base.model_copy(update=update)


@dataclass(frozen=True)
class Campaigns:
    """The campaigns of one process."""

    campaigns: tuple[Campaign, ...]
    source: Path | None = None  # the campaigns file; None for the single default campaign
    lines: Mapping[tuple[str, ...], int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def single(cls, settings: Settings) -> Campaigns:
        """Zero configuration: one campaign, `default`, from ORACLE_NOTES_DIR into ORACLE_DATA_DIR."""
        return cls((Campaign(DEFAULT, settings.notes_dir, settings.data_dir),))

    @classmethod
    def from_settings(cls, settings: Settings) -> Campaigns:
        """The campaigns of ORACLE_CAMPAIGNS, or the single default campaign without it."""
        return cls.load(settings.campaigns, settings.data_dir) if settings.campaigns else cls.single(settings)

    @classmethod
    def load(cls, path: Path, data_root: Path | None = None) -> Campaigns:
        return load_campaigns(path, data_root)

    @property
    def is_single(self) -> bool:
        return self.source is None

    def __iter__(self) -> Iterator[Campaign]:
        return iter(self.campaigns)

    def __len__(self) -> int:
        return len(self.campaigns)

    def names(self) -> list[str]:
        return [c.name for c in self.campaigns]

    def get(self, name: str) -> Campaign:
        """The campaign called `name`; an unknown name is an error listing the names there are."""
        for campaign in self.campaigns:
            if campaign.name == name:
                return campaign
        where = f" in {self.source}" if self.source else " (no ORACLE_CAMPAIGNS file: only the default campaign)"
        raise CampaignsError(f"there is no campaign {name!r}{where}; the campaigns are: {', '.join(self.names())}")

    def error_at(self, where: tuple[str, ...], message: str) -> CampaignsError:
        """An error at a key's line of the file (`("campaigns", NAME, "discord", KEY)`), else at the
        nearest table holding it, naming the file."""
        line = _line_of(self.lines, where)
        return CampaignsError(f"{self.source or 'the campaigns'}{f', line {line}' if line else ''}: {message}")

    def invalid(self, exc: ValidationError, at: tuple[str, ...], name: str, unknown: str, missing: str = "") -> CampaignsError:
        """pydantic's first error about the table at `at` of campaign `name`, as one sentence at its
        key's line. An unknown key goes first, as a misspelt key is the likeliest reason for the rest,
        followed by `unknown` (what the keys are); a missing one by `missing`."""
        error = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        if error["type"] == "extra_forbidden":
            return self.error_at((*at, key), f"unknown key {key!r} {unknown}")
        if error["type"] == "missing":
            return self.error_at(at, f"campaign {name!r} has no `{key}`{missing}")
        return self.error_at((*at, key), f"campaign {name!r}: {error.get('ctx', {}).get('error', error['msg'])}")


class CampaignTable(BaseModel):
    """One [campaigns.NAME] table without its front ends' tables. Each check raises the sentence the
    game master reads; paths are relative to the file (the `base` of the validation context)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    notes: Path
    data: Path | None = None
    model: str | None = None
    player_notes: tuple[str, ...] | None = None
    gm_notes: tuple[str, ...] | None = None
    gm_headings: tuple[str, ...] | None = None

    @field_validator("notes", "data", mode="before")
    @classmethod
    def _folder(cls, value: object, info: ValidationInfo) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{info.field_name} must be a folder path in quotes, not {described(value)}")
        path = Path(value).expanduser()
        return path if path.is_absolute() else Path((info.context or {})["base"]) / path

    @field_validator("notes")
    @classmethod
    def _notes_folder(cls, notes: Path) -> Path:
        if not notes.is_dir():
            raise ValueError(f"the notes folder {notes} {'is not a folder' if notes.exists() else 'does not exist'}")
        return notes

    @field_validator("model", mode="before")
    @classmethod
    def _model_name(cls, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError('model must be an Ollama model name, e.g. "qwen2.5:14b"')
        return value

    @field_validator(*POLICY_KEYS, mode="before")
    @classmethod
    def _strings(cls, value: object, info: ValidationInfo) -> tuple[str, ...]:
        """A list of globs or heading names: strings in quotes, none of them blank."""
        example = '["GM Notes", "Secrets and Clues"]' if info.field_name == "gm_headings" else '["Session Notes/", "Handouts/**"]'
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            shown = described(value, fits=lambda v: isinstance(v, str) and bool(v.strip()))
            raise ValueError(f"{info.field_name} must be a list of strings in quotes, e.g. {example}, not {shown}")
        return tuple(item.strip() for item in value)


def described(value: object, fits: Callable[[object], bool] = lambda v: False) -> str:
    """A value of the file in words, for a message; a list by its first item that does not `fit`."""
    if isinstance(value, list):
        inner = next((v for v in value if not fits(v)), None)
        return f"a list holding {inner!r}" if inner is not None else "a list"
    return {str: "a string", bool: "true/false", int: "a number", float: "a number", dict: "a table"}.get(
        type(value), type(value).__name__) + (f" ({value!r})" if isinstance(value, (str, int, float)) else "")


# ---------------------------------------------------------------------------------------------
# The file


def load_campaigns(path: Path, data_root: Path | None = None) -> Campaigns:
    """The campaigns of a TOML file; `data_root` (ORACLE_DATA_DIR) is where a campaign without `data`
    keeps its index, checked like the others for a folder two campaigns would share."""
    path = Path(path).expanduser()
    tables, lines = _read(path)
    found = Campaigns((), path, lines)
    campaigns: list[Campaign] = []
    data_owner: dict[Path, str] = {}
    for name, table in tables.items():
        campaign = _campaign(name, table, path.resolve().parent, found)
        _claim_data(campaign, data_root, data_owner, found)
        campaigns.append(campaign)
    return Campaigns(tuple(campaigns), path, lines)


def _read(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """The file's [campaigns.NAME] tables, and the line of each key."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CampaignsError(f"the campaigns file {path} (ORACLE_CAMPAIGNS) does not exist") from None
    except OSError as exc:
        raise CampaignsError(f"cannot read the campaigns file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise CampaignsError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise CampaignsError(_syntax_error(path, str(exc), raw)) from None
    lines = _key_lines(text)
    file = Campaigns((), path, lines)
    for key in data:
        if key != "campaigns":
            raise file.error_at((key,), f"unknown key {key!r}: the file holds [campaigns.NAME] tables only")
    tables = data.get("campaigns")
    if isinstance(tables, list):
        raise file.error_at(("campaigns",), "each campaign is a [campaigns.NAME] table, named in its header: not [[campaigns]]")
    if not isinstance(tables, dict) or not tables:
        raise file.error_at(("campaigns",), "no campaign: add a [campaigns.NAME] table with at least `notes = \"...\"`")
    return tables, lines


def _campaign(name: str, table: object, base: Path, file: Campaigns) -> Campaign:
    """One [campaigns.NAME] table, each key checked; its front ends' tables only for being tables."""
    at = ("campaigns", name)
    if not NAME.match(name):
        raise file.error_at(at, f"campaign name {name!r}: use 1-24 lowercase letters, digits, - or _, starting with "
                                "a letter or digit (it names the campaign's index and its option in the bot)")
    if not isinstance(table, dict):
        raise file.error_at(at, f"campaigns.{name} must be a table ([campaigns.{name}]), not {described(table)}")
    fronts = {key: value for key, value in table.items() if key in FRONT_TABLES}
    for key, value in fronts.items():
        if not isinstance(value, dict):
            raise file.error_at((*at, key), f"campaigns.{name}.{key} must be a table ([campaigns.{name}.{key}]), "
                                            f"not {described(value)}")
    try:
        checked = CampaignTable.model_validate({k: v for k, v in table.items() if k not in fronts}, context={"base": base})
    except ValidationError as exc:
        keys = ", ".join(sorted((*CampaignTable.model_fields, *FRONT_TABLES)))
        tables = " or ".join(f"[campaigns.{name}.{t}]" for t in FRONT_TABLES)
        raise file.invalid(exc, at, name, f"in campaign {name!r}; the keys are: {keys} (a key of the bot goes in {tables})",
                           missing=": name its notes folder") from None
    return Campaign(name, checked.notes, checked.data, checked.model, checked.player_notes, checked.gm_notes,
                    checked.gm_headings, fronts)


def _claim_data(campaign: Campaign, data_root: Path | None, owner: dict[Path, str], file: Campaigns) -> None:
    """Its index folder as it will be: `data`, else ORACLE_DATA_DIR/NAME. Two campaigns in one folder
    would overwrite each other's index, game-master-only chunks included."""
    name = campaign.name
    folder = campaign.data if campaign.data is not None else (data_root / name if data_root is not None else None)
    if folder is None:
        return
    other = owner.get(folder.resolve())
    if other is not None:
        default = "" if campaign.data is not None else f" (its default, ORACLE_DATA_DIR/{name})"
        at = ("campaigns", name, "data") if campaign.data is not None else ("campaigns", name)
        raise file.error_at(at, f"campaigns {other!r} and {name!r} share the index folder {folder}{default}: "
                                "give each its own `data`")
    owner[folder.resolve()] = name


def _syntax_error(path: Path, message: str, raw: bytes) -> str:
    """tomllib's message ends "(at line L, column C)" or "(at end of document)": the line goes first."""
    at = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if at:
        return f"{path}, line {at.group(1)}: not valid TOML: {message[:at.start()]} (column {at.group(2)})"
    end = re.search(r"\s*\(at end of document\)$", message)
    if end:
        line = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
        return f"{path}, line {line}: not valid TOML: {message[:end.start()]} (at the end of the file)"
    return f"{path}: not valid TOML: {message}"


# Where each key sits, for messages: tomllib gives values, not positions. A header `[a.b]` or a key
# `x = ...` (dotted or quoted) records the first line of its full dotted path.
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"([^"]*)"|'([^']*)'""")


def _dotted(key: str) -> tuple[str, ...]:
    return tuple(m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(0)
                 for m in _PART.finditer(key))


def _key_lines(text: str) -> dict[tuple[str, ...], int]:
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for n, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = _dotted(header.group(1))
            for i in range(1, len(table) + 1):
                lines.setdefault(table[:i], n)
            continue
        key = _KEY.match(line)
        if key:
            full = table + _dotted(key.group(1))
            for i in range(len(table) + 1, len(full) + 1):
                lines.setdefault(full[:i], n)
    return lines


def _line_of(lines: Mapping[tuple[str, ...], int], where: tuple[str, ...]) -> int | None:
    """The line of `where`, else of the nearest table holding it."""
    for i in range(len(where), 0, -1):
        if where[:i] in lines:
            return lines[where[:i]]
    return None
