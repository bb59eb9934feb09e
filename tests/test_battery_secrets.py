"""The battery: secrets never reach an output, through the real CLI in this process.

A secret is a variable whose name says so (TOKEN, KEY, SECRET, ...), from the harness's own
environment or from an arm's `env` in the suite. Its value is redacted wherever it is bound to
its name, whatever its length, and anywhere as a bare substring from harness.core.redact.MIN_LEN
characters (a shorter bare value is left: replacing every "xyz" would corrupt the record). A
resumed session takes the values its record no longer holds from the environment again.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import msgspec
import pytest
from harness_helpers import cli_in_process, command_arm, load, write_suite

from harness.core import redact

ARM_TOKEN = "tok-abc-123456"          # an arm's env in the suite, long enough to find bare
SHORT_KEY = "xyz"                     # the environment's, too short to find bare
KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")


@pytest.fixture(autouse=True)
def _own_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suites' secrets are remembered process-wide: each test starts with none and leaves none.
    monkeypatch.setattr(redact, "_SUITE_ENV", {}, raising=False)


def _small_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment the engines inherit, cut down, so a printed environment fits the kept tail."""
    for k in list(os.environ):
        if k not in KEEP_ENV:
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SHORT_KEY)


def _suite(tmp: Path) -> Path:
    # AWS_ as an override prefix: the inherited short secret is an override in force, in labels.
    return write_suite(tmp, [command_arm("ok", env={"ARM_SERVICE_TOKEN": ARM_TOKEN}),
                             command_arm("leaky", env={"ARM_SERVICE_TOKEN": ARM_TOKEN, "FAKE_PRINT_ENV": "1"})],
                       override_prefixes=["SPECDEC_", "AWS_"])


def _leaks(text: str) -> list[str]:
    found = [v for v in (ARM_TOKEN,) if v in text]
    # The short value counts where it is bound to its name (bare, "xyz" is any three letters).
    for form in (f"AWS_SECRET_ACCESS_KEY={SHORT_KEY}", f'"AWS_SECRET_ACCESS_KEY": "{SHORT_KEY}"',
                 f"AWS_SECRET_ACCESS_KEY: {SHORT_KEY}", f"ARM_SERVICE_TOKEN={ARM_TOKEN}"):
        if form in text:
            found.append(form)
    return found


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One session of both arms, its journal as it stood after every run, its terminal output,
    its report on stdout and in a file; made once for the cases below."""
    from harness.collect.record import Record
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("secrets")
    try:
        mp.setattr(redact, "_SUITE_ENV", {}, raising=False)
        _small_env(mp)
        suite = _suite(tmp)
        rec = tmp / "r.json"
        journals: list[str] = []
        add_run = Record.add_run

        def watched(self, run):
            kept = add_run(self, run)
            if self.journal_path.exists():      # the journal as a reader sees it mid-session
                journals.append(self.journal_path.read_text())
            return kept
        mp.setattr(Record, "add_run", watched)
        cap = _Capture()
        try:
            r = cli_in_process(["run", str(suite), "--record", str(rec)], tmp, mp, cap)
            mp.setattr(Record, "add_run", add_run)
            md = tmp / "r.md"
            rep = cli_in_process(["report", str(rec), "--out", str(md)], tmp, mp, cap)
            out = cli_in_process(["report", str(rec)], tmp, mp, cap)
        finally:
            cap.close()
        return {"run": r, "record": rec, "journals": journals, "report_file": md.read_text(),
                "report_stdout": out.stdout, "report": rep, "tmp": tmp}
    finally:
        mp.undo()


class _Capture:
    """capsys's readouterr() for a module-scoped session: sys.stdout and sys.stderr are swapped for
    buffers while a command runs, and the streams before them put back at each read."""

    def __init__(self) -> None:
        import sys
        self.saved = sys.stdout, sys.stderr
        self._swap()

    @staticmethod
    def _swap() -> None:
        import io
        import sys
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()

    def readouterr(self):
        import sys
        from types import SimpleNamespace
        got = SimpleNamespace(out=sys.stdout.getvalue(), err=sys.stderr.getvalue())
        self._swap()
        return got

    def close(self) -> None:
        import sys
        sys.stdout, sys.stderr = self.saved


def test_the_session_ran_both_arms_and_the_leaky_one_printed_its_env(session) -> None:
    r = session["run"]
    assert r.returncode == 1, r.stderr[-2000:]        # the leaky arm's runs failed, the session went on
    runs = load(session["record"])["runs"]
    leaky = [x for x in runs if x["arm"] == "leaky"]
    assert leaky and all(x["status"] == "failed" for x in leaky)
    tail = leaky[0]["stderr_tail"] or ""
    assert "ARM_SERVICE_TOKEN=[redacted $ARM_SERVICE_TOKEN]" in tail, tail
    assert "AWS_SECRET_ACCESS_KEY=[redacted $AWS_SECRET_ACCESS_KEY]" in tail, tail
    assert all(x["status"] == "ok" for x in runs if x["arm"] == "ok")


OUTPUTS = ["record file", "record suite's arm env", "journal mid-session", "run labels", "overrides",
           "terminal stdout", "terminal stderr", "report file", "report stdout"]


@pytest.mark.parametrize("where", OUTPUTS)
def test_no_secret_value_in(where: str, session) -> None:
    rec = session["record"]
    data = json.loads(Path(rec).read_text())
    text = {
        "record file": lambda: Path(rec).read_text(),
        "record suite's arm env": lambda: json.dumps([a.get("env") for a in data["suite"]["arms"]]),
        "journal mid-session": lambda: "\n".join(session["journals"]),
        "run labels": lambda: json.dumps([x.get("label") for x in load(rec)["runs"]]),
        "overrides": lambda: json.dumps([x.get("overrides") for x in load(rec)["runs"]]),
        "terminal stdout": lambda: session["run"].stdout,
        "terminal stderr": lambda: session["run"].stderr,
        "report file": lambda: session["report_file"],
        "report stdout": lambda: session["report_stdout"],
    }[where]()
    assert text.strip(), f"nothing to look at in the {where}"
    if where == "journal mid-session":
        assert session["journals"], "no journal was read while the session ran"
    assert _leaks(text) == [], f"{where}: {_leaks(text)}"


def test_the_labels_say_which_secret_was_in_force_without_its_value(session) -> None:
    labels = {x["label"] for x in load(session["record"])["runs"] if x["arm"] == "ok"}
    assert any("ARM_SERVICE_TOKEN=[redacted $ARM_SERVICE_TOKEN]" in lab for lab in labels), labels
    assert any("AWS_SECRET_ACCESS_KEY=[redacted $AWS_SECRET_ACCESS_KEY]" in lab for lab in labels), labels


# --- the rules, one form each ---------------------------------------------------------------

BOUND = {
    "NAME=value": "AWS_SECRET_ACCESS_KEY=xyz",
    "NAME: value": "AWS_SECRET_ACCESS_KEY: xyz",
    "json pair": '{"AWS_SECRET_ACCESS_KEY": "xyz"}',
    "python dict repr": "{'AWS_SECRET_ACCESS_KEY': 'xyz'}",
    "shell export quoted": 'export AWS_SECRET_ACCESS_KEY="xyz"',
    "in a sentence": "overrides in force: AWS_SECRET_ACCESS_KEY=xyz, SPECDEC_PROFILE=1",
    "another value bound to the name": "AWS_SECRET_ACCESS_KEY=rotated-since",
}


@pytest.mark.parametrize("text", BOUND.values(), ids=BOUND.keys())
def test_a_short_secret_bound_to_its_name_is_redacted(text: str) -> None:
    got = redact.redact({"t": text}, {"AWS_SECRET_ACCESS_KEY": "xyz"})["t"]
    assert "[redacted $AWS_SECRET_ACCESS_KEY]" in got and "xyz" not in got.replace("$", ""), got


@pytest.mark.parametrize("container", ["env mapping", "overrides mapping", "argv"])
def test_a_short_secret_in_a_mapping_or_argv_is_redacted(container: str) -> None:
    obj = {"env mapping": {"env": {"AWS_SECRET_ACCESS_KEY": "xyz"}},
           "overrides mapping": {"overrides": {"AWS_SECRET_ACCESS_KEY": "xyz", "SPECDEC_PROFILE": "1"}},
           "argv": {"command": ["env", "AWS_SECRET_ACCESS_KEY=xyz", "engine"]}}[container]
    got = json.dumps(redact.redact(obj, {"AWS_SECRET_ACCESS_KEY": "xyz"}))
    assert "xyz" not in got.replace("$AWS", "") and "[redacted $AWS_SECRET_ACCESS_KEY]" in got, got
    assert '"SPECDEC_PROFILE": "1"' in got or container != "overrides mapping", got


@pytest.mark.parametrize("value, kept", [("xyz", True), ("1", True), ("abcdef", False)],
                         ids=["short bare value stays", "one digit stays", "six characters go"])
def test_a_bare_value_is_replaced_only_from_the_minimum_length(value: str, kept: bool) -> None:
    rec = {"text": f"made {value} tokens", "n": f"{value}0"}
    got = redact.redact(rec, {"SOME_KEY": value})
    assert (got == rec) is kept, got


def test_an_arm_env_secret_is_redacted_once_its_suite_is_loaded(tmp_path: Path) -> None:
    from harness.collect.suite import load_suite
    before = redact.redact({"x": f"uses {ARM_TOKEN}"}, {})
    assert before["x"] == f"uses {ARM_TOKEN}"              # not a secret until a suite says so
    load_suite(write_suite(tmp_path, [command_arm("a", env={"ARM_SERVICE_TOKEN": ARM_TOKEN})]))
    assert redact.redact({"x": f"uses {ARM_TOKEN}"}, {})["x"] == "uses [redacted $ARM_SERVICE_TOKEN]"


# --- resume: the record keeps no secret, so the environment gives it back ----------------------

def _interrupted_record(tmp: Path, monkeypatch, capsys) -> tuple[Path, Path]:
    """A finished session made incomplete: its last run taken out, as a kill would leave it."""
    suite = write_suite(tmp, [command_arm("a", env={"ARM_SERVICE_TOKEN": ARM_TOKEN})], repetitions=2)
    rec = tmp / "r.json"
    r = cli_in_process(["run", str(suite), "--record", str(rec)], tmp, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(rec.read_text())
    data["runs"] = data["runs"][:-1]
    data.update(complete=False, finished=None)
    rec.write_text(json.dumps(data))
    return suite, rec


def test_resume_without_the_secret_in_the_environment_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    _, rec = _interrupted_record(tmp_path, monkeypatch, capsys)
    assert ARM_TOKEN not in rec.read_text()
    monkeypatch.setattr(redact, "_SUITE_ENV", {}, raising=False)   # a new process: it never loaded the suite
    monkeypatch.delenv("ARM_SERVICE_TOKEN", raising=False)
    before = rec.read_bytes()
    r = cli_in_process(["run", "--resume", str(rec)], tmp_path, monkeypatch, capsys)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines[0].startswith("harness: ") and "set ARM_SERVICE_TOKEN in the environment" in lines[0], lines
    assert rec.read_bytes() == before


def test_resume_runs_the_arm_with_the_environments_value_not_the_marker(tmp_path: Path, monkeypatch,
                                                                        capsys) -> None:
    from harness.collect import engines
    _, rec = _interrupted_record(tmp_path, monkeypatch, capsys)
    monkeypatch.setattr(redact, "_SUITE_ENV", {}, raising=False)
    monkeypatch.setenv("ARM_SERVICE_TOKEN", ARM_TOKEN)
    seen: list[str | None] = []
    spawn = engines.CommandAdapter._spawn

    def spy(argv, env, *rest):
        seen.append(env.get("ARM_SERVICE_TOKEN"))
        return spawn(argv, env, *rest)
    monkeypatch.setattr(engines.CommandAdapter, "_spawn", staticmethod(spy))
    r = cli_in_process(["run", "--resume", str(rec)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert seen == [ARM_TOKEN], seen
    assert ARM_TOKEN not in rec.read_text() and ARM_TOKEN not in r.stdout + r.stderr
    assert load(rec)["complete"] is True


def test_a_subprocess_session_keeps_the_short_secret_out_of_its_terminal(tmp_path: Path) -> None:
    # The console script itself, as a user runs it: what reaches a real terminal's pipes.
    from harness_helpers import clean_env, harness_argv
    suite = _suite(tmp_path)
    env = {k: v for k, v in clean_env(AWS_SECRET_ACCESS_KEY=SHORT_KEY).items()
           if k in KEEP_ENV or k == "AWS_SECRET_ACCESS_KEY"}
    r = subprocess.run(harness_argv("run", str(suite), "--record", str(tmp_path / "r.json")), cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]
    assert _leaks(r.stdout) == [] and _leaks(r.stderr) == [], (_leaks(r.stdout), _leaks(r.stderr))


@pytest.mark.parametrize("value", ["abc", "a-long-secret-value-42"])
def test_an_override_that_is_a_secret_is_named_without_its_value_in_the_asv_label(value: str) -> None:
    # The label is the asv benchmark's name: asv keeps it in results, the dashboard and PR comments.
    from harness.ci.asvsession import SuiteFile, arm_specs
    suite = {"override_prefixes": ["MYENG_"], "arms": [
        {"name": "b3", "engine": "command", "block": 3, "env": {"MYENG_AUTH_TOKEN": value, "MYENG_TRACE": "2"}}]}
    (spec,) = arm_specs(msgspec.convert(suite, SuiteFile), environ={})
    assert spec.label == "b3 [not shipping: MYENG_AUTH_TOKEN, MYENG_TRACE=2]"
    assert value not in spec.label


def test_a_compare_workers_log_keeps_no_secret_once_it_is_closed(tmp_path: Path, monkeypatch) -> None:
    # The log is the worker's raw stderr (what an in-process engine printed), kept beside a comparison.
    from harness.collect.worker import Worker
    monkeypatch.setenv("LAB_API_TOKEN", "tok-0123456789")
    w = Worker("base", tmp_path, {"arms": []}, tmp_path / "logs")
    w.log_path.parent.mkdir(parents=True)
    w.log_path.write_text("loading... LAB_API_TOKEN=tok-0123456789\nauth with tok-0123456789 failed\n")
    w.close()
    text = w.log_path.read_text()
    assert "tok-0123456789" not in text and text.count("[redacted $LAB_API_TOKEN]") == 2, text
