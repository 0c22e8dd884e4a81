"""Errors that end a command with one clear line: bad input (exit 2), broken knowledge data (exit 3)."""


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2, never a traceback."""


class KnowledgeError(Exception):
    """A knowledge file does not match its schema (a bug in the shipped data or a user's copy)."""
