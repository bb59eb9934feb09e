"""The environment difference between two records, listed before any figure is compared."""

from __future__ import annotations

import copy

from harness.analyze.envdiff import EnvDifference, diff_sentence, env_diff
from harness.collect.host import specs


def _rec(mlx: str = "0.32.4", blas_dir: str = "/usr/lib", free: int = 1, engine_version: str = "0.1.0") -> dict:
    host = {"mlx": {"mlx": mlx, "mlx_lm": "0.32.2"},
            "blas": {"name": "openblas", "libraries": [f"{blas_dir}/libopenblasp-r0.3.21.so"]},
            "os": {"system": "Linux", "platform": "Linux-6.1", "distribution": "Debian 12"},
            "gpu": {"mlx_backend": "cuda", "name": "NVIDIA H200",
                    "mlx_device_info": {"device_name": "NVIDIA H200", "free_memory": free},
                    "nvidia": [{"name": "NVIDIA H200", "driver_version": "580.159.04"}]},
            "python": {"version": "3.12.3"}, "spec": specs.get_spec("h200", specs.SPECS_DIR).as_dict()}
    runs = [{"index": 0, "status": "ok", "arm": "classic", "engine_info": {"name": "specdec", "version": engine_version, "mlx": mlx}}]
    return {"host": host, "runs": runs}


def test_the_same_environment_in_other_paths_and_other_free_memory_has_no_difference() -> None:
    # Library paths differ between checkouts of one machine; free memory between its sessions.
    assert env_diff(_rec(), _rec(blas_dir="/opt/venv/lib", free=7)) == []
    assert diff_sentence([], ["mlx", "BLAS", "Python"]) == "Environment: no difference in mlx, BLAS or Python."


def test_every_changed_field_is_listed_host_first_then_each_arms_engine() -> None:
    b = _rec(mlx="0.33.0", engine_version="0.2.0")
    b["host"]["gpu"]["nvidia"][0]["driver_version"] = "590.1"
    b["host"]["spec"] = None                   # unknown on one side only: a difference
    diffs = env_diff(_rec(), b)
    assert [d.what for d in diffs] == ["mlx", "NVIDIA GPUs and driver", "host spec", "engine (classic)"]
    assert diffs[0] == EnvDifference("mlx", "0.32.4", "0.33.0")
    assert "driver_version 580.159.04" in diffs[1].a and "driver_version 590.1" in diffs[1].b
    assert diffs[2].b == "unknown"
    assert "specdec 0.1.0" in diffs[3].a and "specdec 0.2.0, mlx 0.33.0" in diffs[3].b
    line = diff_sentence(diffs)
    assert line.startswith("Environment: 4 differences, listed first: mlx 0.32.4 -> 0.33.0;"), line


def test_a_record_without_host_fields_compares_as_unknown() -> None:
    a = _rec()
    b = copy.deepcopy(a)
    del b["host"]["python"]
    assert env_diff(a, b) == [EnvDifference("Python", "3.12.3", "unknown")]
