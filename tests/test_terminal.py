"""What a session prints: the compact summary at 80 columns (on real records), the progress on
stderr (plain lines off a terminal, a transient display on one), --json, --quiet, --version."""

from __future__ import annotations

import io
import json
import re
import subprocess
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest
from harness_helpers import clean_env, command_arm, harness_argv, one_line, write_suite
from rich.console import Console

from harness.analyze.verdict import judge
from harness.cli.output import Output, print_summary, say, session_summary
from harness.core.schema import Record, load_record
from harness.render import termsummary
from harness.render import verdictwords as W
from harness.render.finding import verdict_sentence
from harness.render.terminal import RunnerUI

REPO = Path(__file__).resolve().parents[1]
# A real record of the default suite (5 arms, 3 prompts), `harness run` on this CPU host.
DEFAULT = REPO / "tests" / "fixtures" / "default-suite-linux-cpu.json"
# Real records with what the summary must say first: contention past the share (cpu-blas), an
# incomplete record of one run per prompt (mtp-study-h100), six arms (mtp-study-h200).
REPORTS = REPO / "reports"
CONTENDED = REPORTS / "20261202-182230-cpu-blas-linux-cpu.json"
ONE_RUN = REPORTS / "20261205-134629-mtp-study-h100.json"
PROGRESS = re.compile(r"^\[\d+/\d+\] run \d+ ")


def _record(path: Path) -> SimpleNamespace:
    """A Record as the summary reads it, named by its path in the repository."""
    data = msgspec.convert(load_record(json.loads(path.read_text()), str(path)), Record)
    return SimpleNamespace(data=data, path=path.relative_to(REPO))


def _lines(path: Path, width: int = 80, per_prompt: bool = False) -> list[str]:
    s, _ = session_summary(_record(path))
    return [t.plain for t in termsummary.summary_lines(s, width, per_prompt)]


def _row(lines: list[str], arm: str) -> str:
    """An arm's row with its wrapped continuation lines, whitespace collapsed."""
    i = next(i for i, ln in enumerate(lines) if re.match(rf"{re.escape(arm)}( \*\d+)?\s", ln))
    row = [lines[i]]
    while i + len(row) < len(lines) and lines[i + len(row)].startswith(" " * 20):
        row.append(lines[i + len(row)])
    return " ".join(" ".join(row).split())


def test_the_default_suite_fits_80_columns_with_every_arm_and_judge_s_verdicts() -> None:
    lines = _lines(DEFAULT)
    assert len(lines) <= 40 and max(map(len, lines)) <= 80, "\n".join(lines)
    j = judge(msgspec.to_builtins(_record(DEFAULT).data))
    assert [v.arm for v in j.arms] == ["classic", "block2", "block3", "block4", "block3-inexact"]
    for v in j.arms:
        row = _row(lines, v.arm)
        assert row.endswith(W.cell(v)), (row, W.cell(v))       # the verdict cell is verdictwords'
        assert v.tok_s is not None and f" {v.tok_s:.0f} " in row  # median tok/s, as people read it
    # The finding first (the report's own sentence), the way to the report last.
    assert " ".join(" ".join(lines[:4]).split()).startswith(verdict_sentence(j))
    rel = DEFAULT.relative_to(REPO)
    assert lines[-3:] == ["full report, with figures:", f"  harness report {rel} \\",
                          f"    --out {rel.with_suffix('.md')}"]
    # Each label mark has its footnote, in label()'s words; a declined arm gets no speed.
    for v in j.arms:
        if not v.shipping:
            mark = re.search(r" (\*\d+) ", _row(lines, v.arm)).group(1)
            assert f"{mark} {W.label(v)}" in lines
        if v.outcome == "declined":
            assert "x" not in _row(lines, v.arm).split()[-1]


def test_through_a_rich_console_at_80_columns_no_line_is_wider() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True)
    out = Output()
    s, _ = session_summary(_record(DEFAULT))
    say(console, termsummary.summary_lines(s, 80, out.per_prompt))
    text = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())   # the colours
    assert 10 <= len(text.splitlines()) <= 40 and max(map(len, text.splitlines())) <= 80, text


@pytest.mark.parametrize("width", [80, 60])
def test_per_prompt_lines_and_narrow_widths_keep_within_the_width(width: int) -> None:
    lines = _lines(DEFAULT, width, per_prompt=True)
    assert max(len(ln) for ln in lines if "default-suite-linux-cpu.json" not in ln) <= width, "\n".join(lines)
    prompts = [p.name for p in _record(DEFAULT).data.suite.prompts]
    for p in prompts:   # under each of the five arms
        assert sum(ln.strip() == p or ln.strip().startswith(p + " ") for ln in lines) == 5, p


def test_contention_past_the_share_is_said_before_the_finding() -> None:
    lines = _lines(CONTENDED)
    assert lines[0].startswith("contended: ") and max(map(len, lines)) <= 80
    finding = next(i for i, ln in enumerate(lines) if ln.startswith("No speculative arm"))
    assert any("rerun on a quiet host" in ln for ln in lines[:finding])
    assert "C contended" in "\n".join(lines)


def test_too_few_runs_say_so_instead_of_a_number() -> None:
    lines = _lines(ONE_RUN)
    text = "\n".join(lines)
    assert lines[0].startswith("incomplete: 15 of 66 planned runs recorded")   # said first
    assert "too few runs to judge" in text and "1 run" in text
    # No figure the data could not estimate: no percentage in the thousands, no "detectable".
    assert not re.search(r"\d{4,}(\.\d+)?%", text) and "detectable" not in text, text
    assert max(map(len, lines)) <= 80


def test_json_on_stdout_is_the_json_alone_with_the_verdicts(capsys) -> None:
    print_summary(_record(DEFAULT), Output(json="-", quiet=True))
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert out.err == "" and doc["kind"] == "harness.summary" and doc["record"] == str(DEFAULT.relative_to(REPO))
    j = judge(msgspec.to_builtins(_record(DEFAULT).data))
    got = {v["arm"]: v for v in doc["verdicts"]}
    for v in j.arms:
        g = got[v.arm]
        assert g["outcome"] == v.outcome and g["cell"] == W.cell(v) and g["detectable"] == v.detectable
        r = v.reading
        assert (g["ratio"], g["lo"], g["hi"]) == ((None, None, None) if r is None else (r.ratio, r.lo, r.hi))
    assert len(doc["arms"]) == 15   # the per-arm-and-prompt rows, as before


def test_plain_progress_off_a_terminal_is_one_line_per_run_and_no_frames() -> None:
    buf = io.StringIO()
    runs = _record(DEFAULT).data.runs[:3]
    with RunnerUI(Console(file=buf, force_terminal=False, width=80), 3, 0) as ui:
        ui.status("classic on p", 5.0)
        for r in runs:
            ui.finished_run(r, 1.0)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3 and all(PROGRESS.match(ln) for ln in lines), lines
    assert "\x1b" not in buf.getvalue()


def test_the_live_display_on_a_terminal_is_cleared_at_the_end() -> None:
    buf = io.StringIO()
    runs = _record(DEFAULT).data.runs[:8]
    with RunnerUI(Console(file=buf, force_terminal=True, width=80, height=24), 8, 0) as ui:
        for r in runs:
            ui.finished_run(r, 1.0)
    out = buf.getvalue()
    # Erased at the end (transient): after the last erase, nothing printable is left behind.
    tail = out[out.rindex("\x1b[2K"):]
    assert re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", tail).strip() == "", repr(tail)
    assert "runs" in out and "#7 " in out


# --- the CLI, in a subprocess, on the fake engine --------------------------------------

def _suite(tmp: Path) -> Path:
    return write_suite(tmp, [command_arm("classic"), command_arm("b3", 3), command_arm("b3-inexact", 3,
                                                                                        {"SPECDEC_ALLOW_INEXACT": "1"})],
                       prompts=[{"name": "p1", "text": "def fib(n):"}, {"name": "p2", "text": "import os"}],
                       repetitions=2)


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(harness_argv(*args), cwd=tmp, env=clean_env(COLUMNS="80"), capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_run_prints_only_the_summary_on_stdout_and_progress_on_stderr(tmp_path: Path) -> None:
    r = _run(tmp_path, "run", str(_suite(tmp_path)), "--record", "r.json", "--baselines", "b.json")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert 5 <= len(lines) <= 40 and max(map(len, lines)) <= 80, r.stdout
    assert lines[-1] == "full report: harness report r.json --out r.md" and "{" not in r.stdout
    assert not any(PROGRESS.match(ln) for ln in lines)
    assert sum(bool(PROGRESS.match(ln)) for ln in r.stderr.splitlines()) == 12   # 3 arms x 2 prompts x 2


def test_run_json_alone_on_stdout_and_quiet_has_no_progress(tmp_path: Path) -> None:
    r = _run(tmp_path, "run", str(_suite(tmp_path)), "--record", "r.json", "--baselines", "b.json", "--json",
             "--quiet")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)     # the whole of stdout is one JSON document
    assert {v["arm"]: v["outcome"] for v in doc["verdicts"]}["classic"] == "reference"
    assert set(doc["verdicts"][1]) >= {"outcome", "ratio", "lo", "hi", "detectable"}
    assert r.stderr == "", r.stderr   # --quiet: no progress, and no lines for people either


def test_run_json_file_is_written_atomically_and_never_over_a_user_s_file(tmp_path: Path) -> None:
    suite = str(_suite(tmp_path))
    r = _run(tmp_path, "run", suite, "--record", "r.json", "--baselines", "b.json", "--json", "out.json")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["kind"] == "harness.summary" and doc["record"] == "r.json"
    assert r.stdout.splitlines()[-1] == "full report: harness report r.json --out r.md"
    # A summary the harness wrote is replaced; a file of the user's, or the record, is not.
    r = _run(tmp_path, "run", suite, "--record", "r2.json", "--baselines", "b.json", "--json", "out.json")
    assert r.returncode == 0 and json.loads((tmp_path / "out.json").read_text())["record"] == "r2.json"
    (tmp_path / "mine.json").write_text('{"mine": 1}\n')
    line = one_line(_run(tmp_path, "run", suite, "--record", "r3.json", "--json", "mine.json"))
    assert "mine.json" in line and (tmp_path / "mine.json").read_text() == '{"mine": 1}\n'
    assert not (tmp_path / "r3.json").exists()                    # refused before any run
    line = one_line(_run(tmp_path, "run", suite, "--record", "r4.json", "--json", "r4.json"))
    assert "session's own" in line and not (tmp_path / "r4.json").exists()


def test_check_and_baseline_print_lines_for_people_and_json_on_request(tmp_path: Path) -> None:
    suite = str(_suite(tmp_path))
    r = _run(tmp_path, "baseline", "record", suite, "--baselines", "b.json", "--record", "rb.json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0] == "baselines (b.json): 6 stored" and max(map(len, r.stdout.splitlines())) <= 80
    r = _run(tmp_path, "check", suite, "--baselines", "b.json", "--record", "rc.json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0] == "identity against own baselines (b.json): all 6 outputs identical"
    assert max(map(len, r.stdout.splitlines())) <= 80 and "{" not in r.stdout
    r = _run(tmp_path, "check", suite, "--baselines", "b.json", "--record", "rc2.json", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["identity_differs"] == 0
    assert "identity against own baselines" in r.stderr   # people's lines moved to stderr


def test_version_prints_the_installed_version() -> None:
    r = subprocess.run(harness_argv("--version"), env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == f"harness {version('specdec-bench')}\n" and r.stderr == ""


def test_json_before_a_suite_file_leaves_the_suite_to_the_suite() -> None:
    import argparse

    from harness.cli.output import output_of
    args = argparse.Namespace(json="my.toml", suite=None, quiet=False)
    assert output_of(args) == Output(json="-") and args.suite == "my.toml"
    args = argparse.Namespace(json="out.json", suite="my.toml", quiet=True, per_prompt=True)
    assert output_of(args) == Output(json="out.json", quiet=True, per_prompt=True) and args.suite == "my.toml"
