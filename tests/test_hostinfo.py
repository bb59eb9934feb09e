"""Host metadata: every section present, "unknown" where unreadable, never an exception."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from msgspec import to_builtins

from harness.collect.host import info as hostinfo
from harness.collect.host.info import UNKNOWN, collect_host

REPO = Path(__file__).resolve().parents[1]
SECTIONS = {"cpu", "gpu", "memory", "os", "python", "mlx", "blas", "repo", "harness"}


def test_collect_host_has_every_section_and_is_json():
    host = collect_host()
    assert set(host) == SECTIONS | {"spec"}
    json.dumps(host)  # goes into the record as is
    # The matched profile travels with the record (this Linux CPU host: linux-cpu), so a report
    # renders the same wherever it is rendered.
    from harness.collect.host.specs import match_spec
    expected = match_spec({k: v for k, v in host.items() if k != "spec"})
    assert expected is not None and host["spec"] == expected.as_dict()
    for name in ("cpu", "memory", "os", "python"):
        assert "error" not in host[name], host[name]
    assert host["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert isinstance(host["cpu"]["logical_cores"], int) and host["cpu"]["logical_cores"] >= 1
    assert host["memory"]["total_bytes"] > 0


def test_unreadable_fields_are_unknown(monkeypatch):
    # No commands, no /proc files, psutil knowing nothing: every such field says unknown.
    import psutil

    monkeypatch.setattr(hostinfo, "run_quiet", lambda *a, **k: None)
    monkeypatch.setattr(hostinfo, "read_text", lambda path: None)
    monkeypatch.setitem(sys.modules, "pynvml", None)     # no NVML (tests/test_host_nvml.py)
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: None)
    cpu = hostinfo.cpu_info()
    assert cpu.model == cpu.logical_cores == cpu.physical_cores == UNKNOWN
    assert hostinfo.nvidia_gpus() == UNKNOWN
    if sys.platform.startswith("linux"):
        assert hostinfo.blas_info().name == UNKNOWN
        assert hostinfo.os_info().distribution == UNKNOWN


def test_cpu_only_linux_host_reports_no_gpu_guess():
    host = collect_host()
    if host["gpu"].get("mlx_backend") != "none" or host["gpu"].get("nvidia") != UNKNOWN:
        pytest.skip("this host has a GPU")
    # MLX's device_info() describes the CPU here; it must not be reported as a GPU.
    assert host["gpu"]["name"] == host["gpu"]["generation"] == UNKNOWN
    assert host["cpu"]["apple_chip"] == UNKNOWN


def test_a_collector_that_raises_becomes_an_error_section(monkeypatch):
    def boom():
        raise RuntimeError("sensor on fire")

    monkeypatch.setattr(hostinfo, "gpu_info", boom)
    host = collect_host()
    assert host["gpu"] == {"error": "RuntimeError: sensor on fire"}
    assert "error" not in host["cpu"]


def test_generation_helpers():
    assert hostinfo.apple_family("applegpu_g15s") == "G15"
    assert hostinfo.apple_family("x86_64") == UNKNOWN
    assert hostinfo.sm_generation("garbage") == UNKNOWN


def test_blas_from_mapped_libraries():
    maps = ("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3\n"
            "7f02-7f03 r-xp 0 08:01 2 /venv/mlx_cpu.libs/libblas-bd8a282c.so.3.10.0\n"
            "7f04-7f05 rw-p 0 00:00 0\n")
    libs = hostinfo.mapped_blas_libraries(maps)
    assert len(libs) == 2
    # Debian's alternatives path shows OpenBLAS behind the generic libblas.so.3 name.
    assert hostinfo.classify_blas(libs) == "openblas"
    assert hostinfo.classify_blas(libs[1:]) == "reference (bundled with mlx-cpu)"
    assert hostinfo.classify_blas(["/usr/lib/libblas.so.3"]) == "reference"
    assert hostinfo.classify_blas([]) == UNKNOWN


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_repo_section_commit_branch_dirty_detached(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "trunk")
    (tmp_path / "f.txt").write_text("a\n")
    _git(tmp_path, "add", "f.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c1")
    info = hostinfo.repo_info(str(tmp_path))
    assert info.branch == "trunk" and info.dirty is False
    assert len(info.commit) == 40 and info.commit.startswith(info.short_commit)
    (tmp_path / "f.txt").write_text("b\n")
    assert hostinfo.repo_info(str(tmp_path)).dirty is True
    _git(tmp_path, "checkout", "-q", "--detach")
    assert hostinfo.repo_info(str(tmp_path)).branch == "detached"


def test_repo_section_outside_a_repository(tmp_path):
    info = hostinfo.repo_info(str(tmp_path / "nowhere"))
    assert info.commit == info.branch == info.dirty == UNKNOWN


def test_run_quiet_never_raises():
    assert hostinfo.run_quiet(["definitely-not-a-command-xyz"]) is None
    assert hostinfo.run_quiet([sys.executable, "-c", "raise SystemExit(3)"]) is None
    assert hostinfo.run_quiet([sys.executable, "-c", "import time; time.sleep(5)"],
                              timeout=0.2) is None
    assert hostinfo.run_quiet([sys.executable, "-c", "print('hi')"]) == "hi\n"


def test_collect_host_imports_no_engine_and_says_whose_blas_it_is(tmp_path):
    # A fresh process, as `harness run` of a command suite is: collecting the host must not
    # import specdec (whose import preloads OpenBLAS into the harness's own process).
    code = ("import json, sys; from harness.collect.host.info import collect_host\n"
            "h = collect_host(); print(json.dumps({'blas': h['blas'], "
            "'engine_loaded': 'specdec' in sys.modules}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60, cwd=str(tmp_path))
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["engine_loaded"] is False
    assert got["blas"]["scope"].startswith("harness process")


def _commit(repo, name="f.txt", text="a\n", msg="c"):
    (repo / name).write_text(text)
    _git(repo, "add", name)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_collect_host_reads_the_repository_under_test_not_the_harness(tmp_path, monkeypatch):
    engine = tmp_path / "engine"
    engine.mkdir()
    _git(engine, "init", "-q", "-b", "trunk")
    sha = _commit(engine)
    monkeypatch.delenv("ASV_COMMIT", raising=False)
    monkeypatch.delenv("ASV_CONF_DIR", raising=False)
    monkeypatch.chdir(engine)
    host = collect_host()
    assert host["repo"]["commit"] == sha and host["repo"]["path"] == str(engine)
    assert host["repo"]["branch"] == "trunk" and host["repo"]["dirty"] is False
    assert host["repo"]["source"] == "git"
    # The harness's own provenance sits beside it, never in its place.
    assert host["harness"]["location"] == str(REPO / "harness")
    assert host["harness"]["commit"] != sha
    (engine / "new.py").write_text("x = 1\n")   # untracked: a different engine ran
    assert collect_host()["repo"]["dirty"] is True


def test_under_asv_the_record_names_asvs_commit(tmp_path, monkeypatch):
    # asv installs an older commit into its environment while the working tree is at a newer
    # one: the session under asv measured the older commit, built clean.
    _git(tmp_path, "init", "-q", "-b", "main")
    old = _commit(tmp_path, text="1\n", msg="old")
    _commit(tmp_path, text="2\n", msg="new")
    (tmp_path / "f.txt").write_text("dirty\n")
    monkeypatch.setenv("ASV_COMMIT", old)
    monkeypatch.setenv("ASV_CONF_DIR", str(tmp_path))
    monkeypatch.chdir(REPO)   # a benchmark runs elsewhere (asv: a temporary directory)
    info = hostinfo.repo_info()
    assert info.commit == old and info.dirty is False and info.source == "asv"
    assert info.path == str(tmp_path) and info.branch == "main~1"
    assert old.startswith(info.short_commit)


def test_cuda_stack_reads_the_driver_and_loaded_libraries() -> None:
    from harness.collect.host.info import cuda_stack
    driver = 13000      # NVML's nvmlSystemGetCudaDriverVersion: nvidia-smi's "CUDA Version: 13.0"
    maps = ("7f00-7f01 r-xp 00000000 00:00 0 /site/nvidia/cublas/lib/libcublas.so.13.1.0.3\n"
            "7f02-7f03 r-xp 00000000 00:00 0 /site/nvidia/cudnn/lib/libcudnn.so.9.13.0\n")
    got = cuda_stack(driver, maps)
    assert got.cuda_driver_api == "13.0"
    # Without pip distributions of these names here, the loaded libraries' file names say it.
    assert got.cublas == "13.1.0.3" and got.cudnn == "9.13.0"
    assert got.cuda_runtime == "unknown"        # not loaded, not installed: never a guess
    assert to_builtins(cuda_stack(None, None)) == {"cuda_driver_api": "unknown", "cuda_runtime": "unknown",
                                      "cublas": "unknown", "cudnn": "unknown"}
    # A bare soname names only the major version: unknown here as in the report (gpustack).
    assert cuda_stack(driver, "7f02-7f03 r-xp 0 00:00 0 /x/libcudnn.so.9\n").cudnn == "unknown"
