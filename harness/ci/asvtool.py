"""asv as the harness drives it: the project's config checked first, a chosen machine file,
output shown and kept, and asv's comparison read from its printed table and results files.

asv's exit codes do not say what happened: `asv continuous` exits 1 on a regression and
`asv compare` exits 0 even when something got worse (asv #884). So callers parse what asv
printed and what it stored, and use the exit code only to tell "asv ran" from "asv broke".

`python -m harness.ci.asvtool [--machine-file PATH] -- ASV-ARGS...` runs asv with the machine
file replaced (asv itself only ever reads ~/.asv-machine.json).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from harness.core.errors import UserError

CONFIG_NAME = "asv.conf.json"


# --- config --------------------------------------------------------------------------

class AsvConfFields(msgspec.Struct, kw_only=True):
    """What the harness reads of asv.conf.json by name, each value as the file gives it (asv
    checks its own keys; the harness names a wrong value of its own where it reads one)."""
    repo: Any = None
    results_dir: Any = None
    html_dir: Any = None
    benchmark_dir: Any = None
    install_command: Any = None
    harness_suite: Any = None       # the harness suite the benchmarks, pr-check and nightly run


@dataclass(frozen=True)
class AsvConfig:
    path: Path
    data: dict[str, Any]

    @cached_property
    def fields(self) -> AsvConfFields:
        return msgspec.convert(self.data, AsvConfFields)

    @property
    def root(self) -> Path:
        return self.path.parent

    def _dir(self, given: Any, default: str) -> Path:
        p = Path(given or default)
        return p if p.is_absolute() else self.root / p

    @property
    def results_dir(self) -> Path:
        return self._dir(self.fields.results_dir, "results")

    @property
    def html_dir(self) -> Path:
        return self._dir(self.fields.html_dir, "html")

    @property
    def benchmark_dir(self) -> Path:
        return self._dir(self.fields.benchmark_dir, "benchmarks")


def load_config(path: str | Path | None = None) -> AsvConfig:
    """Read asv.conf.json (// comments allowed, as asv reads it) and check what asv would only
    discover halfway through a run: the repository and the benchmark directory."""
    p = Path(path) if path is not None else Path.cwd() / CONFIG_NAME
    p = p.resolve()
    if not p.is_file():
        raise UserError(f"{p}: no asv config file (run from the repository root or pass --config)")
    try:
        from asv import util as asv_util
        data = asv_util.load_json(str(p), js_comments=True)
    except Exception as e:  # asv's UserError, or a JSON error
        raise UserError(f"{p}: not a readable asv config: {e}") from None
    conf = AsvConfig(p, data)
    given = conf.fields.repo
    if not given:
        raise UserError(f"{p}: key 'repo' is missing (the repository to benchmark)")
    repo = Path(given)
    repo = repo if repo.is_absolute() else conf.root / repo
    if "://" not in str(given) and not (repo / ".git").exists() and not (repo / "objects").is_dir():
        raise UserError(f"{p}: key 'repo': {repo} is not a git repository")
    if not conf.benchmark_dir.is_dir():
        raise UserError(f"{p}: key 'benchmark_dir': {conf.benchmark_dir} is not a directory")
    return conf


SUITE_KEY = "harness_suite"   # asv.conf.json: the harness suite the benchmarks, pr-check and nightly run


def configured_suite(conf: AsvConfig) -> Path:
    """The suite file asv.conf.json names ("harness_suite", relative to the config's directory);
    a config from before the key: suite.toml in the benchmark directory."""
    given = conf.fields.harness_suite
    if given is None:
        p = conf.benchmark_dir / "suite.toml"
    elif not isinstance(given, str) or not given.strip():
        raise UserError(f"{conf.path}: key '{SUITE_KEY}' must be a suite file path, got {given!r}")
    else:
        p = Path(given) if Path(given).is_absolute() else conf.root / given
    if not p.is_file():
        raise UserError(f"{conf.path}: key '{SUITE_KEY}': suite file {p} not found "
                        f"(write it, or name the suite with \"{SUITE_KEY}\")")
    return p


# --- running asv ---------------------------------------------------------------------

def asv_argv(args: Sequence[str], conf: AsvConfig, machine_file: Path | None = None) -> list[str]:
    head = [sys.executable, "-m", "harness.ci.asvtool"]
    if machine_file is not None:
        head += ["--machine-file", str(machine_file)]
    return head + ["--", "--config", str(conf.path), *args]


@dataclass
class AsvRun:
    argv: list[str]
    returncode: int
    output: str


def run_asv(args: Sequence[str], conf: AsvConfig, machine_file: Path | None = None,
            env: dict[str, str] | None = None, echo: bool = True,
            timeout_s: float | None = None) -> AsvRun:
    """Run asv, echoing its output to stderr as it comes (CI logs show progress), and keep it."""
    argv = asv_argv(args, conf, machine_file)
    full_env = {**os.environ, **(env or {})}
    lines: list[str] = []
    try:
        proc = subprocess.Popen(argv, cwd=conf.root, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                errors="replace")
    except OSError as e:
        raise UserError(f"cannot start asv ({argv[0]}): {e}") from None
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            if echo:
                sys.stderr.write(line)
                sys.stderr.flush()
        rc = proc.wait(timeout=timeout_s)
    except (KeyboardInterrupt, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
        raise
    return AsvRun(argv, rc, "".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m harness.ci.asvtool [--machine-file PATH] -- ASV-ARGS`."""
    args = list(sys.argv[1:] if argv is None else argv)
    machine_file = None
    if args[:1] == ["--machine-file"]:
        machine_file, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if machine_file is not None:
        from asv.machine import MachineCollection
        path = str(Path(machine_file).expanduser().resolve())
        MachineCollection.get_machine_file_path = staticmethod(lambda: path)
    from asv.main import main as asv_main
    sys.argv = ["asv", *args]
    try:
        asv_main()
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 1
    return 0


# --- reading asv's comparison table --------------------------------------------------

@dataclass(frozen=True)
class CompareRow:
    mark: str            # '+' worse, '-' improved, '' same, 'x' not comparable, '!' newly failed, '*' fixed
    before: str
    after: str
    ratio: str           # as printed; a leading '~' means "beyond the factor but not significant"
    name: str            # benchmark name with its parameters, as asv prints it
    env: str | None      # "machine/env" when asv printed results of several environments

    @property
    def insignificant_change(self) -> bool:
        return self.ratio.startswith("~")


_ROW = re.compile(r"^\|(?P<cells>.*)\|\s*$")
_ENV_SUFFIX = re.compile(r"^(?P<name>.*\)|[^\s\[]+) \[(?P<env>[^\]]+)\]$")


def parse_compare(output: str) -> list[CompareRow]:
    """Rows of the table(s) `asv compare` / `asv continuous` print in tabulate's github format:
    | Change | Before [hash] | After [hash] | Ratio | Benchmark (Parameter) |."""
    rows = []
    for line in output.splitlines():
        m = _ROW.match(line.strip())
        if not m:
            continue
        cells = [c.strip() for c in m.group("cells").split("|")]
        if len(cells) < 5:
            continue
        mark, before, after, ratio = cells[:4]
        name = "|".join(cells[4:]).strip()
        if mark == "Change" or set(mark + before) <= set("-: "):
            continue  # the header and the ---|--- line
        env = None
        em = _ENV_SUFFIX.match(name)
        if em and "/" in em.group("env"):
            name, env = em.group("name"), em.group("env")
        rows.append(CompareRow(mark, before, after, ratio, name, env))
    return rows


# --- reading asv's results -----------------------------------------------------------

@dataclass
class Figure:
    """One benchmark at one parameter combination, at one commit."""
    name: str                      # "bench_engine.Decode.track_ms_per_token('classic')"
    benchmark: str                 # "bench_engine.Decode.track_ms_per_token"
    params: tuple[str, ...]        # unquoted parameter values
    value: float | None            # None: failed; NaN: skipped
    samples: list[float] | None
    stats: dict[str, Any] | None
    version: str | None
    unit: str | None
    env: str = ""
    stderr: str = ""

    @property
    def failed(self) -> bool:
        return self.value is None

    @property
    def skipped(self) -> bool:
        return self.value is not None and isinstance(self.value, float) and math.isnan(self.value)


def _unquote(p: str) -> str:
    try:
        import ast
        v = ast.literal_eval(p)
        return v if isinstance(v, str) else p
    except (ValueError, SyntaxError):
        return p


class _Benchmark(msgspec.Struct):
    """A benchmark as asv's results/benchmarks.json describes it: its unit."""
    unit: Any = None


def load_figures(conf: AsvConfig, machine: str, commit: str,
                 env_name: str | None = None) -> dict[str, Figure]:
    """Every result of `commit` on `machine` (all environments unless env_name), by name."""
    import itertools

    from asv.results import iter_results_for_machine_and_hash

    units: dict[str, str | None] = {}
    bj = conf.results_dir / "benchmarks.json"
    if bj.exists():
        try:
            units = {k: msgspec.convert(v, _Benchmark).unit
                     for k, v in json.loads(bj.read_text()).items() if isinstance(v, dict)}
        except (OSError, ValueError, msgspec.ValidationError):
            units = {}
    out: dict[str, Figure] = {}
    for res in iter_results_for_machine_and_hash(str(conf.results_dir), machine, commit):
        if env_name is not None and res.env_name != env_name:
            continue
        for key in res.get_all_result_keys():
            params = res.get_result_params(key)
            values = res.get_result_value(key, params)
            stats = res.get_result_stats(key, params)
            samples = res.get_result_samples(key, params)
            combos = list(itertools.product(*params)) if params else [()]
            n = len(combos)
            values = values if values is not None else [None] * n
            stats = stats if stats is not None else [None] * n
            samples = samples if samples is not None else [None] * n
            stderr = (res.stderr.get(key) or "") if hasattr(res, "stderr") else ""
            for combo, v, st, sm in zip(combos, values, stats, samples):
                name = key if not combo else f"{key}({', '.join(combo)})"
                out[name] = Figure(name, key, tuple(_unquote(c) for c in combo), v,
                                   list(sm) if sm is not None else None, st,
                                   res.benchmark_version.get(key), units.get(key), res.env_name, stderr)
    return out


def result_commits(conf: AsvConfig, machine: str) -> set[str]:
    """Full hashes of the commits that have results for `machine`."""
    from asv.results import iter_results_for_machine

    return {r.commit_hash for r in iter_results_for_machine(str(conf.results_dir), machine)}


def iter_result_files(conf: AsvConfig, machine: str) -> Iterator[Path]:
    d = conf.results_dir / machine
    if d.is_dir():
        yield from sorted(p for p in d.glob("*.json") if p.name != "machine.json")


if __name__ == "__main__":
    raise SystemExit(main())
