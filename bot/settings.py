"""The bot's own settings. The core never sees them, so the token cannot reach a trace or a log."""
from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from oracle import parse_list


class BotSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True)

    token: SecretStr = Field(SecretStr(""), validation_alias="DISCORD_TOKEN")
    guild_id: int | None = Field(None, validation_alias="DISCORD_GUILD_ID")
    gm_roles: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["gm", "dm", "game master", "dungeon master"], validation_alias="ORACLE_GM_ROLES"
    )
    gm_channels: Annotated[list[int], NoDecode] = Field(default_factory=list, validation_alias="ORACLE_GM_CHANNELS")
    # Flood control, per member (bot/flood.py): a burst of questions at once, then one more every
    # `ORACLE_FLOOD_SECONDS`; past that a question waits (⏳) and at most `ORACLE_FLOOD_WAITING` wait.
    flood_burst: int = Field(3, validation_alias="ORACLE_FLOOD_BURST", ge=1)
    flood_seconds: float = Field(20.0, validation_alias="ORACLE_FLOOD_SECONDS", ge=0)
    flood_waiting: int = Field(2, validation_alias="ORACLE_FLOOD_WAITING", ge=0)
    # Messages in an Oracle thread starting with one of these characters are other bots' commands.
    ignore_prefixes: str = Field("!?.$;", validation_alias="ORACLE_IGNORE_PREFIXES")
    # Where players are told what is new in the notes after a reingest (a channel id); unset: nowhere.
    announce_channel: int | None = Field(None, validation_alias="ORACLE_ANNOUNCE_CHANNEL")
    history_turns: int = Field(6, validation_alias="ORACLE_HISTORY_TURNS", ge=0)
    # Seconds between edits while the model writes, per channel: every answer streaming in a channel
    # shares them (Discord limits edits per channel: about five in five seconds).
    stream_edit_seconds: float = Field(1.5, validation_alias="ORACLE_STREAM_EDIT_SECONDS", ge=0)
    # Questions answered or waiting at once, over every member and campaign: one more is told to ask
    # again at once instead of waiting for minutes.
    max_questions: int = Field(12, validation_alias="ORACLE_MAX_QUESTIONS", ge=1)
    # On SIGTERM (systemctl stop), how long questions under way may take to finish before each is
    # told to ask again: below the unit's TimeoutStopSec, which then kills the process.
    stop_seconds: float = Field(20.0, validation_alias="ORACLE_STOP_SECONDS", ge=0)

    @field_validator("guild_id", "announce_channel", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if value in ("", None) else value

    @field_validator("gm_roles", mode="before")
    @classmethod
    def _roles(cls, value: object) -> object:
        value = parse_list(value)
        return [str(v).strip().casefold() for v in value] if isinstance(value, list) else value

    @field_validator("gm_channels", mode="before")
    @classmethod
    def _channels(cls, value: object) -> object:
        return parse_list(value)
