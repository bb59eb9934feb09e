"""The host's NVIDIA readings through NVML (harness.collect.host.info / thermal) against
nvidia-smi's CSV on the same GPU, three times: the GPU list, clocks/temperature/power/throttle
reasons, and the CUDA driver version against nvidia-smi's banner.

On the lent GPU, which reaches no package registry, carry nvidia-ml-py's single module:
  mkdir -p build/nvmlcheck && cp .venv/lib/python3*/site-packages/pynvml.py build/nvmlcheck/
  run (carry ["build/nvmlcheck"]): PYTHONPATH=$PWD python3 scripts/studies/nvml_vs_smi.py
"""

from __future__ import annotations

import subprocess
import sys

import msgspec

sys.path.insert(0, "build/nvmlcheck")   # pynvml.py carried there

from harness.collect.host import info, thermal  # noqa: E402

NA = {"", "[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]"}


def rows(text: str, keys: list[str]) -> list[dict[str, str]]:
    """nvidia-smi's CSV as the harness parsed it before NVML: n/a cells read "unknown"."""
    out = []
    for line in (text or "").splitlines():
        if line.strip():
            cells = [("unknown" if c.strip() in NA else c.strip()) for c in line.split(",")]
            cells += ["unknown"] * (len(keys) - len(cells))
            out.append(dict(zip(keys, cells)))
    return out


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True).stdout


def main() -> None:
    for _ in range(3):
        old = rows(smi("--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"),
                   ["name", "driver_version", "memory_total", "compute_cap"])
        for r in old:
            r["generation"] = info.sm_generation(r["compute_cap"])
        new = msgspec.to_builtins(info.nvidia_gpus())
        print("gpus equal:", old == new)
        print(" old", old)
        print(" new", new)
        oldt = rows(smi("--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_event_reasons.active",
                        "--format=csv,noheader,nounits"),
                    ["sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_draw_w", "throttle_reasons_active"])
        print(" old thermal", oldt)
        print(" new thermal", msgspec.to_builtins(thermal.nvidia_state()))
        banner = [ln for ln in smi().splitlines() if "CUDA Version" in ln]
        print(" banner", banner, "nvml", info.cuda_driver_version(),
              info.cuda_stack(info.cuda_driver_version(), None).cuda_driver_api)


if __name__ == "__main__":
    main()
