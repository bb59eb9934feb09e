"""GPU records tell the truth (issue 14, item 4): the Setup names the GPU stack an engine ran on and
no CPU BLAS for it; a CPU record keeps its BLAS; the cost section says whether the target step is
bound by bandwidth or by dispatch (harness.analyze.roofline's rule, worded by render/reportcost)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from harness_helpers import REPO, md_section, write_record

from harness.analyze import costmodel as cm
from harness.analyze import roofline as rl
from harness.analyze.gpustack import gpu_stack, is_gpu_device, library_version
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.core.recordsections import Scaling
from harness.render import mdtable
from harness.render import reportcontext as rp
from harness.render.reportcost import roofline_sentence

H200 = "tests/fixtures/report/h200-older.json"   # an H200 record made before host.gpu.cuda existed
CPU = "reports/20261202-182230-cpu-blas-linux-cpu.json"
NO_USER_TEMPLATES = REPO / "tests" / "fixtures" / "report" / "no-such-templates"


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def render(path: str) -> str:
    return rp.render(report_cli.context_for(path, backfill=backfill()), "record", user_dir=NO_USER_TEMPLATES)


def load(path: str) -> dict[str, Any]:
    return json.loads((REPO / path).read_text())


def write(tmp: Path, rec: dict[str, Any]) -> str:
    return write_record(tmp, "record.json", rec)


section = md_section


def setup_rows(md: str) -> dict[str, str]:
    """The full setup table (the first screen keeps a few of its rows; the appendix has them all)."""
    full = md.split("<details><summary>Full setup</summary>", 1)[1].split("</details>", 1)[0]
    return {r[0]: r[1] for r in mdtable.parse(full)[0][1:]}


def headline(md: str) -> str:
    return md.split("\n## ", 1)[0]


# --- Setup: the GPU stack, and no CPU BLAS for an engine on a GPU ------------------------------

def test_gpu_record_names_its_gpu_stack_and_no_cpu_blas() -> None:
    md = render(H200)
    rows = setup_rows(md)
    gpu = rows["GPU stack"]
    # What the record holds: MLX's device info, nvidia-smi's driver, the loaded cuBLAS's file name.
    assert gpu.startswith("NVIDIA H200 (sm_90), 140.4 GiB; driver 580.159.04; CUDA unknown; "
                          "CUDA runtime unknown; cuBLAS 13.1.0.3; cuDNN unknown")
    assert "whose engine ran on Device(gpu, 0)" in gpu
    assert "libcublas.so.13.1.0.3" in gpu and "unknown: the record's host metadata has no value for it" in gpu
    setup = section(md, "Setup")
    assert "openblas" not in setup.lower()
    assert "openblas" not in headline(md).lower()
    assert rows["BLAS"].startswith("no CPU BLAS for classic, block3, block3-inexact, block3-inexact-profiled: "
                                   "the engine ran on Device(gpu, 0)")
    assert "Probe failed on Device(gpu, 0): " in rows["exactness gate"]
    assert 'Probe failed on Device(gpu, 0): "verify block position 0 differs from the single-token chain in 2168 ' \
           'of 4096 logit bytes"' in rows["exactness gate"]
    assert "Device(gpu, 0))" in rows["harness and engine versions"]     # the engine's own line: no BLAS


def test_gpu_stack_from_the_collectors_cuda_section(tmp_path: Path) -> None:
    rec = load(H200)
    rec["host"]["gpu"]["cuda"] = {"cuda_driver_api": "13.0", "cuda_runtime": "13.0.96",
                                  "cublas": "13.1.0.3", "cudnn": "9.13.0"}
    gpu = setup_rows(render(write(tmp_path, rec)))["GPU stack"]
    assert gpu.startswith("NVIDIA H200 (sm_90), 140.4 GiB; driver 580.159.04; CUDA 13.0 (as the driver reports it); "
                          "CUDA runtime 13.0.96; cuBLAS 13.1.0.3; cuDNN 9.13.0 (")
    assert "unknown" not in gpu and "BLAS section" not in gpu


def test_cpu_record_keeps_its_blas_and_has_no_gpu_stack() -> None:
    md = render(CPU)
    rows = setup_rows(md)
    assert "GPU stack" not in rows
    assert rows["BLAS"].startswith("openblas for ")
    assert "reference (bundled with mlx-cpu) for classic-refblas, block3-refblas" in rows["BLAS"]
    assert "Probe failed with BLAS openblas" in rows["exactness gate"]
    assert "BLAS openblas" in rows["harness and engine versions"]
    assert "openblas" not in headline(md).lower()      # the finding judges; the setup says what ran


def test_an_arm_on_a_gpu_beside_arms_on_the_cpu(tmp_path: Path) -> None:
    rec = load(CPU)
    for r in rec["runs"]:
        if r["arm"] in ("classic-refblas", "block3-refblas"):
            r["engine_info"]["device"] = "Device(gpu, 0)"
    md = render(write(tmp_path, rec))
    rows = setup_rows(md)
    assert rows["BLAS"].startswith("openblas for ")
    assert "reference (bundled" not in rows["BLAS"]
    assert rows["BLAS"].endswith("no CPU BLAS for classic-refblas, block3-refblas: the engine ran on Device(gpu, 0) "
                                 "(the GPU stack row names its libraries)")
    assert "for classic-refblas, block3-refblas, whose engine ran on Device(gpu, 0)" in rows["GPU stack"]
    assert "Arms ran on different BLAS or devices (" in section(md, "Limits of this record")


def test_gpu_stack_helpers() -> None:
    assert is_gpu_device("Device(gpu, 0)") and is_gpu_device("cuda:0") and is_gpu_device("mps")
    assert not is_gpu_device("Device(cpu, 0)") and not is_gpu_device(None) and not is_gpu_device("")
    assert library_version(["/x/libcublasLt.so.13.1.0.3", "/x/libcublas.so.13.1.0.3"], "libcublas.so.") \
        == ("13.1.0.3", "libcublas.so.13.1.0.3")
    assert library_version(["/x/libcudnn.so.9"], "libcudnn.so.") is None      # a soname is no version
    g = gpu_stack({})                                                           # a CPU host's record
    assert (g.name, g.driver, g.cuda, g.cublas, g.cudnn, g.memory_gib) == ("unknown",) * 5 + (None,)


# --- the roofline: bound by bandwidth, by dispatch, by neither ----------------------------------

def floor(empty: float, layer: float | None = None, layers: int | None = None) -> rl.DispatchFloor:
    return rl.DispatchFloor(empty_ms=empty, layer_ms=layer, layers=layers, step_ms=1.7, repeats=7)


def test_a_dispatch_dominated_step_is_bound_by_dispatch() -> None:
    # 10 MB at 4800 GB/s is 0.002 ms of a 1.8 ms step; 0.05 + 4 x 0.3 = 1.25 ms of dispatch floor.
    r = cm.roofline(10_233_600, 1.8, 4800, floor(0.05, 0.3, 4))
    assert r.bound == rl.BOUND_DISPATCH
    assert r.bandwidth_ms == pytest.approx(10_233_600 / 4800e9 * 1e3)
    assert r.floor is not None and r.floor.floor_ms == pytest.approx(1.25)
    line = roofline_sentence(r)
    assert "bound by dispatch (launch and sync overhead), not bandwidth" in line
    assert "bandwidth-bound time 0.0021 ms" in line and "dispatch floor 1.250 ms" in line
    assert "4 layers x 0.300 ms" in line and "69.4% of the measured step" in line


def test_a_bandwidth_dominated_step_is_bound_by_bandwidth() -> None:
    # 8 GB at 4800 GB/s is 1.667 ms of a 2 ms step: over half, whatever the dispatch floor.
    r = cm.roofline(8_000_000_000, 2.0, 4800, floor(0.02, 0.01, 32))
    assert r.bound == rl.BOUND_BANDWIDTH
    line = roofline_sentence(r)
    assert "bound by bandwidth" in line and "bound by dispatch" not in line
    assert "bandwidth-bound time 1.667 ms" in line and "dispatch floor 0.340 ms" in line


def test_neither_not_measured_and_unknown_peak() -> None:
    r = cm.roofline(10_233_600, 1.8, 4800, floor(0.05))              # the empty op alone: 2.8% of the step
    assert r.bound == rl.BOUND_NEITHER and r.unexplained == pytest.approx((1.8 - 0.05) / 1.8)
    assert "bound by neither: 97% unexplained" in roofline_sentence(r)
    old = cm.roofline(10_233_600, 1.8, 4800, None)                    # an older record: no floor
    assert old.bound == rl.BOUND_NOT_BANDWIDTH
    line = roofline_sentence(old)
    assert "the dispatch floor was not measured" in line and "bandwidth-bound time 0.0021 ms" in line
    assert "not bound by bandwidth" in line and "step is bound by" not in line
    no_peak = cm.roofline(10_233_600, 1.8, None, floor(0.05, 0.3, 4))
    assert no_peak.bound == rl.BOUND_UNKNOWN and "dispatch floor 1.250 ms" in roofline_sentence(no_peak)
    assert roofline_sentence(cm.roofline(10_233_600, 1.8, None, None)) == ""    # nothing to say
    with pytest.raises(ValueError):
        cm.roofline(1, 0.0, 4800, None)


def test_an_issue_time_above_the_step_is_no_floor() -> None:
    # This CPU host's record: the host's issue time alone (5.991 ms) exceeds the pipelined step.
    r = cm.roofline(10_233_600, 4.647, 4800, rl.DispatchFloor(0.013, issue_ms=5.991))
    assert r.bound == rl.BOUND_NOT_BANDWIDTH
    line = roofline_sentence(r)
    assert "128.9% of the measured step (more than the step itself, so no floor" in line
    assert "bound by dispatch" not in line and "what bounds it is not known" in line


def scaling(**dispatch: Any) -> Scaling:
    """A record's scaling block with this dispatch floor (none when empty)."""
    d = {"repeats": 7, "step_ms": 1.0, **dispatch} if dispatch else None
    return msgspec.convert({"context_tokens": 512, "device": "gpu", "widths": [], "dispatch": d}, Scaling)


def test_dispatch_floor_from_the_scaling_block() -> None:
    f = cm.dispatch_floor(scaling(empty_ms=0.04, layer_ms=0.25, layers=4, step_ms=1.6, repeats=7))
    assert f == rl.DispatchFloor(0.04, 0.25, 4, 1.6, 7) and f.floor_ms == pytest.approx(1.04)
    assert cm.dispatch_floor(scaling()) is None and cm.dispatch_floor(None) is None
    assert cm.dispatch_floor(scaling(empty_ms=-1.0)) is None
    assert cm.dispatch_floor(scaling(empty_ms=float("nan"))) is None
    no_layers = cm.dispatch_floor(scaling(empty_ms=0.04, layers=None))
    assert no_layers is not None and no_layers.layers_ms is None and no_layers.floor_ms == 0.04


def test_the_h200_record_says_what_bounds_its_step(tmp_path: Path) -> None:
    # The committed record has no dispatch floor: the line says so and gives the bandwidth-bound time.
    cost = section(render(H200), "Cost model")
    assert ("Roofline of the target step: bandwidth-bound time 0.0021 ms (the target's 10,233,600 bytes at "
            "4800 GB/s), 0.1% of the measured 1.822 ms step; the dispatch floor was not measured") in cost
    # With the engine's dispatch floor in the record's scaling block, the same step is dispatch-bound.
    rec = copy.deepcopy(load(H200))
    rec["scaling"] = {"pairing": "embedded", "context_tokens": 512, "device": "Device(gpu, 0)", "widths": [],
                      "dispatch": {"empty_ms": 0.03, "layer_ms": 0.3, "layers": 4, "step_ms": 1.5, "repeats": 7}}
    cost = section(render(write(tmp_path, rec)), "Cost model")
    assert "dispatch floor 1.230 ms" in cost and "bound by dispatch (launch and sync overhead), not bandwidth" in cost
    # A floor measured on another pairing's target is not this step's.
    rec["scaling"]["pairing"] = "another"
    cost = section(render(write(tmp_path, rec)), "Cost model")
    assert "the dispatch floor was not measured" in cost


def test_an_apple_gpu_names_metal_and_macos(tmp_path: Path) -> None:
    rec = load(H200)
    rec["host"]["gpu"] = {"mlx_backend": "metal", "name": "Apple M3 Ultra", "generation": "applegpu_g15d",
                          "family": "G15", "mlx_device_info": {"memory_size": 549755813888,
                                                               "architecture": "applegpu_g15d"}, "nvidia": "unknown"}
    rec["host"]["os"]["macos_version"] = "15.1"
    gpu = setup_rows(render(write(tmp_path, rec)))["GPU stack"]
    assert gpu.startswith("Apple M3 Ultra (applegpu_g15d), 512 GiB unified memory; Metal on macOS 15.1 (for classic")
    assert "CUDA" not in gpu and "driver" not in gpu


def test_the_hosts_issue_time_is_the_floor_when_measured() -> None:
    # Layers evaluated one by one each pay a sync (their sum can exceed the pipelined step); the
    # host's time to build and issue one step, not waiting for it, is what a step cannot beat.
    fl = cm.dispatch_floor(scaling(empty_ms=0.03, layer_ms=0.53, layers=32, step_ms=10.2, issue_ms=5.1, repeats=7))
    assert fl is not None and fl.floor_ms == 5.1
    r = cm.roofline(4_221_905_152, 5.8, 4800, fl)
    assert r.bound == "dispatch"
    no_issue = cm.dispatch_floor(scaling(empty_ms=0.03, layer_ms=0.01, layers=4))
    assert no_issue is not None and no_issue.floor_ms == pytest.approx(0.07)


def test_a_layer_by_layer_sum_above_the_step_is_no_floor() -> None:
    fl = cm.dispatch_floor(scaling(empty_ms=0.03, layer_ms=0.53, layers=32))
    r = cm.roofline(4_221_905_152, 5.8, 4800, fl)
    assert r.bound == rl.BOUND_NOT_BANDWIDTH
