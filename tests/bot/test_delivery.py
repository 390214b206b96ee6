"""Where an interaction's answer goes (`bot.delivery.InteractionReply`), against small doubles
(tests/bot/doubles.py): through the token while Discord keeps it, into the channel (or the asker's
direct messages) once it is late or refused. End to end, with a bot process and the fake Discord's
15-minute tokens: tests/bot/test_service.py."""
from __future__ import annotations

import datetime as dt

import discord
import pytest

from bot.delivery import LATE, LATE_DIRECT, MOVED_BELOW, UNDELIVERED, InteractionReply, Undelivered
from tests.bot.doubles import TOKEN_GONE, Calls, ForumChannel, Interaction, Member, TextChannel, http_error

LATER = LATE + dt.timedelta(minutes=1)


def asked(*, age: dt.timedelta = dt.timedelta(0), channel=None) -> tuple[Calls, Interaction]:
    calls = Calls()
    return calls, Interaction(calls, Member(calls, 5), channel or TextChannel(calls, 10), age=age)


async def test_in_time_the_answer_goes_through_the_token():
    calls, interaction = asked()
    reply = InteractionReply(interaction, private=False)
    await reply.edit(content="📚 Searching the notes…")
    first = await reply.first("The monk.", None, None)
    await reply.more("More.", None, None)
    assert [(s.call, s.content) for s in calls] == [
        ("edit_original", "📚 Searching the notes…"), ("edit_original", "The monk."), ("followup", "More.")]
    assert first is interaction.original and calls[-1].fields["ephemeral"] is False


async def test_a_private_answer_stays_ephemeral_in_its_follow_ups():
    calls, interaction = asked()
    await InteractionReply(interaction, private=True).more("More.", None, None)
    assert calls.of("followup")[0].fields["ephemeral"] is True


@pytest.mark.parametrize("code", [10015, 50027])  # Unknown Webhook, Invalid Webhook Token
async def test_a_refused_token_moves_the_answer_into_the_channel_below_the_deferred_reply(code):
    calls, interaction = asked()
    reply = InteractionReply(interaction, private=False)
    await reply.edit(content="✍️ Writing the answer…")
    calls.errors.append(http_error(code, 401 if code == 50027 else 404))
    first = await reply.first("The monk.", None, None)
    await reply.more("More.", None, None)
    await reply.edit(content="too late")  # nothing more through the token once it was refused
    assert [(s.call, s.target, s.content) for s in calls] == [
        ("edit_original", 77, "✍️ Writing the answer…"),
        ("edit_original", 77, "The monk."),  # refused
        ("send", 10, "The monk."),
        ("edit", interaction.original.id, MOVED_BELOW),  # the deferred reply points below
        ("send", 10, "More."),
    ]
    reference = calls.of("send")[0].fields["reference"]
    assert reference.message_id == interaction.original.id and "reference" not in calls.of("send")[1].fields
    assert first.content == "The monk."


async def test_past_the_margin_nothing_is_tried_through_the_token():
    calls, interaction = asked(age=LATER)
    reply = InteractionReply(interaction, private=False)
    await reply.edit(content="✍️ Writing the answer…")
    await reply.tell("No thread was opened.")
    await reply.first("The monk.", None, None)
    assert [(s.call, s.content) for s in calls] == [("send", "The monk.")]  # no reply of its own to point from


async def test_a_late_private_answer_goes_to_the_askers_direct_messages_only():
    calls, interaction = asked()
    reply = InteractionReply(interaction, private=True)
    await reply.edit(content="✍️ Writing the answer…")
    calls.errors.append(http_error(TOKEN_GONE))
    await reply.first("The secret.", None, None)
    await reply.more("More.", None, None)
    assert [(s.call, s.target) for s in calls][2:] == [("dm", 5), ("dm", 5), ("dm", 5)]  # never in the channel
    assert [s.content for s in calls.of("dm")] == [LATE_DIRECT.format(where="<#10>"), "The secret.", "More."]
    assert interaction.extras["delivered"]


async def test_a_late_private_answer_to_closed_direct_messages_tells_the_channel_nothing_of_it():
    calls, interaction = asked()
    reply = InteractionReply(interaction, private=True)
    calls.errors.append(http_error(TOKEN_GONE))
    calls.errors.append(http_error(50007, 403, "Cannot send messages to this user"))
    with pytest.raises(Undelivered):
        await reply.first("The secret.", None, None)
    [notice] = calls.of("send")
    assert notice.target == 10 and notice.content == UNDELIVERED.format(asker="<@5>")
    assert "secret" not in notice.content and notice.fields["allowed_mentions"].users == [interaction.user]
    assert not interaction.extras.get("delivered")


async def test_late_in_a_place_the_bot_cannot_post_to_it_posts_by_the_channels_id():
    calls, interaction = asked(age=LATER, channel=ForumChannel(12))
    await InteractionReply(interaction, private=False).first("The monk.", None, None)
    assert [(s.call, s.target) for s in calls] == [("send", 12)]


async def test_any_other_error_is_not_mistaken_for_a_late_token():
    calls, interaction = asked()
    reply = InteractionReply(interaction, private=False)
    calls.errors.append(http_error(0, 500, "Internal Server Error"))
    with pytest.raises(discord.HTTPException):
        await reply.first("The monk.", None, None)
    assert not reply.late


async def test_a_note_to_the_asker_is_private_and_a_refusal_of_it_is_dropped():
    calls, interaction = asked()
    reply = InteractionReply(interaction, private=False)
    await reply.tell("No thread was opened.")
    calls.errors.append(http_error(50013, 403, "Missing Permissions"))
    await reply.tell("Again.")
    assert [(s.call, s.fields["ephemeral"]) for s in calls] == [("followup", True), ("followup", True)]
