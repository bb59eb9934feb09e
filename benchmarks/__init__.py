"""The asv suite: one harness session per commit (session.py), figures per arm (bench_specdec.py)."""
