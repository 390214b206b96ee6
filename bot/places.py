"""Where each campaign sits on Discord: its `[campaigns.NAME.discord]` table, and routing by channel.

```toml
[campaigns.tuesday.discord]
channels = [1234, 5678]         # channel or category ids it answers in
gm_roles = ["gm", "dm"]         # role names or ids of its game masters (default: ORACLE_GM_ROLES)
gm_channels = [9012]            # where its game masters' answers may include secrets (it answers there too)
announce_channel = 3456         # where the bot says what a reingest brought
```

The core reads the rest of the campaigns file (`oracle.campaigns`); this table is checked here, with
the same one-sentence errors at the key's line, before the bot connects. Routing: the channel, then
the thread's parent, then the category; the single default campaign (no file) answers everywhere
with the bot's own game-master roles and channels.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from oracle import Campaign, Campaigns, described

TABLE = "discord"


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class DiscordTable(BaseModel):
    """One [campaigns.NAME.discord] table; each check raises the sentence the game master reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channels: tuple[int, ...] = ()
    gm_roles: tuple[str, ...] | None = None  # None: the bot's ORACLE_GM_ROLES
    gm_channels: tuple[int, ...] | None = None  # None: the bot's ORACLE_GM_CHANNELS
    announce_channel: int | None = None

    @field_validator("channels", "gm_channels", mode="before")
    @classmethod
    def _ids(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, list) or not all(_is_id(v) for v in value):
            raise ValueError(f"{info.field_name} must be a list of channel or category ids (positive whole numbers "
                             f"without quotes), e.g. [1234, 5678], not {described(value, fits=_is_id)}")
        return value

    @field_validator("gm_roles", mode="before")
    @classmethod
    def _roles(cls, value: object) -> object:
        if not isinstance(value, list) or not all(isinstance(r, (str, int)) and not isinstance(r, bool) for r in value):
            raise ValueError(f'gm_roles must be a list of role names or ids, e.g. ["gm", "dm"], not {described(value)}')
        return tuple(str(r).strip().casefold() for r in value)

    @field_validator("announce_channel", mode="before")
    @classmethod
    def _announce(cls, value: object) -> object:
        if not _is_id(value):
            raise ValueError("announce_channel must be a channel id (a positive whole number without quotes), "
                             f"not {described(value)}")
        return value


@dataclass(frozen=True)
class Place:
    """Where one campaign answers, and who its game masters are."""

    name: str
    channels: tuple[int, ...] = ()
    gm_roles: tuple[str, ...] | None = None
    gm_channels: tuple[int, ...] | None = None
    announce_channel: int | None = None

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
class Places:
    """Every campaign's place, and which campaign a channel belongs to."""

    places: dict[str, Place]
    single: bool = False  # no campaigns file: the default campaign answers everywhere
    by_channel: dict[int, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, campaigns: Campaigns) -> Places:
        """Each campaign's [campaigns.NAME.discord] table, checked; a bad one is a `CampaignsError` at its line."""
        places = {c.name: _place(c, campaigns) for c in campaigns}
        owner: dict[int, str] = {}
        for place in places.values():
            _claim_channels(place, owner, campaigns)
        if len(places) > 1:
            for place in places.values():
                _check_among_several(place, owner, campaigns)
        return cls(places, campaigns.is_single, owner)

    def __getitem__(self, name: str) -> Place:
        return self.places[name]

    def route(self, channel_id: int | None, parent_id: int | None = None, category_id: int | None = None) -> str | None:
        """The campaign a message belongs to: by its channel, else its thread's parent channel, else
        the category; None where no campaign is mapped. The single default campaign answers everywhere."""
        if self.single:
            return next(iter(self.places))
        for key in (channel_id, parent_id, category_id):
            if key is not None and key in self.by_channel:
                return self.by_channel[key]
        return None


def _place(campaign: Campaign, campaigns: Campaigns) -> Place:
    at = ("campaigns", campaign.name, TABLE)
    try:
        table = DiscordTable.model_validate(campaign.front(TABLE))
    except ValidationError as exc:
        keys = ", ".join(DiscordTable.model_fields)
        raise campaigns.invalid(exc, at, campaign.name, f"in [campaigns.{campaign.name}.{TABLE}]; the keys are: {keys}") from None
    return Place(campaign.name, table.channels, table.gm_roles, table.gm_channels, table.announce_channel)


def _claim_channels(place: Place, owner: dict[int, str], campaigns: Campaigns) -> None:
    """A channel answers for one campaign."""
    for key, ids in (("channels", place.channels), ("gm_channels", place.gm_channels)):
        for channel in ids or ():
            other = owner.get(channel)
            if other is not None and other != place.name:
                raise campaigns.error_at(("campaigns", place.name, TABLE, key),
                                         f"channel {channel} is mapped to both {other!r} and {place.name!r}: "
                                         "a channel answers for one campaign")
            owner[channel] = place.name


def _check_among_several(place: Place, owner: dict[int, str], campaigns: Campaigns) -> None:
    # What is new in one campaign is no news for another's players.
    other = owner.get(place.announce_channel or 0, place.name)
    if other != place.name:
        raise campaigns.error_at(("campaigns", place.name, TABLE, "announce_channel"),
                                 f"campaign {place.name!r}: announce_channel {place.announce_channel} is a channel of "
                                 f"campaign {other!r}, whose players would read what is new in {place.name!r}")
    # ORACLE_GM_ROLES for all would make a game master of one campaign the game master of every
    # campaign that forgot its own: with several, each names its own (or none: `gm_roles = []`).
    if place.gm_roles is None:
        raise campaigns.error_at(("campaigns", place.name, TABLE),
                                 f"campaign {place.name!r} has no `gm_roles` in [campaigns.{place.name}.{TABLE}]: with "
                                 "several campaigns each names its own game-master roles, e.g. "
                                 f'gm_roles = ["gm-{place.name}"] (ORACLE_GM_ROLES serves one campaign)')

