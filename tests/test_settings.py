"""Settings: every one documented in .env.example, and the example loads as it is."""
from pathlib import Path

import pytest
from pydantic import AliasChoices

from bot.settings import BotSettings
from oracle.settings import Settings, setting_name

REPO = Path(__file__).resolve().parent.parent


def _listed(alias: str | AliasChoices | None) -> str | None:
    return str(alias.choices[0]) if isinstance(alias, AliasChoices) else alias


def test_env_example_lists_every_setting_and_loads():
    example = REPO / ".env.example"
    names = {line.split("=", 1)[0] for line in example.read_text().splitlines() if line and not line.startswith("#")}
    # A retired setting is still read, only to warn that it is: .env.example no longer lists it.
    # A renamed setting's old name is still read, and only its new one (the first choice) is listed.
    aliases = {_listed(f.validation_alias) for name, f in Settings.model_fields.items() if not name.startswith("retired_")}
    bot_aliases = {field.validation_alias for field in BotSettings.model_fields.values()}
    assert aliases | bot_aliases == names
    assert set() == aliases & bot_aliases  # the core never reads a bot setting (nor the token)
    loaded = Settings(_env_file=example)
    defaults = Settings(_env_file=None)
    assert defaults.model_dump(exclude={"chroma_url"}) == loaded.model_dump(exclude={"chroma_url"})
    assert not loaded.chroma_url


def test_the_old_name_of_a_renamed_setting_is_still_read(monkeypatch):
    monkeypatch.setenv("ORACLE_MAX_SUMMARIES", "5")
    assert Settings(_env_file=None).max_headlines == 5
    monkeypatch.setenv("ORACLE_MAX_HEADLINES", "7")  # the new name wins
    assert Settings(_env_file=None).max_headlines == 7


def test_environment_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("ORACLE_NOTES_DIR", str(tmp_path / "vault"))
    monkeypatch.setenv("ORACLE_K", "5")
    settings = Settings(_env_file=None)
    assert (tmp_path / "vault", 5) == (settings.notes_dir, settings.k)


def test_bot_settings_parse_lists(monkeypatch):
    monkeypatch.setenv("ORACLE_GM_ROLES", "Game Master, 1234")
    monkeypatch.setenv("ORACLE_GM_CHANNELS", "111, 222")
    monkeypatch.setenv("DISCORD_TOKEN", "secret-token")
    settings = BotSettings(_env_file=None)
    assert (["game master", "1234"], [111, 222]) == (settings.gm_roles, settings.gm_channels)
    assert "secret-token" not in repr(settings)  # a log of the settings never shows the token


def test_bot_settings_from_the_example():
    example = BotSettings(_env_file=REPO / ".env.example")
    assert (None, [], ["gm", "dm", "game master", "dungeon master"]) == (
        example.guild_id, example.gm_channels, example.gm_roles)


def test_the_bot_with_a_bad_setting_says_which_and_exits_2(monkeypatch, caplog):
    """systemd restarts the bot on failure except on exit status 2: a bad setting must not loop."""
    import bot.__main__

    monkeypatch.setenv("ORACLE_WATCH_QUIET", "soon")
    with caplog.at_level("ERROR"):
        assert 2 == bot.__main__.main()
    assert ["a setting is wrong: ORACLE_WATCH_QUIET: input should be a valid number, unable to parse string as a number "
            "(it is 'soon')"] == [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert not any(r.exc_info for r in caplog.records)


def test_bot_list_settings_take_a_json_list_too(monkeypatch):
    monkeypatch.setenv("ORACLE_GM_ROLES", '["Game Master", "DM"]')
    monkeypatch.setenv("ORACLE_GM_CHANNELS", "[111, 222]")
    settings = BotSettings(_env_file=None)
    assert (["game master", "dm"], [111, 222]) == (settings.gm_roles, settings.gm_channels)


@pytest.mark.parametrize(
    "name, value, said",
    [
        ("ORACLE_FOLDER_KINDS", "{npcs: sheet", "ORACLE_FOLDER_KINDS: not a JSON object (Expecting"),
        ("ORACLE_PATH_WEIGHTS", "[1, 2]", "ORACLE_PATH_WEIGHTS: not a JSON object;"),
        ("ORACLE_GM_NOTES", '["GM/"', "ORACLE_GM_NOTES: not a JSON list ("),
    ],
)
def test_a_setting_that_is_no_json_says_which_and_exits_2(monkeypatch, caplog, name, value, said):
    """A map or list setting that does not parse is one sentence naming it, never a traceback."""
    import bot.__main__

    monkeypatch.setenv(name, value)
    with caplog.at_level("ERROR"):
        assert 2 == bot.__main__.main()
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert message.startswith(f"a setting is wrong: {said}")
    assert not any(r.exc_info for r in caplog.records)


def test_a_check_across_settings_is_its_own_sentence_without_pydantics_words(monkeypatch, caplog):
    import bot.__main__

    monkeypatch.setenv("ORACLE_ANSWER_TOKENS", "999999")
    with caplog.at_level("ERROR"):
        assert 2 == bot.__main__.main()
    assert ["a setting is wrong: ORACLE_ANSWER_TOKENS=999999 leaves too little of ORACLE_NUM_CTX=16384 for the notes: "
            "keep it at most half the window"] == [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]


def test_a_retired_setting_is_ignored_with_a_warning_naming_what_replaced_it(monkeypatch, caplog):
    monkeypatch.setenv("ORACLE_RERANK_TIMEOUT", "60")
    with caplog.at_level("WARNING", logger="oracle.settings"):
        settings = Settings(_env_file=None)
    warning = ("ORACLE_RERANK_TIMEOUT is no longer read: the rerank has half of ORACLE_FIRST_WORDS_SECONDS (30 s); "
               "remove it from the environment or .env")
    assert [warning] == [r.getMessage() for r in caplog.records]
    assert "retired_rerank_timeout" not in settings.model_dump()


def test_the_first_words_are_due_within_the_whole_answers_bound(monkeypatch):
    from oracle.deadline import Deadline

    monkeypatch.setenv("ORACLE_ANSWER_TIMEOUT", "20")  # an old .env that lowered it
    deadline = Deadline.of(Settings(_env_file=None))
    assert (20, 20) == (deadline.first_words, deadline.whole)
    assert deadline.missed == "the model did not start answering within 20 s (ORACLE_ANSWER_TIMEOUT)"


def test_a_message_names_a_setting_by_its_own_variable():
    assert "ORACLE_FIRST_WORDS_SECONDS" == setting_name("first_words")
    assert "ORACLE_LLM_CONCURRENCY" == setting_name("llm_concurrency")
    with pytest.raises(KeyError):
        setting_name("no_such_setting")
