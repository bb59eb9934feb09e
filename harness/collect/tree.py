"""Where `{tree}` in a command arm's argv points: the source tree of the commit being measured.

Under compare-commits, pr-check and bisect a worker runs in the commit's exported (and built)
tree, its working directory; under asv the tree the engine's install command copied into asv's
environment (`harness init --build` writes that command); under `harness run` the current
directory (the engine's checkout, where its build is). $HARNESS_TREE overrides all three.
"""

from __future__ import annotations

import os
from pathlib import Path

TREE_ENV = "HARNESS_TREE"
# The directory, inside asv's environment ($ASV_ENV_DIR), that the install command fills.
ASV_TREE = "harness-tree"


def engine_tree() -> str:
    """The absolute path `{tree}` stands for in this process."""
    given = os.environ.get(TREE_ENV)
    if given:
        return str(Path(given).resolve())
    env_dir = os.environ.get("ASV_ENV_DIR")
    if env_dir and (Path(env_dir) / ASV_TREE).is_dir():
        return str((Path(env_dir) / ASV_TREE).resolve())
    return os.getcwd()
