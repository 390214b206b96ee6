"""The bot tests' fixtures live in `harness.py` with the helpers; pytest finds them here."""
from tests.bot.harness import campaign, campaign_model, fake, indexes, oracle_bot, world  # noqa: F401
