"""The buttons under every answer: 📜 Show sources, 👍 and 👎. They keep working after a restart.

Each button is a `discord.ui.DynamicItem`: its custom id names the campaign and the answer
(`oracle:sources:tuesday:42`, `oracle:vote:tuesday:42:up`), the answer lives in that campaign's
journal (`oracle.journal`, SQLite), and the bot
registers the templates once at startup, so a click on a message posted by an earlier process is
matched and handled like any other. What a click does lives in the cog (`OracleCog.show_sources`,
`OracleCog.record_vote`); the buttons only carry the answer's id there.
"""
from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

import discord
from discord.ext import commands

from oracle import texts

from .errors import report_failure


@runtime_checkable
class AnswerActions(Protocol):
    async def show_sources(self, interaction: discord.Interaction, campaign: str, answer_id: int) -> None: ...

    async def record_vote(self, interaction: discord.Interaction, campaign: str, answer_id: int, vote: int) -> None: ...


def actions(interaction: discord.Interaction) -> AnswerActions:
    client = interaction.client
    cog = client.get_cog("OracleCog") if isinstance(client, commands.Bot) else None
    if not isinstance(cog, AnswerActions):
        raise RuntimeError("the Oracle's commands are not loaded")
    return cog


CAMPAIGN = r"(?P<campaign>[a-z0-9][a-z0-9_-]{0,23})"


class SourcesButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
                    template=rf"oracle:sources:{CAMPAIGN}:(?P<answer>\d+)"):
    def __init__(self, campaign: str, answer_id: int, label: str = "Show sources") -> None:
        # A restored button only dispatches clicks; the message keeps the label it was sent with.
        self.campaign = campaign
        self.answer_id = answer_id
        super().__init__(discord.ui.Button(
            label=label, emoji="📜", style=discord.ButtonStyle.secondary,
            custom_id=f"oracle:sources:{campaign}:{answer_id}",
        ))

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                             match: re.Match[str], /) -> SourcesButton:
        return cls(match["campaign"], int(match["answer"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await actions(interaction).show_sources(interaction, self.campaign, self.answer_id)
        except Exception as exc:  # one sentence, not "This interaction failed"
            await report_failure(interaction, exc)


class VoteButton(discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]],
                 template=rf"oracle:vote:{CAMPAIGN}:(?P<answer>\d+):(?P<vote>up|down)"):
    def __init__(self, campaign: str, answer_id: int, vote: str) -> None:
        self.campaign = campaign
        self.answer_id = answer_id
        self.vote = vote
        super().__init__(discord.ui.Button(
            emoji="👍" if vote == "up" else "👎", style=discord.ButtonStyle.secondary,
            custom_id=f"oracle:vote:{campaign}:{answer_id}:{vote}",
        ))

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Item[Any],
                             match: re.Match[str], /) -> VoteButton:
        return cls(match["campaign"], int(match["answer"]), match["vote"])

    async def callback(self, interaction: discord.Interaction) -> None:
        try:
            await actions(interaction).record_vote(interaction, self.campaign, self.answer_id,
                                                   1 if self.vote == "up" else -1)
        except Exception as exc:  # one sentence, not "This interaction failed"
            await report_failure(interaction, exc)


DYNAMIC_ITEMS = (SourcesButton, VoteButton)


def answer_view(campaign: str, answer_id: int, *, sources: bool, language: str = "en") -> discord.ui.View:
    """The buttons of one answer, labelled in the answer's language; no Show sources when it cites
    nothing."""
    view = discord.ui.View(timeout=None)
    if sources:
        view.add_item(SourcesButton(campaign, answer_id, texts(language).show_sources))
    view.add_item(VoteButton(campaign, answer_id, "up"))
    view.add_item(VoteButton(campaign, answer_id, "down"))
    return view
