"""`harness init`: make an engine's repository benchmarkable by this harness.

Writes, at the root of the git repository of the working directory:
  asv.conf.json                      asv builds each commit's engine and installs it with the
                                     harness into its own environment (build_command,
                                     install_command); "harness_suite" names the suite
  benchmarks/__init__.py,            a thin asv suite: `from harness.asvbench import *`, so the
  benchmarks/bench_engine.py         benchmark code is the installed harness's
  benchmarks/suite.toml              a starter suite with one command arm
  hosts/README.md                    where the lab's own host specs go (read first)
  .github/workflows/pr-benchmark.yml `harness pr-check` on every pull request
  .github/workflows/nightly.yml      `harness nightly` every night
With --build (an argv, e.g. `cargo build --release`), asv.conf.json's build_command runs it in
asv's checkout of each commit and its install_command puts that built tree where the suite's
`{tree}` finds it, and the starter suite declares the engine with the same `build`, which
pr-check, compare-commits and bisect run in each commit's tree (harness.ci.build).
init also adds the harness's outputs (.asv/, .harness/, results/, html/, records/, baselines/) to .gitignore,
appending only lines it lacks: untracked outputs would make every record "dirty".

An existing file is never overwritten without --force: one line naming them, exit 2.
"""

from __future__ import annotations

import importlib.metadata
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import msgspec

from harness.collect.provenance import harness_distribution
from harness.core.errors import UserError

TEMPLATES = Path(__file__).resolve().parents[1] / "init_templates"
# Repository path -> template file (under init_templates/).
FILES = {
    "asv.conf.json": "asv.conf.json",
    "benchmarks/__init__.py": "benchmarks_init.py",
    "benchmarks/bench_engine.py": "bench_engine.py",
    "benchmarks/suite.toml": "suite.toml",
    "hosts/README.md": "hosts_README.md",
    ".github/workflows/pr-benchmark.yml": "workflows/pr-benchmark.yml",
    ".github/workflows/nightly.yml": "workflows/nightly.yml",
}
IGNORED = (".asv/", "/.harness/", "/results/", "/html/", "/records/", "/baselines/", ".venv/")
PLACEHOLDER_COMMAND = ["{python}", "-m", "MY_ENGINE", "--prompt-file", "{prompt_file}",
                       "--max-tokens", "{max_tokens}", "--seed", "{seed}"]
# With --build and no --command: the built program, named in the commit's tree.
PLACEHOLDER_BUILT = ["{tree}/PATH/TO/MY_ENGINE", "--prompt-file", "{prompt_file}",
                     "--max-tokens", "{max_tokens}", "--seed", "{seed}"]
# asv commands are split like a shell and run in asv's environment, whose python copies a tree.
COPY_TREE = ("python -c \"import shutil, sys; shutil.rmtree(sys.argv[2], ignore_errors=True); "
             "shutil.copytree(sys.argv[1], sys.argv[2], symlinks=True, "
             "ignore=shutil.ignore_patterns('.git'))\" {src} {dst}")
# asv looks a command's program up in its environment's bin/ alone (Environment.find_executable),
# where `cargo` or `make` never is: the build runs through that python, which finds it on PATH.
ON_PATH = ("python -c \"import shutil, subprocess, sys; exe = shutil.which(sys.argv[1]); "
           "sys.exit(subprocess.call([exe, *sys.argv[2:]]) if exe else "
           "'build: ' + sys.argv[1] + ' is not on PATH')\" ")


@dataclass
class InitResult:
    root: Path
    written: list[str] = field(default_factory=list)
    gitignore_added: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def installed_harness_spec() -> tuple[str, str | None]:
    """(pip requirement that installs this harness, warning or None), from how it was installed
    (PEP 610 direct_url.json): a VCS URL at its commit, a local directory, or the version."""
    name = harness_distribution()
    try:
        if name is None:
            raise importlib.metadata.PackageNotFoundError("harness")
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise UserError("the harness is not installed as a distribution; "
                        "pass --harness-spec with the pip requirement that installs it") from None
    text = dist.read_text("direct_url.json")
    if not text:
        return f"{name}=={dist.version}", None
    d = msgspec.json.decode(text, type=_DirectUrl)
    url = str(d.url)
    vcs = d.vcs_info
    if vcs:
        return f"{name} @ {vcs.vcs}+{url}@{vcs.commit_id}".rstrip("@"), None
    if url.startswith("file://"):
        path = unquote(urlparse(url).path)
        return path, (f"the harness requirement is a local path ({path}): it works on this machine "
                      "only; for CI runners pass --harness-spec with a URL")
    return f"{name} @ {url}", None


class _VcsInfo(msgspec.Struct, kw_only=True):
    vcs: str = "git"
    commit_id: str = ""


class _DirectUrl(msgspec.Struct, kw_only=True):
    """A distribution's direct_url.json (PEP 610): where pip installed it from."""
    url: str = ""
    vcs_info: _VcsInfo | None = None


class _Project(msgspec.Struct, kw_only=True):
    name: Any = None


class _PyProject(msgspec.Struct, kw_only=True):
    """What init reads of an engine's pyproject.toml: its [project] name."""
    project: _Project = msgspec.field(default_factory=_Project)


def _git_root(start: Path) -> Path:
    from harness.collect.provenance import repo_root
    root = repo_root(start)
    if root is None:
        raise UserError(f"{start}: not in a git repository; `harness init` writes into an engine's "
                        "repository: run `git init` there first")
    return root


def _engine_project(root: Path) -> tuple[str | None, str]:
    """(the engine's distribution name when the repository is a Python package, else None; a
    project name for asv)."""
    py = root / "pyproject.toml"
    if py.is_file():
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        try:
            name = msgspec.convert(tomllib.loads(py.read_text(encoding="utf-8")), _PyProject).project.name
        except (OSError, tomllib.TOMLDecodeError, msgspec.ValidationError) as e:
            raise UserError(f"{py}: not readable TOML ({e}); fix it or move it aside") from None
        if isinstance(name, str) and name:
            return name, name
    if (root / "setup.py").is_file():
        return root.name, root.name
    return None, root.name


def _branch(root: Path) -> str:
    from harness.collect.provenance import repo_info
    b = repo_info(str(root)).branch
    return b if isinstance(b, str) and b not in ("unknown", "detached") else "main"


def _default_hosts() -> list[str]:
    """This host's host spec when one matches, else every host spec the harness knows."""
    from harness.collect.host import specs as hosts
    from harness.collect.host.info import collect_host
    specs = hosts.load_specs()
    mine = hosts.match_spec(collect_host(), specs)
    return [mine.name] if mine else sorted(specs)


def _indent(lines: list[str], n: int) -> str:
    return "\n".join(" " * n + line for line in lines)


def _asv_arg(part: str) -> str:
    """One argv part in an asv command string: quoted like a shell, braces kept from asv's
    interpolation."""
    return shlex.quote(part).replace("{", "{{").replace("}", "}}")


def asv_build(build: list[str]) -> tuple[list[str], list[str]]:
    """(build_command, install_command's first part) that build a commit like pr-check does: the
    build argv in asv's checkout of the commit, then that tree kept in asv's build cache and
    copied into its environment, where `{tree}` finds it (harness.collect.tree)."""
    from harness.collect.tree import ASV_TREE

    return ([ON_PATH + " ".join(_asv_arg(p) for p in build),
             COPY_TREE.format(src="{build_dir}", dst=f"{{build_cache_dir}}/{ASV_TREE}")],
            [COPY_TREE.format(src=f"{{build_cache_dir}}/{ASV_TREE}", dst=f"{{env_dir}}/{ASV_TREE}")])


def engine_table(project: str, build: list[str]) -> tuple[str, str]:
    """(the engine's name, its [engines.NAME] table) for a starter suite whose engine is built."""
    from harness.core.declare import builtin

    name = project if builtin(project) is None else f"{project}-engine"
    return name, (f"\n# Your engine, built in each commit's own tree before it is measured (`harness init "
                  f"--build`):\n# pr-check, compare-commits and bisect run `build` there once (kept in "
                  f".harness/builds/),\n# asv's build_command the same; the arm names the program with "
                  f"{{tree}}.\n[engines.{json.dumps(name)}]\nbuild = {json.dumps(build)}\n")


def render(root: Path, harness_spec: str, command: list[str], hosts: list[str],
           target: str = "..", build: list[str] | None = None) -> dict[str, str]:
    """Repository path -> file content."""
    engine, project = _engine_project(root)
    branch = _branch(root)
    spec = shlex.quote(harness_spec)
    install_harness = f"in-dir={{env_dir}} python -m pip install --no-compile {spec}"
    if build:
        build_cmd, install = asv_build(build)
        install.append(install_harness)
        uninstall: list[str] = []
        note = ("The engine's build (harness init --build), run in the commit's checkout\n    // "
                "({build_dir}) by the environment's python, which finds it on PATH (asv itself runs only\n"
                "    // programs in the environment's bin/); that tree is kept in asv's build cache and\n"
                "    // copied into the environment, where the suite's {tree} finds it.")
        ci = ["python3 -m venv .venv", ".venv/bin/python -m pip install -q --upgrade pip",
              f".venv/bin/python -m pip install -q {spec}"]
    elif engine is not None:
        build_cmd = ["python -m pip wheel --no-deps -w {build_cache_dir} {build_dir}"]
        install = ["in-dir={env_dir} python -m pip install --no-compile {wheel_file}", install_harness]
        uninstall = ["return-code=any python -m pip uninstall -y {project}"]
        note = "A wheel of the engine's package at that commit."
        ci = ["python3 -m venv .venv", ".venv/bin/python -m pip install -q --upgrade pip",
              f".venv/bin/python -m pip install -q {spec}", ".venv/bin/python -m pip install -q -e ."]
    else:
        build_cmd, install, uninstall = [], [install_harness], []
        note = ("No pyproject.toml or setup.py here, so nothing is built:\n    // add the engine's build "
                "(run in the commit's checkout, {build_dir}), and make\n    // its command reachable from "
                "any directory (the benchmarks run in a temporary one).")
        ci = ["python3 -m venv .venv", ".venv/bin/python -m pip install -q --upgrade pip",
              f".venv/bin/python -m pip install -q {spec}"]
    values = {
        "@@PROJECT@@": project, "@@BRANCH@@": branch, "@@BUILD_NOTE@@": note,
        "@@BUILD_COMMAND@@": json.dumps(build_cmd), "@@INSTALL_COMMAND@@": json.dumps(install),
        "@@UNINSTALL_COMMAND@@": json.dumps(uninstall),
        "@@NAME@@": project, "@@TARGET@@": target, "@@COMMAND@@": json.dumps(command),
        "@@HOSTS@@": ", ".join(hosts), "@@INSTALL@@": _indent(ci, 10),
    }
    out = {}
    for dest, template in FILES.items():
        text = (TEMPLATES / template).read_text(encoding="utf-8")
        for k, v in values.items():
            text = text.replace(k, v)
        out[dest] = text
    if build:
        # The starter arm runs the declared engine, whose table says how a commit is built.
        name, table = engine_table(project, build)
        suite = out["benchmarks/suite.toml"]
        assert suite.count('engine = "command"') == 1, "the starter suite's arm changed: update init"
        out["benchmarks/suite.toml"] = suite.replace('engine = "command"', f"engine = {json.dumps(name)}") + table
    return out


def _gitignore(root: Path) -> list[str]:
    """Append the harness's outputs the repository's .gitignore lacks; returns those lines."""
    path = root / ".gitignore"
    have = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    missing = [line for line in IGNORED if line not in {h.strip() for h in have}]
    if missing:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        sep = "" if not text or text.endswith("\n") else "\n"
        path.write_text(text + sep + "# harness and asv outputs (harness init)\n" + "\n".join(missing) + "\n",
                        encoding="utf-8")
    return missing


def init(start: str | Path = ".", force: bool = False, harness_spec: str | None = None,
         command: list[str] | None = None, hosts: list[str] | None = None, target: str = "..",
         build: list[str] | None = None) -> InitResult:
    """Write the files into the git repository containing `start`; see the module docstring."""
    where = Path(start)
    if not where.exists():
        raise UserError(f"{start}: no such directory; pass --dir with a directory of the engine's git repository")
    if not where.is_dir():
        raise UserError(f"{start}: not a directory; pass --dir with a directory of the engine's git repository")
    root = _git_root(where.resolve())
    warnings: list[str] = []
    if harness_spec is None:
        harness_spec, warning = installed_harness_spec()
        if warning:
            warnings.append(warning)
    if hosts:
        # Each name becomes a CI runner label: a typo would give a workflow no runner ever takes.
        from harness.collect.host.specs import load_specs, repo_specs_dir
        known = load_specs()
        local = root / "hosts"
        if local.is_dir() and repo_specs_dir() != local:
            known = {**known, **load_specs(local)}
        unknown = [h for h in hosts if h not in known]
        if unknown:
            raise UserError(f"unknown host spec {', '.join(map(repr, unknown))} (known: "
                            f"{', '.join(sorted(known))}; a lab's own goes in {local}/NAME.json)")
    files = render(root, harness_spec, command or (PLACEHOLDER_BUILT if build else PLACEHOLDER_COMMAND),
                   hosts or _default_hosts(), target, build)
    existing = [p for p in files if (root / p).exists()]
    if existing and not force:
        raise UserError(f"{root}: would overwrite {', '.join(existing)}; move them aside or pass --force")
    result = InitResult(root, warnings=warnings)
    for rel, text in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        result.written.append(rel)
    result.gitignore_added = _gitignore(root)
    if command is None:
        result.warnings.append("benchmarks/suite.toml runs a placeholder command (MY_ENGINE): put your "
                               "engine's argv in its [[arms]] command, or re-run with --command")
    elif build and not any("{tree}" in part for part in command):
        result.warnings.append("--build is given but --command does not name {tree}: each commit is built in "
                               "its own tree, so name the built program there, e.g. {tree}/target/release/NAME")
    return result
