"""One base for every error a user can act on: its message is the sentence to show them.

The command line and the bot catch `OracleError`, never a list of classes; anything else is a bug,
logged with its traceback and shown as "something went wrong".
"""
from __future__ import annotations


class OracleError(Exception):
    """An error whose message says what happened and, where there is one, what to run."""


class InputError(OracleError, ValueError):
    """What the user gave is wrong (a notes folder that is not one, an empty question): the command
    line exits 2 with it, as for a wrong setting, where a failure exits 1."""
