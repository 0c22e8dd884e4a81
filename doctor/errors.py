"""Errors that end a command with one clear line and exit code 2 (usage or bad input)."""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2, never a traceback."""
