"""Several campaigns in one process: the campaigns file (`ORACLE_CAMPAIGNS`) and routing by channel.

```toml
[campaigns.tuesday]
notes = "notes/tuesday"         # the campaign's notes folder (required)
data = "var/tuesday"            # its index (default: ORACLE_DATA_DIR/<name>)
channels = [1234, 5678]         # channel or category ids it answers in
gm_roles = ["gm", "dm"]         # role names or ids of its game masters (default: ORACLE_GM_ROLES)
gm_channels = [9012]            # where its game masters' answers may include secrets (it answers there too)
model = "qwen2.5:14b"           # default: ORACLE_MODEL
announce_channel = 3456         # where the bot says what a reingest brought
# who reads what in this campaign (default: ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, ORACLE_GM_HEADINGS)
player_notes = ["Session Notes/", "Handouts/"]   # players read only these
gm_notes = ["Session Prep/**", "TODO.md"]        # these are game-master-only
gm_headings = ["GM Notes", "Secrets and Clues"]  # headings whose section is game-master-only
```

`player_notes`, `gm_notes` and `gm_headings` are the campaign's own policy (see the README's
"Game-master secrets"): globs relative to its notes folder, and heading names. A key left out takes
the setting's value; an empty list is none (`gm_headings = []`: no heading hides its section).

Relative paths are relative to the file. A bad file is one `CampaignsError` naming the file and the
line, raised at startup before anything opens. Without the file, `Campaigns.single(settings)` is
today's one campaign from ORACLE_NOTES_DIR, answering everywhere.

Each campaign's index is its own (its own SQLite file and Chroma collections), so its secrets and
its game masters stay its own: routing decides the campaign, and a campaign's index only ever
holds that campaign's notes.
"""
from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import OracleError
from .settings import Settings

DEFAULT = "default"
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,23}$")
# Who reads what, per campaign: the Settings fields of ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, ORACLE_GM_HEADINGS.
POLICY_KEYS = ("player_notes", "gm_notes", "gm_headings")
KEYS = {"notes", "data", "channels", "gm_roles", "gm_channels", "model", "announce_channel", *POLICY_KEYS}


class CampaignsError(OracleError, ValueError):
    """The campaigns file cannot be used; the message names the file, the line and what to change."""


@dataclass(frozen=True)
class Campaign:
    name: str
    notes: Path
    data: Path | None = None  # None: ORACLE_DATA_DIR/<name> (or ORACLE_DATA_DIR itself for the default)
    channels: tuple[int, ...] = ()
    gm_roles: tuple[str, ...] | None = None  # None: the bot's ORACLE_GM_ROLES
    gm_channels: tuple[int, ...] | None = None  # None: the bot's ORACLE_GM_CHANNELS
    model: str | None = None  # None: ORACLE_MODEL
    announce_channel: int | None = None
    # Its policy of who reads what; None: the setting's (ORACLE_PLAYER_NOTES, ORACLE_GM_NOTES, ORACLE_GM_HEADINGS).
    player_notes: tuple[str, ...] | None = None
    gm_notes: tuple[str, ...] | None = None
    gm_headings: tuple[str, ...] | None = None

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

    def is_gm_role(self, roles: Iterable[str], default: Sequence[str]) -> bool:
        """Whether any of a member's role names or ids (as strings) makes them this campaign's game
        master: its own `gm_roles`, else `default` (the bot's ORACLE_GM_ROLES; a file of several
        campaigns gives each its own). Case-insensitive."""
        wanted = {r.casefold() for r in (self.gm_roles if self.gm_roles is not None else default)}
        return any(str(r).casefold() in wanted for r in roles)

    def is_gm_channel(self, channel_ids: Iterable[int | None], default: Sequence[int]) -> bool:
        """Whether one of these channels (a channel, its thread's parent, its category) is one of this
        campaign's game-master channels (its own, else `default`, the bot's ORACLE_GM_CHANNELS)."""
        mine = set(self.gm_channels if self.gm_channels is not None else default)
        return any(c in mine for c in channel_ids if c is not None)


@dataclass(frozen=True)
class Campaigns:
    """The campaigns of one process, and which one a channel belongs to."""

    campaigns: tuple[Campaign, ...]
    source: Path | None = None  # the campaigns file; None for the single default campaign
    _by_channel: dict[int, Campaign] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for campaign in self.campaigns:
            for channel in (*campaign.channels, *(campaign.gm_channels or ())):
                self._by_channel.setdefault(channel, campaign)

    @classmethod
    def single(cls, settings: Settings) -> Campaigns:
        """Zero configuration: one campaign, `default`, from ORACLE_NOTES_DIR into ORACLE_DATA_DIR,
        answering in every channel with the bot's own game-master roles and channels."""
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

    def route(self, channel_id: int | None, parent_id: int | None = None, category_id: int | None = None) -> Campaign | None:
        """The campaign a message belongs to: by its channel, else its thread's parent channel, else
        the category; None where no campaign is mapped. The single default campaign answers everywhere."""
        if self.is_single:
            return self.campaigns[0]
        for key in (channel_id, parent_id, category_id):
            if key is not None and key in self._by_channel:
                return self._by_channel[key]
        return None


# ---------------------------------------------------------------------------------------------
# The file


def load_campaigns(path: Path, data_root: Path | None = None) -> Campaigns:
    """The campaigns of a TOML file; `data_root` (ORACLE_DATA_DIR) is where a campaign without `data`
    keeps its index, checked like the others for a folder two campaigns would share."""
    path = Path(path).expanduser()
    tables, fail = _read(path)
    base = path.resolve().parent
    campaigns: list[Campaign] = []
    channel_owner: dict[int, str] = {}
    data_owner: dict[Path, str] = {}
    for name, table in tables.items():
        campaign = _campaign(name, table, base, fail)
        _claim_data(campaign, data_root, data_owner, fail)
        _claim_channels(campaign, channel_owner, fail)
        campaigns.append(campaign)
    if len(campaigns) > 1:
        _check_several(campaigns, channel_owner, fail)
    return Campaigns(tuple(campaigns), source=path)


Fail = Callable[[tuple[str, ...], str], CampaignsError]  # at a key's line, naming the file


def _read(path: Path) -> tuple[dict[str, Any], Fail]:
    """The file's [campaigns.NAME] tables, and how a key of it fails."""
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

    def fail(where: tuple[str, ...], message: str) -> CampaignsError:
        line = _line_of(lines, where)
        return CampaignsError(f"{path}{f', line {line}' if line else ''}: {message}")

    for key in data:
        if key != "campaigns":
            raise fail((key,), f"unknown key {key!r}: the file holds [campaigns.NAME] tables only")
    tables = data.get("campaigns")
    if isinstance(tables, list):
        raise fail(("campaigns",), "each campaign is a [campaigns.NAME] table, named in its header: not [[campaigns]]")
    if not isinstance(tables, dict) or not tables:
        raise fail(("campaigns",), "no campaign: add a [campaigns.NAME] table with at least `notes = \"...\"`")
    return tables, fail


def _campaign(name: str, table: Any, base: Path, fail: Fail) -> Campaign:
    """One [campaigns.NAME] table, each key checked; relative paths are relative to the file (`base`)."""
    at = ("campaigns", name)
    if not NAME.match(name):
        raise fail(at, f"campaign name {name!r}: use 1-24 lowercase letters, digits, - or _, starting with a "
                       "letter or digit (it names the campaign's index and its Discord option)")
    if not isinstance(table, dict):
        raise fail(at, f"campaigns.{name} must be a table ([campaigns.{name}]), not {_kind(table)}")
    for key in table:
        if key not in KEYS:
            raise fail((*at, key), f"unknown key {key!r} in campaign {name!r}; the keys are: {', '.join(sorted(KEYS))}")

    def fail_key(key: str) -> Callable[[str], CampaignsError]:
        """How a value of the campaign's `key` fails: at its line, naming the campaign and the key."""
        return lambda m: fail((*at, key), f"campaign {name!r}: {key} {m}")

    if "notes" not in table:
        raise fail(at, f"campaign {name!r} has no `notes`: name its notes folder")
    notes = _path(table["notes"], base, fail_key("notes"))
    if not notes.is_dir():
        state = "is not a folder" if notes.exists() else "does not exist"
        raise fail((*at, "notes"), f"campaign {name!r}: the notes folder {notes} {state}")
    data_dir = _path(table["data"], base, fail_key("data")) if "data" in table else None
    channels = _ids(table, "channels", fail_key("channels"))
    gm_channels = _ids(table, "gm_channels", fail_key("gm_channels"))
    gm_roles = None
    if "gm_roles" in table:
        roles = table["gm_roles"]
        if not isinstance(roles, list) or not all(isinstance(r, (str, int)) and not isinstance(r, bool) for r in roles):
            raise fail((*at, "gm_roles"), f"campaign {name!r}: gm_roles must be a list of role names or ids, "
                                          f'e.g. ["gm", "dm"], not {_kind(roles)}')
        gm_roles = tuple(str(r).strip().casefold() for r in roles)
    model = table.get("model")
    if "model" in table and (not isinstance(model, str) or not model.strip()):
        raise fail((*at, "model"), f"campaign {name!r}: model must be an Ollama model name, e.g. \"qwen2.5:14b\"")
    announce = table.get("announce_channel")
    if "announce_channel" in table and not _is_id(announce):
        raise fail((*at, "announce_channel"), f"campaign {name!r}: announce_channel must be a channel id "
                                              f"(a positive whole number without quotes), not {_kind(announce)}")
    policy = {key: _strings(table, key, fail_key(key)) for key in POLICY_KEYS}
    return Campaign(name, notes, data_dir, channels or (), gm_roles, gm_channels, model, announce, **policy)


def _claim_data(campaign: Campaign, data_root: Path | None, owner: dict[Path, str], fail: Fail) -> None:
    """Its index folder as it will be: `data`, else ORACLE_DATA_DIR/NAME. Two campaigns in one folder
    would overwrite each other's index, game-master-only chunks included."""
    name = campaign.name
    folder = campaign.data if campaign.data is not None else (data_root / name if data_root is not None else None)
    if folder is None:
        return
    other = owner.get(folder.resolve())
    if other is not None:
        default = "" if campaign.data is not None else f" (its default, ORACLE_DATA_DIR/{name})"
        raise fail(("campaigns", name, "data") if campaign.data is not None else ("campaigns", name),
                   f"campaigns {other!r} and {name!r} share the index folder {folder}{default}: give each its own `data`")
    owner[folder.resolve()] = name


def _claim_channels(campaign: Campaign, owner: dict[int, str], fail: Fail) -> None:
    """A channel answers for one campaign."""
    for key, ids in (("channels", campaign.channels), ("gm_channels", campaign.gm_channels)):
        for channel in ids or ():
            other = owner.get(channel)
            if other is not None and other != campaign.name:
                raise fail(("campaigns", campaign.name, key), f"channel {channel} is mapped to both {other!r} and "
                                                              f"{campaign.name!r}: a channel answers for one campaign")
            owner[channel] = campaign.name


def _check_several(campaigns: list[Campaign], channel_owner: dict[int, str], fail: Fail) -> None:
    for campaign in campaigns:
        # What is new in one campaign is no news for another's players.
        owner = channel_owner.get(campaign.announce_channel or 0, campaign.name)
        if owner != campaign.name:
            raise fail(("campaigns", campaign.name, "announce_channel"),
                       f"campaign {campaign.name!r}: announce_channel {campaign.announce_channel} is a channel of "
                       f"campaign {owner!r}, whose players would read what is new in {campaign.name!r}")
        # ORACLE_GM_ROLES for all would make a game master of one campaign the game master of every
        # campaign that forgot its own: with several, each names its own (or none: `gm_roles = []`).
        if campaign.gm_roles is None:
            raise fail(("campaigns", campaign.name),
                       f"campaign {campaign.name!r} has no `gm_roles`: with several campaigns each names its own "
                       f'game-master roles, e.g. gm_roles = ["gm-{campaign.name}"] (ORACLE_GM_ROLES serves one campaign)')


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


def _path(value: object, base: Path, fail: Callable[[str], CampaignsError]) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise fail(f"must be a folder path in quotes, not {_kind(value)}")
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _ids(table: dict[str, Any], key: str, fail: Callable[[str], CampaignsError]) -> tuple[int, ...] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(_is_id(v) for v in value):
        raise fail(f"must be a list of channel or category ids (positive whole numbers without quotes), "
                   f"e.g. [1234, 5678], not {_kind(value)}")
    return tuple(value)


def _strings(table: dict[str, Any], key: str, fail: Callable[[str], CampaignsError]) -> tuple[str, ...] | None:
    """A list of globs or heading names: strings in quotes, none of them blank."""
    if key not in table:
        return None
    value = table[key]
    example = '["GM Notes", "Secrets and Clues"]' if key == "gm_headings" else '["Session Notes/", "Handouts/**"]'
    if not isinstance(value, list):
        raise fail(f"must be a list of strings in quotes, e.g. {example}, not {_kind(value)}")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise fail(f"must be a list of strings in quotes, e.g. {example}, not a list holding {item!r}")
    return tuple(item.strip() for item in value)


def _kind(value: object) -> str:
    if isinstance(value, list):
        inner = next((v for v in value if not _is_id(v)), None)
        return f"a list holding {inner!r}" if inner is not None else "a list"
    return {str: "a string", bool: "true/false", int: "a number", float: "a number", dict: "a table"}.get(
        type(value), type(value).__name__) + (f" ({value!r})" if isinstance(value, (str, int, float)) else "")


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


def _line_of(lines: dict[tuple[str, ...], int], where: tuple[str, ...]) -> int | None:
    """The line of `where`, else of the nearest table holding it."""
    for i in range(len(where), 0, -1):
        if where[:i] in lines:
            return lines[where[:i]]
    return None
