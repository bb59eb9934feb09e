"""One record's analyses as the report sections read them, computed once (summary rows, round
splits, gate outcomes, labels, the host), so no section computes them again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from harness.analyze import drafterstep, envdiff, rounds
from harness.analyze.costmodel import ModelTables
from harness.analyze.gpustack import GpuStack, gpu_stack, is_gpu_device
from harness.core import declare
from harness.core.hostinfo import HostInfo
from harness.core.runs import as_runs, measured_ok_runs
from harness.core.schema import EngineInfo, Record, Run
from harness.core.suitespec import Pairing


@dataclass(frozen=True)
class Inputs:
    """What a report needs beyond the record, read by its caller (the renderer reads nothing):
    the host spec the record names (or the one matched by its caller for a record that
    names none) and each pairing's model tensor tables."""

    host_spec: dict[str, Any] | None
    models: ModelTables
    # For a comparison: the acknowledgements covering a commit between the two records
    # (commits spec, figure pattern, arm pattern, reason).
    acks: tuple[tuple[str, str, str, str], ...] = ()
    # The record's host section has an MLX section (older records have none: MLX not collected,
    # which a report does not call "no MLX").
    mlx_collected: bool = False


class _SpecName(msgspec.Struct, kw_only=True):
    """What a report names a host spec by (Inputs.host_spec's other fields are the cost model's)."""
    name: str


class _Attention(msgspec.Struct, kw_only=True):
    """An attention path the engine reported choosing (EngineInfo.attention): cuDNN's scaled
    dot-product attention on or off (None: not said), and what decided it."""
    cudnn_sdpa: bool | None = None
    decided_by: str = "?"


class Facts:
    """One record's analyses, computed once: summary rows, splits, gate outcomes, labels."""

    def __init__(self, path: str, record: Record, inputs: Inputs):
        from harness.analyze.summary import summarize
        self.path, self.record = path, record
        # The suite as the session ran it, typed (a loaded record's suite has this shape).
        self.suite = self.record.suite
        self.settings = self.suite.settings
        self.arms = {a.name: a for a in self.suite.arms}
        self.arm_order = [a.name for a in self.suite.arms]
        self.prompts = [p.name for p in self.suite.prompts]
        self.multi_prompt = len(self.prompts) > 1
        # The record's runs typed once, for every analysis of it that reads runs.
        self.runs = as_runs(self.record.runs)
        self.rows = summarize(self.record, self.runs)
        self.groups = rounds.by_arm_prompt(self.record, measured_ok_runs(self.runs))
        self.splits = rounds.all_splits(self.record, self.groups)
        self.drafter_splits = drafterstep.drafter_splits(self.record, self.groups)
        self.profiles = rounds.profile_comparisons(self.record, self.groups)
        self.inputs = inputs
        self.host_spec = inputs.host_spec
        self.models = inputs.models
        self.acks = inputs.acks
        self.host: HostInfo = self.record.host
        self.spec_name = msgspec.convert(inputs.host_spec, _SpecName).name if inputs.host_spec else None
        # Every measured run by arm, failed ones too.
        self.runs_of: dict[str, list[Run]] = {a: [] for a in self.arm_order}
        for r in self.runs:
            if not r.warmup:
                self.runs_of.setdefault(str(r.arm), []).append(r)

    def runs_per_median(self) -> tuple[int, int]:
        """The fewest and most measured ok runs behind one arm and prompt's median: a budget
        adds rounds past the suite's repetitions, and failed runs take some away; (0, 0) when no
        run was measured."""
        counts = [len(rs) for rs in self.groups.values() if rs]
        return (min(counts), max(counts)) if counts else (0, 0)

    def runs_per_median_text(self) -> str:
        lo, hi = self.runs_per_median()
        return f"{lo}" if lo == hi else f"{lo}-{hi}"

    # gate and labels ----------------------------------------------------------------
    def outcome(self, arm: str) -> str:
        outs = sorted({r.gate.outcome for r in self.runs_of.get(arm, [])})
        return "/".join(outs) if outs else "no runs"

    def engaged(self, arm: str, prompt: str | None = None) -> bool:
        keys = [(arm, p) for p in self.prompts if prompt is None or p == prompt]
        rs = [r for k in keys for r in self.groups.get(k, [])]
        return rounds.engaged(rs)

    def shipping(self, arm: str) -> bool:
        rs = self.runs_of.get(arm, [])
        return bool(rs) and all(r.shipping for r in rs)

    def overrides(self, arm: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in self.runs_of.get(arm, []):
            out.update(r.overrides)
        return dict(sorted(out.items()))

    def notes(self, arm: str) -> dict[str, str]:
        """What each figure of the arm's results includes, in the engine's own words (its results'
        phase_notes; an engine that gives none has none)."""
        out: dict[str, str] = {}
        for r in self.runs_of.get(arm, []):
            out.update(r.diagnostics.phase_notes or {})
        return out

    def profiled(self, arm: str) -> bool:
        return rounds.profiled_arm(self.record, arm, self.overrides(arm))

    def override_why(self, arm: str, var: str) -> str:
        """What an override does, as the arm's engine declares it."""
        return declare.of_record(self.record, arm).overrides.get(var, "changes how the engine runs")

    def label(self, arm: str) -> str:
        labels = sorted({r.label or "unlabelled" for r in self.runs_of.get(arm, [])})
        return "; ".join(labels)

    def engine_desc(self, arm: str) -> str:
        for r in self.runs_of.get(arm, []):
            e = r.engine_info
            if e != EngineInfo():    # a failed run has no engine parts
                # Only what the engine reported: a foreign engine need not use MLX or a BLAS.
                extra = [f"{k} {v}" for k, v in (("mlx", e.mlx), ("mlx-lm", e.mlx_lm)) if v]
                extra += [e.device] if e.device else []
                extra += [f"numerics {e.numerics}"] if e.numerics else []
                # A CPU BLAS is named only for an engine on the CPU: on a GPU it did not do the arithmetic.
                extra += [f"BLAS {e.blas}"] if e.blas and not self.on_gpu(arm) else []
                # An attention path the engine chose (e.g. cuDNN on CUDA), and who chose it.
                att = msgspec.convert(e.attention or {}, _Attention)
                if att.cudnn_sdpa is not None:
                    extra.append(f"cuDNN attention {'on' if att.cudnn_sdpa else 'off'}: {att.decided_by}")
                return f"{e.name} {e.version}" + (f" ({', '.join(extra)})" if extra else "")
        return "unknown"

    def blas(self, arm: str) -> str:
        return next((r.engine_info.blas for r in self.runs_of.get(arm, []) if r.engine_info.blas), "unknown")

    def device(self, arm: str) -> str | None:
        """The device the arm's engine reported (engine.device), or None."""
        return next((r.engine_info.device for r in self.runs_of.get(arm, []) if r.engine_info.device), None)

    def on_gpu(self, arm: str) -> bool:
        return is_gpu_device(self.device(arm))

    def numerics(self, arm: str) -> str:
        """What did an arm's arithmetic: its CPU BLAS ("BLAS openblas"), or for an engine on a GPU
        its device ("on Device(gpu, 0)"), never the CPU BLAS its process also loaded."""
        if self.on_gpu(arm):
            return f"on {self.device(arm)}"
        return f"BLAS {self.blas(arm)}"

    def numerics_of(self, arms: list[str], with_word: bool = True) -> str:
        """numerics() of several arms in one phrase: "with BLAS a, b" / "on Device(gpu, 0)"
        (with_word False: "BLAS a, b")."""
        cpu = sorted({self.blas(a) for a in arms if not self.on_gpu(a)})
        gpu = sorted({str(self.device(a)) for a in arms if self.on_gpu(a)})
        parts = ([f"{'with ' if with_word else ''}BLAS {', '.join(cpu)}"] if cpu else []) \
            + ([f"on {', '.join(gpu)}"] if gpu else [])
        return " and ".join(parts)

    def blas_groups(self) -> dict[str, list[str]]:
        """Arms grouped by what did their arithmetic: a CPU BLAS name, or "GPU <device>"."""
        out: dict[str, list[str]] = {}
        for a in self.arm_order:
            out.setdefault(f"GPU {self.device(a)}" if self.on_gpu(a) else self.blas(a), []).append(a)
        return out

    def gpu_stack(self) -> GpuStack:
        return gpu_stack(self.host)

    def reading(self, arm: str) -> str | None:
        # An outcome the engine did not say ("unknown") is no gate whose reading to quote.
        return next((r.gate.reading for r in self.runs_of.get(arm, [])
                     if r.gate.reading and r.gate.outcome not in ("not_applicable", "unknown")), None)

    # host ---------------------------------------------------------------------------
    def host_name(self) -> str:
        return self.spec_name or "local"

    def host_tag(self) -> str:
        return f"{self.host_name()} {self.host.os.hostname}"

    def host_short(self) -> str:
        cpu, osys, mlx = self.host.cpu, self.host.os, self.host.mlx
        dev = mlx.default_device
        backend = "MLX CPU" if "cpu" in dev else ("MLX GPU" if "gpu" in dev else dev)
        if mlx.mlx == "unknown" and dev == "unknown" and mlx.error is msgspec.UNSET and self.inputs.mlx_collected:
            backend = "no MLX"   # collected, and not importable: known, not unknown
        # The harness's MLX is no part of an engine that runs as its own program without it.
        said = "" if not envdiff.uses_harness_process(self.record) else f", {backend}"
        return (f"{self.host_name()} ({osys.hostname}: {cpu.model}, {cpu.logical_cores} logical cores{said})")

    def is_cpu(self) -> bool:
        return "cpu" in self.host.mlx.default_device

    def loadavg(self) -> tuple[float, float, float] | None:
        xs = []
        for rs in self.groups.values():
            for r in rs:
                for snap in (r.load.before, r.load.after):
                    v = snap.loadavg_1 if snap is not None else None
                    if isinstance(v, (int, float)):
                        xs.append(float(v))
        return rounds.median_range(xs) if xs else None

    def date(self) -> str:
        return self.record.created[:10] or "undated"

    def model_desc(self, pairing: Pairing, role: str) -> str:
        """The suite's entry, and the directory the engine reported, relative to the repo when inside it."""
        v = pairing.target if role == "target" else pairing.drafter
        if v is None:
            return "none"
        seen = sorted({d for rs in self.runs_of.values() for r in rs
                       if r.pairing == pairing.name and (d := _model_dir(r, role))})
        root = self.host.repo.path if self.host.repo.path != "unknown" else ""
        rel = [x[len(root) + 1:] if root and x.startswith(root + "/") else x for x in seen]
        where = f" ({', '.join(rel)})" if rel else ""
        if v == "embedded":
            return f"the engine's embedded {role}{where}"
        if v.startswith("embedded:"):
            return f"the engine's embedded {v.split(':', 1)[1]}{where}"
        return f"{v}"

    def row_label(self, arm: str, prompt: str) -> str:
        return f"{arm} ({prompt})" if self.multi_prompt else arm

    def classic_ref(self) -> dict[tuple[str, str], tuple[str, float]]:
        """(arm, prompt) -> (classic arm, its median ms/token), as the summary chose it."""
        ms = {(s.arm, s.prompt): s.ms_per_token_median for s in self.rows if s.block == 1}
        out: dict[tuple[str, str], tuple[str, float]] = {}
        for s in self.rows:
            ref = s.arm if s.block == 1 else s.classic_arm
            m = ms.get((ref, s.prompt)) if ref else None
            if ref and m:
                out[(s.arm, s.prompt)] = (ref, m)
        return out




def _model_dir(run: Run, role: str) -> str | None:
    """The directory the engine reported for the run's "target" or "drafter"."""
    return run.result_arm.target if role == "target" else run.result_arm.drafter
