"""The one exception the engine raises for input a user can fix."""


class SpecdecError(ValueError):
    """Bad input (model directory, tokenizer mismatch, arguments): one line, exit 2 at the CLI."""
