"""The campaigns file as the core reads it: a good one, every bad one named by its line, each campaign's
settings and policy. Its Discord tables are the bot's (tests/bot/test_places.py)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from oracle.campaigns import Campaign, Campaigns, CampaignsError, load_campaigns
from oracle.settings import Settings
from tests.conftest import TWO_CAMPAIGNS


def write(tmp_path: Path, text: str, folders: tuple[str, ...] = ("notes/tuesday", "notes/friday")) -> Path:
    for folder in folders:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    path = tmp_path / "conf" / "campaigns.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def base(tmp_path: Path, **overrides) -> Settings:
    return Settings(_env_file=None, notes_dir=tmp_path / "solo", data_dir=tmp_path / "var", **overrides)


def test_a_good_file_resolves_paths_beside_it(tmp_path):
    friday_notes = tmp_path / "notes" / "friday"
    path = write(tmp_path, TWO_CAMPAIGNS.format(friday=friday_notes), ("conf/notes/tuesday", "notes/friday"))
    campaigns = load_campaigns(path)
    conf = path.parent
    assert [
        Campaign("tuesday", conf / "notes/tuesday", conf / "var/tuesday", "qwen2.5:7b"),
        Campaign("friday", friday_notes),
    ] == list(campaigns)
    # The Discord tables are kept as the file gives them, for the bot to check.
    assert ({"channels": [1234, 5678], "gm_roles": ["GM", "dm"], "gm_channels": [9012], "announce_channel": 4444},
            {"channels": [2222, 3333], "gm_roles": []}) == tuple(c.front("discord") for c in campaigns)
    assert {} == Campaign("solo", Path("notes")).front("discord")
    assert (["tuesday", "friday"], path, False) == (campaigns.names(), campaigns.source, campaigns.is_single)


def test_a_campaigns_settings(tmp_path):
    path = write(tmp_path, TWO_CAMPAIGNS.format(friday=tmp_path / "notes" / "friday"), ("conf/notes/tuesday", "notes/friday"))
    tuesday, friday = load_campaigns(path)
    settings = base(tmp_path, model="qwen2.5:14b")
    own = tuesday.settings(settings)
    assert (path.parent / "notes/tuesday", path.parent / "var/tuesday", "qwen2.5:7b", "") == (
        own.notes_dir, own.data_dir, own.model, own.collection_prefix)
    other = friday.settings(settings)
    assert (tmp_path / "var" / "friday", "qwen2.5:14b") == (other.data_dir, other.model)
    # On one Chroma server, each campaign's collections carry its name.
    shared = base(tmp_path, chroma_url="http://127.0.0.1:8000")
    assert ("tuesday-", "friday-") == (tuesday.settings(shared).collection_prefix, friday.settings(shared).collection_prefix)


def test_without_the_file_the_default_campaign_is_todays_settings(tmp_path):
    settings = base(tmp_path)
    campaigns = Campaigns.from_settings(settings)
    assert campaigns.is_single and ["default"] == campaigns.names()
    default = campaigns.get("default")
    assert (settings.notes_dir, settings.data_dir) == (default.settings(settings).notes_dir,
                                                       default.settings(settings).data_dir)
    assert settings.model_dump() == default.settings(settings).model_dump()  # exactly today's settings


def test_an_unknown_campaign_name_lists_the_names(tmp_path):
    path = write(tmp_path, TWO_CAMPAIGNS.format(friday=tmp_path / "notes" / "friday"), ("conf/notes/tuesday", "notes/friday"))
    with pytest.raises(CampaignsError, match=r"no campaign 'sunday' in .*campaigns.toml; the campaigns are: tuesday, friday"):
        load_campaigns(path).get("sunday")
    with pytest.raises(CampaignsError, match="no ORACLE_CAMPAIGNS file.*the campaigns are: default"):
        Campaigns.single(base(tmp_path)).get("tuesday")


@pytest.mark.parametrize(
    "text, line, message",
    [
        ('[campaigns.a]\nnotes = "notes/tuesday"\nchanels = [1]\n', 3, "unknown key 'chanels' in campaign 'a'"),
        # A key the bot reads, written where the core reads: the message says where the bot's table is.
        ('[campaigns.a]\nnotes = "notes/tuesday"\nchannels = [1]\n', 3,
         "unknown key 'channels' in campaign 'a'; the keys are: data, discord, gm_headings, gm_notes, model, notes, "
         "player_notes \\(a key of the bot goes in \\[campaigns.a.discord\\]\\)$"),
        ('[campaigns.a]\nnotes = "notes/tuesday"\ndiscord = [1]\n', 3,
         "campaigns.a.discord must be a table \\(\\[campaigns.a.discord\\]\\), not a list"),
        ('[campaigns.a]\nnotes = "notes/tuesday"\nmodel = 3\n', 3, "model must be an Ollama model name"),
        ('[campaigns.a]\nnotes = 3\n', 2, "notes must be a folder path in quotes"),
        ('[campaigns.a]\nnotes = "notes/sunday"\n', 2, "the notes folder .*notes/sunday does not exist"),
        ('[campaigns.a]\nnotes = "campaigns.toml"\n', 2, "the notes folder .*campaigns.toml is not a folder"),
        ('[[campaigns]]\nnotes = "notes/tuesday"\n', 1, "a \\[campaigns.NAME\\] table, named in its header: not \\[\\[campaigns"),
        ('campaigns.a = "x"\n', 1, "campaigns.a must be a table \\(\\[campaigns.a\\]\\), not a string \\('x'\\)$"),
        ('# comment\n[campaigns.a]\ndata = "var/a"\n', 2, "campaign 'a' has no `notes`"),
        ('[campaigns.Tuesday]\nnotes = "notes/tuesday"\n', 1, "campaign name 'Tuesday': use 1-24 lowercase"),
        ('[campaigns."two words"]\nnotes = "notes/tuesday"\n', 1, "campaign name 'two words'"),
        ('[campaigns.a]\nnotes = "notes/tuesday"\ndata = "var/x"\n[campaigns.b]\nnotes = "notes/friday"\n'
         'data = "var/x/"\n', 6, "campaigns 'a' and 'b' share the index folder"),
        ('[campaign.a]\nnotes = "notes/tuesday"\n', 1, "unknown key 'campaign': the file holds \\[campaigns.NAME\\] tables only"),
        ('[campaigns]\n', 1, "no campaign: add a \\[campaigns.NAME\\] table"),
        ('campaigns.a.notes = "notes/tuesday"\ncampaigns.a.colour = "red"\n', 2, "unknown key 'colour'"),
        ('[campaigns.a]\nnotes = "notes/tuesday"\ngm_notes = ["x"\n', 3, "not valid TOML: Unclosed array \\(at the end of the file\\)"),
        ('[campaigns.a]\nnotes = "notes/tuesday"\nnotes = "again"\n', 3, "not valid TOML: Cannot overwrite a value \\(column 16\\)"),
    ],
)
def test_a_bad_file_names_the_file_and_the_line(tmp_path, text, line, message):
    path = tmp_path / "campaigns.toml"
    for folder in ("notes/tuesday", "notes/friday"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CampaignsError) as caught:
        load_campaigns(path)
    error = str(caught.value)
    assert error.startswith(str(path)), error
    assert f", line {line}:" in error, error
    assert __import__("re").search(message, error), error


def test_a_missing_or_unreadable_file(tmp_path):
    with pytest.raises(CampaignsError, match=r"campaigns file .*nowhere.toml \(ORACLE_CAMPAIGNS\) does not exist"):
        Campaigns.from_settings(base(tmp_path, campaigns=tmp_path / "nowhere.toml"))
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[campaigns.a]\nnotes = "caf\xe9"\n')
    with pytest.raises(CampaignsError, match="not UTF-8"):
        load_campaigns(bad)


def test_the_setting_reads_the_file_path(monkeypatch, tmp_path):
    monkeypatch.setenv("ORACLE_CAMPAIGNS", str(tmp_path / "c.toml"))
    assert tmp_path / "c.toml" == Settings(_env_file=None).campaigns
    monkeypatch.setenv("ORACLE_CAMPAIGNS", "")
    assert None is Settings(_env_file=None).campaigns


@pytest.mark.parametrize("first, second, line", [
    ('[campaigns.a]\nnotes = "../notes/tuesday"\ndata = "../var/b"\n',
     '[campaigns.b]\nnotes = "../notes/friday"\n', 4),
    ('[campaigns.b]\nnotes = "../notes/friday"\n',
     '[campaigns.a]\nnotes = "../notes/tuesday"\ndata = "../var/b/"\n', 5),
])
def test_a_data_folder_that_is_another_campaigns_default_is_refused(tmp_path, first, second, line):
    """Without `data` a campaign's index is ORACLE_DATA_DIR/NAME: naming that folder for another
    campaign would have the two overwrite each other's index, game-master-only chunks and all."""
    path = write(tmp_path, first + second)
    with pytest.raises(CampaignsError) as caught:
        Campaigns.from_settings(base(tmp_path, campaigns=path))
    error = str(caught.value)
    assert f"{path}, line {line}: campaigns " in error, error
    assert "share the index folder" in error and str(tmp_path / "var" / "b") in error.replace("conf/../", ""), error
    # Elsewhere, each in its own folder: accepted.
    elsewhere = base(tmp_path, campaigns=path).model_copy(update={"data_dir": tmp_path / "other"})
    assert ["a", "b"] == sorted(Campaigns.from_settings(elsewhere).names())


# -- each campaign's policy of who reads what ------------------------------------------------------

POLICIES = """
    [campaigns.tuesday]
    notes = "notes/tuesday"
    player_notes = ["Session Notes/", "Handouts/**"]
    gm_notes = ["Session Prep/**", "TODO.md"]
    gm_headings = ["Secrets and Clues", "Behind the Screen"]

    [campaigns.friday]
    notes = "notes/friday"
    player_notes = []             # no allowlist here, whatever ORACLE_PLAYER_NOTES says
"""


def test_a_campaign_carries_its_own_policy_into_its_settings(tmp_path):
    path = write(tmp_path, POLICIES, ("conf/notes/tuesday", "conf/notes/friday"))
    tuesday, friday = load_campaigns(path)
    assert (("Session Notes/", "Handouts/**"), ("Session Prep/**", "TODO.md"),
            ("Secrets and Clues", "Behind the Screen")) == (tuesday.player_notes, tuesday.gm_notes, tuesday.gm_headings)
    assert ((), None, None) == (friday.player_notes, friday.gm_notes, friday.gm_headings)

    settings = base(tmp_path, player_notes=["Public"], gm_notes=["gm-stuff"], gm_headings=["Spoilers"])
    own = tuesday.settings(settings)
    assert (["Session Notes/", "Handouts/**"], ["Session Prep/**", "TODO.md"], ["Secrets and Clues", "Behind the Screen"]) \
        == (own.player_notes, own.gm_notes, own.gm_headings)
    assert own.policy.describe().startswith("players read only Session Notes/, Handouts/**")
    other = friday.settings(settings)
    # `player_notes = []` replaces the setting; the keys left out keep it.
    assert ([], ["gm-stuff"], ["Spoilers"]) == (other.player_notes, other.gm_notes, other.gm_headings)
    assert (["Public"], ["gm-stuff"], ["Spoilers"]) == (settings.player_notes, settings.gm_notes, settings.gm_headings)


def test_a_campaign_without_a_policy_keeps_the_settings(tmp_path):
    path = write(tmp_path, TWO_CAMPAIGNS.format(friday=tmp_path / "notes" / "friday"), ("conf/notes/tuesday", "notes/friday"))
    tuesday, _ = load_campaigns(path)
    settings = base(tmp_path, player_notes=["Handouts"], gm_headings=["Prep"])
    own = tuesday.settings(settings)
    assert (["Handouts"], [], ["Prep"]) == (own.player_notes, own.gm_notes, own.gm_headings)
    assert settings.policy.key == own.policy.key


@pytest.mark.parametrize(
    "value, shown",
    [
        ('"Handouts"', "not a string \\('Handouts'\\)"),
        ("[\"Handouts\", 3]", "not a list holding 3"),
        ('["Handouts", ""]', "not a list holding ''"),
        ('[["Handouts"]]', "not a list holding \\['Handouts'\\]"),
        ("true", "not true/false"),
        ('{ a = "b" }', "not a table"),
    ],
)
@pytest.mark.parametrize("key", ["player_notes", "gm_notes", "gm_headings"])
def test_a_policy_key_of_the_wrong_type_names_the_campaign_the_key_and_the_line(tmp_path, key, value, shown):
    path = tmp_path / "campaigns.toml"
    (tmp_path / "notes" / "tuesday").mkdir(parents=True)
    path.write_text(f'# the table\n[campaigns.tuesday]\nnotes = "notes/tuesday"\n{key} = {value}\n', encoding="utf-8")
    with pytest.raises(CampaignsError) as caught:
        load_campaigns(path)
    error = str(caught.value)
    assert error.startswith(f"{path}, line 4: campaign 'tuesday': {key} must be a list of strings in quotes"), error
    assert __import__("re").search(shown, error), error


def test_the_env_example_documents_the_policy_settings():
    """Each with an example, commented; the setting itself holds its default (tests/test_settings.py
    loads the file)."""
    from oracle.policy import DEFAULT_GM_HEADINGS

    lines = (Path(__file__).parent.parent / ".env.example").read_text(encoding="utf-8").splitlines()
    for name in ("ORACLE_PLAYER_NOTES", "ORACLE_GM_NOTES", "ORACLE_GM_HEADINGS"):
        examples = [line for line in lines if line.startswith(f"# {name}=") and line.split("=", 1)[1].strip()]
        assert 1 == len(examples), name
        assert 1 == sum(line.startswith(f"{name}=") for line in lines), name
    headings = next(line for line in lines if line.startswith("ORACLE_GM_HEADINGS=")).split("=", 1)[1]
    assert list(DEFAULT_GM_HEADINGS) == [h.strip() for h in headings.split(",")]
