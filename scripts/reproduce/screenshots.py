"""Screenshots of what a person reads, for the README and docs/img/: the terminal summary at 80
columns, the top of a report and a PR comment as GitHub renders Markdown, each drawn by headless
Chromium from a small HTML page (markdown-it-py, which rich already installs, renders the
Markdown; <details> stay folded as on GitHub).

  python scripts/reproduce/screenshots.py --terminal bench.out --report reports/X.md \
      --comment build/artifacts/pr-comment.md --out docs/img

The dashboard's screenshot is taken by its own test (tests/test_dashboard.py).
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CSS = """
body { margin: 0; padding: 24px 32px; background: #fff; color: #1f2328; width: 880px;
       font: 15px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
table { border-collapse: collapse; margin: 12px 0; font-size: 14px; }
th, td { border: 1px solid #d1d9e0; padding: 5px 11px; }
th { background: #f6f8fa; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; font-size: 13px; }
h1 { font-size: 26px; border-bottom: 1px solid #d1d9e0; padding-bottom: 6px; }
h2 { font-size: 20px; border-bottom: 1px solid #d1d9e0; padding-bottom: 4px; }
img { max-width: 100%; }
details summary { cursor: pointer; color: #0969da; }
pre.term { background: #1e1e1e; color: #d4d4d4; padding: 16px 20px; border-radius: 6px;
           font: 14px/1.35 "DejaVu Sans Mono", Menlo, monospace; width: 80ch; white-space: pre; }
"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return str(shutil.which(name))
    sys.exit("screenshots: no headless Chromium on PATH: install one with `make chromium`")


def markdown_page(text: str, base: Path) -> str:
    """Markdown as GitHub shows it (tables, raw HTML for <details>), images resolved from `base`."""
    from markdown_it import MarkdownIt
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    return (f'<!doctype html><html><head><meta charset="utf-8"><base href="{base.resolve().as_uri()}/">'
            f"<style>{CSS}</style></head><body>{body}</body></html>")


def terminal_page(text: str) -> str:
    return (f'<!doctype html><html><head><meta charset="utf-8"><style>{CSS} body {{ width: auto; }}'
            f'</style></head><body><pre class="term">{html.escape(text)}</pre></body></html>')


def shoot(page: str, out: Path, height: int) -> None:
    """Draw `page` at 944 px wide and `height` px tall into the PNG `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "page.html"
        src.write_text(page)
        argv = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                f"--user-data-dir={tmp}/profile", f"--window-size=944,{height}",
                f"--screenshot={out}", src.as_uri()]
        subprocess.run(argv, check=True, capture_output=True, timeout=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--terminal", type=Path, help="a captured stdout of `harness run` (80 columns)")
    ap.add_argument("--report", type=Path, help="a rendered report (Markdown)")
    ap.add_argument("--comment", type=Path, help="a PR comment (Markdown)")
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.terminal:
        text = args.terminal.read_text()
        shoot(terminal_page(text), args.out / "terminal.png", 60 + 19 * (text.count("\n") + 1) + 40)
    if args.report:
        shoot(markdown_page(args.report.read_text(), args.report.parent), args.out / "report.png", 1100)
    if args.comment:
        shoot(markdown_page(args.comment.read_text(), args.comment.parent), args.out / "pr-comment.png", 560)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
