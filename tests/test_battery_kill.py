"""The battery: a command engine does not outlive a harness killed by SIGKILL.

A timeout, Ctrl-C and SIGTERM kill the engine's process group from the harness; SIGKILL leaves
the harness no say, so on Linux the kernel kills the engine when its parent dies
(prctl(PR_SET_PDEATHSIG), harness.collect.engines.die_with_parent). macOS has no such call
(docs/engine-contract.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from harness_helpers import clean_env, command_arm, harness_argv, write_suite

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def _engine_of(harness: psutil.Process, deadline_s: float) -> psutil.Process:
    """The sleeping fake engine the harness started, once it runs."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for child in harness.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if any("fake_engine.py" in part for part in child.cmdline()) \
                            and "FAKE_SLEEP_S" in child.environ():
                        return child
        time.sleep(0.05)
    raise AssertionError("the harness never started its engine")


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE   # dead; only its reaping is left
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("when", ["engine running its first run", "engine running a later run"])
def test_the_engine_dies_with_a_harness_killed_by_sigkill(when: str, tmp_path: Path) -> None:
    later = when.endswith("later run")
    # A later run: the first arm is quick, the second sleeps (the engine waited for).
    arms = ([command_arm("quick")] if later else []) + [command_arm("sleepy", env={"FAKE_SLEEP_S": "60"})]
    suite = write_suite(tmp_path, arms, repetitions=1)
    proc = subprocess.Popen(harness_argv("run", str(suite), "--record", str(tmp_path / "r.json")), cwd=tmp_path,
                            env=clean_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    engine = None
    try:
        harness = psutil.Process(proc.pid)
        engine = _engine_of(harness, 60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not _gone(engine):
            time.sleep(0.05)
        assert _gone(engine), f"engine pid {engine.pid} outlived the harness killed by SIGKILL"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        if engine is not None and not _gone(engine):
            with contextlib.suppress(psutil.Error):
                engine.kill()   # the engine this test's harness started: not left behind on failure
        proc.wait(timeout=10)
