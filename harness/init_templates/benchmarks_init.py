"""The asv suite, thin: its code is harness.asvbench; the session's suite is the one
asv.conf.json names ("harness_suite")."""

import os as _os
from pathlib import Path as _Path

# asv sets ASV_CONF_DIR in the environments it builds but not with --python=same; the harness
# finds asv.conf.json, the suite and the repository under test through it.
_os.environ.setdefault("ASV_CONF_DIR", str(_Path(__file__).resolve().parent.parent))
