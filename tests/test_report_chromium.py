"""The default suite's report as a reader opens it: `harness report --out` writes the Markdown and
its figures, the Markdown is rendered to HTML as GitHub renders it (CommonMark with tables, the
<details> blocks kept), and headless Chromium loads the page: every figure the first screen links
loads (no broken image), at least four of them, and nothing errs."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_helpers import REPO, cli_in_process, console_errors, probe_page

from harness.render.dashboard import markdown_html

DEFAULT = REPO / "reports" / "20261207-035522-default-linux-cpu.json"

pytestmark = pytest.mark.e2e


def test_the_default_reports_figures_load_in_chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "default.md"
    r = cli_in_process(["report", str(DEFAULT), "--out", str(md)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    page = tmp_path / "default.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>"
                    f"{markdown_html(md.read_text())}</body></html>")
    dom, stderr = probe_page(page, tmp_path / "profile")
    assert dom["errors"] == [] and dom["broken"] == [] and not console_errors(stderr), (dom, stderr[-2000:])
    first_screen = md.read_text().split("\n## Appendix\n", 1)[0]
    linked = [ln for ln in first_screen.splitlines() if ln.startswith("![")]
    assert len(linked) >= 4 and len(dom["loaded"]) >= len(linked), (linked, dom["loaded"])
    assert all(src.endswith(".svg") for src in dom["loaded"]), dom["loaded"]
