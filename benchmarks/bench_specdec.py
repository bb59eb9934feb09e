"""The asv benchmarks come from the installed harness (harness/asvbench.py); asv names them
after this module: bench_specdec.Decode.track_ms_per_token etc."""

from harness.asvbench import *  # noqa: F401,F403
