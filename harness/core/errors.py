"""Errors the user can fix: the CLI prints `harness: <message>` and exits 2."""


class UserError(Exception):
    """A problem with the user's input or setup, stated in one line that names what to fix."""
