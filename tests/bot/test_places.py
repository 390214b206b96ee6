"""Each campaign's [campaigns.NAME.discord] table: routing by channel, parent, category; its game
masters; every bad table named by its line, before the bot connects."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from bot.places import Place, Places
from oracle import Campaigns, CampaignsError, Settings
from tests.conftest import TWO_CAMPAIGNS

GOOD = TWO_CAMPAIGNS.format(friday="notes/friday")


def places_of(tmp_path: Path, text: str) -> Places:
    for folder in ("notes/tuesday", "notes/friday"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    path = tmp_path / "campaigns.toml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return Places.of(Campaigns.load(path))


def test_a_good_table_gives_each_campaign_its_place(tmp_path):
    places = places_of(tmp_path, GOOD)
    assert Place("tuesday", (1234, 5678), ("gm", "dm"), (9012,), 4444) == places["tuesday"]
    assert Place("friday", (2222, 3333), ()) == places["friday"]


def test_routing_by_channel_then_thread_parent_then_category(tmp_path):
    places = places_of(tmp_path, GOOD)
    assert "tuesday" == places.route(1234)
    assert "tuesday" == places.route(9012)  # a game-master channel is the campaign's too
    assert "friday" == places.route(777, parent_id=2222)  # a thread in friday's channel
    assert "friday" == places.route(777, parent_id=888, category_id=3333)
    assert "tuesday" == places.route(1234, parent_id=2222, category_id=3333)  # the channel wins
    assert None is places.route(777, parent_id=888, category_id=999)
    assert None is places.route(None)


def test_the_default_campaign_answers_everywhere(tmp_path):
    places = Places.of(Campaigns.single(Settings(_env_file=None, notes_dir=tmp_path, data_dir=tmp_path / "var")))
    assert "default" == places.route(123, 456, 789) == places.route(None)
    assert Place("default") == places["default"]


def test_game_master_roles_and_channels_are_the_campaigns_own(tmp_path):
    places = places_of(tmp_path, GOOD)
    tuesday, friday = places["tuesday"], places["friday"]
    assert tuesday.is_gm_role(["Dm", "players"], default=["storyteller"])
    assert not tuesday.is_gm_role(["storyteller"], default=["storyteller"])
    assert not friday.is_gm_role(["Storyteller"], default=["storyteller"])  # gm_roles = []: nobody's
    assert Place("solo").is_gm_role(["Storyteller"], default=["storyteller"])  # none: the bot's
    assert tuesday.is_gm_channel([777, 9012], default=[1])
    assert not tuesday.is_gm_channel([1], default=[1])
    assert friday.is_gm_channel([None, 1], default=[1])


A = '[campaigns.a]\nnotes = "notes/tuesday"\n'


@pytest.mark.parametrize(
    "text, line, message",
    [
        (A + "[campaigns.a.discord]\nchanels = [1]\n", 4,
         r"unknown key 'chanels' in \[campaigns.a.discord\]; the keys are: channels, gm_roles, gm_channels"),
        (A + '[campaigns.a.discord]\nchannels = [1, "2"]\n', 4,
         "campaign 'a': channels must be a list of channel or category ids .*not a list holding '2'"),
        (A + "discord.channels = 12\n", 3, "channels must be a list .*not a number \\(12\\)"),
        (A + "discord.channels = [true]\n", 3, "channels must be a list .*not a list holding True"),
        (A + "discord.gm_channels = [0]\n", 3, "gm_channels must be a list .*not a list holding 0"),
        (A + 'discord.gm_roles = "gm"\n', 3, "gm_roles must be a list of role names"),
        (A + 'discord.announce_channel = "12"\n', 3, "announce_channel must be a channel id"),
        (A + "discord.channels = [1, 2]\n\n[campaigns.b]\nnotes = \"notes/friday\"\ndiscord.gm_roles = []\n"
         "discord.gm_channels = [2]\n", 8, "channel 2 is mapped to both 'a' and 'b'"),
    ],
)
def test_a_bad_table_names_the_file_and_the_line(tmp_path, text, line, message):
    with pytest.raises(CampaignsError) as caught:
        places_of(tmp_path, text)
    error = str(caught.value)
    assert error.startswith(f"{tmp_path / 'campaigns.toml'}, line {line}: "), error
    assert re.search(message, error), error


@pytest.mark.parametrize("roles_a, roles_b, line", [
    ("", 'discord.gm_roles = ["gm-b"]\n', 1),
    ('discord.gm_roles = ["gm-a"]\n', "", 4),
    ('[campaigns.a.discord]\nchannels = [1]\n', 'discord.gm_roles = ["gm-b"]\n', 3),
])
def test_with_several_campaigns_each_names_its_game_masters(tmp_path, roles_a, roles_b, line):
    """The bot-wide ORACLE_GM_ROLES for a campaign that names none would make the game master of one
    campaign the game master of every such campaign: refused, naming the campaign's line."""
    text = f'{A}{roles_a}[campaigns.b]\nnotes = "notes/friday"\n{roles_b}'
    missing = "a" if "gm-a" not in roles_a else "b"
    with pytest.raises(CampaignsError, match=rf'campaigns.toml, line {line}: campaign {missing!r} has no `gm_roles` '
                                             rf'in \[campaigns.{missing}.discord\]: with several campaigns each names '
                                             rf'its own .*\["gm-{missing}"\]'):
        places_of(tmp_path, text)
    alone = places_of(tmp_path, A)  # one campaign: the bot's roles
    assert alone["a"].is_gm_role(["GM"], default=["gm"])


def test_an_announce_channel_of_another_campaign_is_refused(tmp_path):
    text = (A + "discord.channels = [1]\ndiscord.gm_roles = []\n[campaigns.b]\nnotes = \"notes/friday\"\n"
            "discord.channels = [2]\ndiscord.gm_roles = []\ndiscord.announce_channel = 1\n")
    with pytest.raises(CampaignsError, match=r"line 9: campaign 'b': announce_channel 1 is a channel of campaign 'a'"):
        places_of(tmp_path, text)
    assert 3 == places_of(tmp_path, text.replace("announce_channel = 1", "announce_channel = 3"))["b"].announce_channel


def test_the_core_reads_the_file_without_the_bots_checks(tmp_path):
    """`oracle ingest` and the other commands read the campaigns; only the bot needs its table right."""
    (tmp_path / "notes" / "tuesday").mkdir(parents=True)
    path = tmp_path / "campaigns.toml"
    path.write_text(A + 'discord.channels = "soon"\n', encoding="utf-8")
    assert ["a"] == Campaigns.load(path).names()
    with pytest.raises(CampaignsError, match="line 3: campaign 'a': channels must be a list"):
        Places.of(Campaigns.load(path))
