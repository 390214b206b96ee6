"""One base for every error a user can act on: its message is the sentence to show them.

The command line and the bot catch `OracleError`, never a list of classes; anything else is a bug,
logged with its traceback and shown as "something went wrong".
"""
from __future__ import annotations


class OracleError(Exception):
    """An error whose message says what happened and, where there is one, what to run."""
