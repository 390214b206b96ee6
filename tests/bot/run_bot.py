"""`python -m bot`, pointed at the fake Discord: its API and gateway URLs come from the environment
(FAKE_DISCORD_API, FAKE_DISCORD_WS), as a real deployment's come from discord.py's defaults.
Everything else is the real entry point, run as `python -m bot` runs it, with the real model unless
ORACLE_TEST_STAND_IN is set (tests that judge no answer: tests/fakes/hashed_cli.py)."""
import os
import runpy

import discord
import yarl

discord.http.Route.BASE = os.environ["FAKE_DISCORD_API"]
discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(os.environ["FAKE_DISCORD_WS"])
if os.environ.get("ORACLE_TEST_STAND_IN"):
    from tests.fakes.hashed_cli import use_stand_in

    use_stand_in()
runpy.run_module("bot", run_name="__main__", alter_sys=True)
