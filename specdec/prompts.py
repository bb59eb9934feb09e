"""Built-in prompts by category, shipped beside the embedded pair (it was trained on stdlib code)."""
from __future__ import annotations

from pathlib import Path

from specdec.errors import SpecdecError

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
CATEGORIES = ("code", "prose", "enumeration")


def parse_prompt_file(text: str) -> list[tuple[str, str]]:
    """`### name` lines start each prompt; the text runs to the next one (trailing newline kept)."""
    out: list[tuple[str, str]] = []
    for chunk in text.split("### ")[1:]:
        name, _, body = chunk.partition("\n")
        out.append((name.strip(), body))
    return out


def load_prompts(category: str) -> list[tuple[str, str]]:
    """(name, text) pairs of one built-in category."""
    if category not in CATEGORIES:
        raise SpecdecError(f"unknown prompt category {category!r}; known: {', '.join(CATEGORIES)}")
    prompts = parse_prompt_file((PROMPTS_DIR / f"{category}.txt").read_text())
    if category == "prose":  # prose continues mid-line; code continues on the next line
        prompts = [(name, text.rstrip("\n")) for name, text in prompts]
    return prompts
