"""A foreign engine's repository, made for a test: tinyspec (tests/fixtures/tinyspec), a small
NumPy speculative decoder with its own CLI, its own phase names (draft, verify, host_readback)
and its own override variables (TINY_*), in a fresh git repository with three commits:

    base   the engine as it is
    docs   a README change only
    slow   every target verify forward is computed twice (the first result discarded):
           classic decode ms/token about 1.8x
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from asv_scratch import commit_all, git

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tinyspec"
MODEL = Path("tinyspec/model.py")
VERIFY = "logits = target.forward("


def make_foreign_repo(root: Path, prepare: Callable[[Path], None] | None = None) -> dict[str, str]:
    """Create root (a git repository of tinyspec) and return {base, docs, slow} commit SHAs.
    `prepare(root)` runs in the new repository before the first commit (`harness init`, say)."""
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    git(root, "init", "-q", "-b", "main")
    if prepare is not None:
        prepare(root)
    shas = {"base": commit_all(root, "tinyspec 0.3.0")}
    readme = root / "README.md"
    readme.write_text(readme.read_text() + "\nThe weights are random; acceptance is about 70% at block 3.\n")
    shas["docs"] = commit_all(root, "docs: say what acceptance to expect")
    model = root / MODEL
    text = model.read_text()
    assert text.count(VERIFY) == 2, f"{MODEL} changed; update tests/foreign_engine.py"
    lines = []
    for line in text.splitlines(keepends=True):
        if VERIFY in line:   # the same forward once more, before the one whose logits are used
            lines.append(line.replace("logits = ", "", 1))
        lines.append(line)
    model.write_text("".join(lines))
    shas["slow"] = commit_all(root, "verify: recompute the forward (a deliberate slowdown)")
    return shas
