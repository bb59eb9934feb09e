"""Shared helpers for the harness tests: fixture suites and the real CLI in a subprocess."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
FAKE_ENGINE = REPO / "tests" / "fixtures" / "fake_engine.py"


def fake_command() -> list[str]:
    return [sys.executable, str(FAKE_ENGINE), "--prompt-file", "{prompt_file}",
            "--max-tokens", "{max_tokens}", "--block", "{block}"]


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def command_arm(name: str, block: int = 1, env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    arm: dict[str, Any] = {"name": name, "pairing": "fx", "engine": "command", "block": block,
                           "command": fake_command()}
    if env:
        arm["env"] = env
    arm.update(extra)
    return arm


def write_suite(tmp: Path, arms: list[dict[str, Any]], prompts: list[dict[str, Any]] | None = None,
                name: str = "fx", pairings: list[dict[str, Any]] | None = None, **settings: Any) -> Path:
    """A fixture suite on empty model dirs (the fake engine never reads them)."""
    for d in ("target", "drafter"):
        (tmp / d).mkdir(exist_ok=True)
    base: dict[str, Any] = {"name": name, "max_tokens": 8, "repetitions": 2, "warmups": 0,
                            "cooldown_s": 0}
    base.update(settings)
    lines = [f"{k} = {toml_value(v)}" for k, v in base.items() if not isinstance(v, dict)]
    for k, v in base.items():
        if isinstance(v, dict):
            lines.append(f"[{k}]")
            lines += [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    if "quiet" not in base:
        lines += ["[quiet]", "enabled = false"]
    if "watch" not in base:
        lines += ["[watch]", "enabled = false"]
    for p in pairings or [{"name": "fx", "target": str(tmp / "target"), "drafter": str(tmp / "drafter")}]:
        lines.append("[[pairings]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in p.items()]
    for a in arms:
        lines.append("[[arms]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in a.items()]
    for p in prompts or [{"name": "p1", "text": "def fib(n):"}]:
        lines.append("[[prompts]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in p.items()]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def declared_engine_suite(name: str, declaration: str) -> str:
    """A one-arm suite whose engine `mine` is a do-nothing command with `declaration` (TOML lines
    of its [engines.mine] table): for tests of what an engine may declare."""
    return f"""name = "{name}"
[engines.mine]
command = ["{{python}}", "-c", "pass"]
{declaration}
[[pairings]]
name = "p"
target = "t"
[[arms]]
name = "a"
pairing = "p"
engine = "mine"
[[prompts]]
name = "x"
text = "hello"
"""


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's env without engine-prefixed vars, so no override leaks in by accident."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPECDEC_", "MLX_", "FAKE_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def harness_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness", *args]


def run_cli(*args: str, cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(harness_argv(*args), cwd=cwd, env=clean_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def last_json(stdout: str) -> dict[str, Any]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    assert lines, "no stdout"
    return json.loads(lines[-1])


def load(path: Path) -> dict[str, Any]:
    """A JSON file as a reader sees it; a record with its run journal (harness.collect.record)."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict) and data.get("kind") == "harness.record":
        from harness.collect.record import read_record
        return read_record(Path(path))
    return data


def write_record(tmp: Path, name: str, rec: dict[str, Any]) -> str:
    """A record dict written as JSON into tmp; its path, as `harness report` takes it."""
    p = tmp / name
    p.write_text(json.dumps(rec))
    return str(p)


def md_section(md: str, title: str) -> str:
    """The body of a report's `## title` section."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    assert m, f"no section {title!r}"
    return m.group(1)


def cli_in_process(argv: list[str], cwd: Path, monkeypatch: Any, capsys: Any) -> subprocess.CompletedProcess:
    """The CLI's own entry (harness.cli.main) in this process: what the console script runs,
    without an interpreter start and imports per call. Inherited engine variables (SPECDEC_,
    MLX_, FAKE_) are dropped, its signal handlers and unraisable hook are put back afterwards, and argparse's exit
    is its exit status."""
    import signal

    from harness.cli import main
    monkeypatch.chdir(cwd)
    for k in list(os.environ):
        if k.startswith(("SPECDEC_", "MLX_", "FAKE_")):
            monkeypatch.delenv(k)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)   # main() sets its own
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 2
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(argv, rc, out.out, out.err)


def one_line(r: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refusal: exit 2, one line starting `harness: `, no traceback."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("harness: ") and "Traceback" not in r.stderr, r.stderr[-2000:]
    return lines[0]


def snapshot(root: Path, dirs: bool = False) -> dict[str, bytes | None]:
    """Every file under root by relative path, its bytes; dirs: directories too (None), so that a
    directory made where nothing should be shows."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*")) if dirs or p.is_file()}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def asv_project(t: Path) -> Path:
    """A git repository with an asv config, two commits on main, and the packaged asv suite."""
    proj = t / "proj"
    (proj / "benchmarks").mkdir(parents=True, exist_ok=True)
    (proj / "asv.conf.json").write_text(json.dumps({"version": 1, "repo": ".", "benchmark_dir": "benchmarks",
                                                    "harness_suite": "benchmarks/suite.toml"}) + "\n")
    (proj / "benchmarks" / "suite.toml").write_bytes((REPO / "benchmarks" / "suite.toml").read_bytes())
    git(proj, "init", "-q", "-b", "main")
    git(proj, "add", "-A")
    git(proj, "commit", "-qm", "one")
    git(proj, "commit", "-qm", "two", "--allow-empty")
    return proj


def one_commit_repo(tmp: Path) -> Path:
    """A git repository with one commit (a README): a check of HEAD against itself."""
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    git(repo, "add", "README")
    git(repo, "commit", "-q", "-m", "one")
    return repo


def tree_command() -> list[str]:
    """The fake engine's command as one that reads each commit's code from its tree ({python}),
    so a check of two commits is not refused for running one executable outside both."""
    return ["{python}", *fake_command()[1:]]


# --- headless Chromium: a page's DOM as it builds it, with a probe of errors and images ---

PAGE_PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push(String(e.message || e.target.src)); }, true);
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var out = {errors: window.__errors,
    broken: imgs.filter(function (i) { return !i.complete || i.naturalWidth === 0; }).map(function (i) { return i.src; }),
    loaded: imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).map(function (i) { return i.src; }),
    badges: Array.prototype.map.call(document.querySelectorAll('.badge'), function (b) { return b.textContent; }),
    declined_rows: document.querySelectorAll('tr.arm-row.declined').length,
    declined_points: document.querySelectorAll('svg.series rect.pt.declined').length,
    svgs: document.querySelectorAll('svg.series').length,
    text: document.body.innerText};
  var el = document.createElement('pre'); el.id = 'harness-probe';
  el.textContent = 'PROBE' + JSON.stringify(out) + 'PROBE';
  document.body.appendChild(el);
});
</script>"""


# Where macOS installs Google Chrome (an app bundle, not on PATH); GitHub's macOS runners have it.
MAC_CHROME = "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.path.exists(MAC_CHROME):
        return MAC_CHROME
    if sys.platform == "darwin":   # `make chromium` installs one on Debian only
        pytest.skip(f"no Google Chrome at {MAC_CHROME}: the dashboard test drives a headless "
                    "browser; install Google Chrome to run it")
    pytest.fail("no headless Chromium on PATH: install one with `make chromium`")


def chromium_argv(profile: Path) -> list[str]:
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,900",
            "--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=5000"]


def probe_page(page: Path, profile: Path) -> tuple[dict, str]:
    """The page's DOM as Chromium builds it (a copy beside it carries the probe script)."""
    copy = page.with_name("probe-" + page.name)
    copy.write_text(page.read_text().replace("</body>", PAGE_PROBE + "</body>"))
    try:
        r = subprocess.run(chromium_argv(profile) + ["--dump-dom", copy.as_uri()], capture_output=True, text=True,
                           timeout=60)
    finally:
        copy.unlink()
    m = re.search(r'<pre id="harness-probe">PROBE(.*?)PROBE</pre>', r.stdout, re.S)
    assert m, f"the page did not load: {r.stdout[-1500:]} {r.stderr[-1500:]}"
    return json.loads(html.unescape(m.group(1))), r.stderr


def console_errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]


def whole_record(**parts: Any) -> dict[str, Any]:
    """A record with every key the typed Record requires (an empty suite, no runs), `parts` over it."""
    return {"schema_version": 5, "kind": "harness.record", "session_id": "t", "created": "2026-12-07T00:00:00",
            "suite": {"name": "t", "settings": {}, "pairings": [], "arms": [], "prompts": []}, "runs": [], **parts}


def sequential_section(looks: list[dict[str, Any]], design: dict[str, Any] | None = None,
                       **top: Any) -> dict[str, Any]:
    """A whole `sequential` block: each look's figures (arm -> a Paired's dict), a design
    (threshold 10%, alpha 5%, `design` over it), the rest from `top` or stand-ins."""
    d = {"threshold": 0.1, "alpha": 0.05, "looks": len(looks), "figures": 1, "power": 0.8,
         "alpha_per_test": 0.05, "min_effect": 0.05, **(design or {})}
    return {"design": d, "budget_s": None, "rounds": len(looks), "stopped": "budget",
            "stopped_because": "the budget was spent", **top,
            "looks": [{"index": i + 1, "rounds": i + 1, "elapsed_s": float(i + 1), "resolved": False, "figures": f}
                      for i, f in enumerate(looks)]}
