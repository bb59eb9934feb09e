"""What people see in a terminal while a session runs, on stderr: a live progress bar over the
last few runs, one line each, cleared when the runs end (transient, so no stale copy stays in
the scrollback); one plain line per run when stderr is not a terminal (a log file, a pipe), with
no redrawn frames. The summary after the session is harness.render.termsummary's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn
from rich.table import Column
from rich.text import Text

from harness.core.runs import as_run
from harness.core.schema import Run
from harness.render.format import f

LIVE_ROWS = 5   # the live display shows the last runs only; the record has them all


@dataclass
class RunnerUI:
    """The progress bar and the last runs; plain one-line-per-run output when not a terminal.
    (NullUI is the same interface doing nothing.)"""
    console: Console
    total: int
    done_before: int
    rows: list[Run] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.live_mode = self.console.is_terminal
        self.eta = _EtaColumn()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(bar_width=20), TaskProgressColumn(),
            TextColumn("{task.completed}/{task.total}"), self.eta,
            TextColumn("{task.fields[status]}", table_column=Column(no_wrap=True, overflow="ellipsis")), console=self.console)
        self.task = self.progress.add_task("runs", total=self.total, completed=self.done_before,
                                           status="")
        self.live: Live | None = None

    def __enter__(self) -> RunnerUI:
        if self.live_mode:
            # transient: the display is cleared at the end, and each frame is cropped to the
            # screen, so nothing of it is left in the scrollback for the summary to follow.
            self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=True,
                             vertical_overflow="crop")
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)

    def status(self, text: str, eta_s: float | None) -> None:
        self.eta.eta_s = eta_s
        self.progress.update(self.task, status=text)
        if self.live is not None:
            self.live.update(self._render())

    def finished_run(self, run: Run | dict[str, Any], eta_s: float | None) -> None:
        run = as_run(run)   # the runner's live record is still dicts
        self.rows.append(run)
        self.eta.eta_s = eta_s
        self.progress.update(self.task, advance=1, status="")
        if self.live is not None:
            self.live.update(self._render())
        else:
            self.console.print(_plain_line(run, self.progress.tasks[0].completed, self.total),
                               highlight=False, soft_wrap=True, markup=False)

    def _render(self) -> Group:
        return Group(*(live_row(r) for r in self.rows[-LIVE_ROWS:]), self.progress)


class _EtaColumn(ProgressColumn):
    """ETA from the runner's own estimate, which counts cooldowns and quiet waits (`eta_s`, set
    by RunnerUI with each status; None: no estimate yet)."""

    eta_s: float | None = None

    def render(self, task: Any) -> Text:
        eta = self.eta_s
        if eta is None:
            return Text("eta -:--", style="progress.remaining")
        m, s = divmod(int(eta + 0.5), 60)
        h, m = divmod(m, 60)
        return Text(f"eta {h}:{m:02d}:{s:02d}" if h else f"eta {m}:{s:02d}", style="progress.remaining")


def live_row(r: Run) -> Text:
    """One finished run on one line, cut to the screen's width (never wrapped: a wrapped frame
    is taller than the one the display clears)."""
    rep = ("w" if r.warmup else "") + str(r.repetition)
    head = f"#{r.index} {r.arm} {r.prompt} rep {rep}: "
    if r.status == "failed":
        body = "failed"
    else:
        acc = r.diagnostics.acceptance_rate
        body = f"{f(r.decode_tokens_per_s, '.1f')} tok/s" + (f", accept {acc:.2f}" if acc is not None else "")
    marks = mark_text(r)
    style = "red" if r.status == "failed" else ("dim" if r.warmup else "")
    return Text(head + body + (f" [{marks}]" if marks else ""), style=style, no_wrap=True, overflow="ellipsis")


def mark_text(r: Run) -> str:
    """The run's marks for people: contention with its counts ("contended 4/12")."""
    c = r.load.contention
    samples, contended = (c.samples, c.contended_samples or 0) if c is not None else (None, 0)
    out = []
    for m in r.marks:
        if m == "contended" and samples:
            m = f"contended {contended}/{samples}"
        elif m == "watch_undersampled" and samples is not None:
            m = f"watch_undersampled ({samples} samples)"
        out.append(m)
    return ",".join(out)


def short_label(r: Run) -> str:
    """A run's label in its progress line: the full text is in the record, and the summary's
    footnotes give each arm's."""
    if r.shipping:
        return "shipping"
    why = [f"{k}={v}" for k, v in sorted(r.overrides.items())]
    # "unknown" is the gate's default: a record leaves it out, as it does a failed run's gate.
    if r.gate.outcome not in ("unknown", "passed", "not_applicable"):
        why.append(f"gate {r.gate.outcome}")
    return "NOT shipping" + (f" ({', '.join(why)})" if why else "")


def _plain_line(r: Run, done: float, total: int) -> str:
    ident = r.identity.status if r.identity else "-"
    err = f" error={r.error}" if r.error else ""
    return (f"[{int(done)}/{total}] run {r.index} arm={r.arm} prompt={r.prompt} "
            f"rep={'w' if r.warmup else ''}{r.repetition} status={r.status} "
            f"tok/s={f(r.decode_tokens_per_s, '.1f')} identity={ident} marks={mark_text(r) or '-'} "
            f"label={short_label(r)}{err}")
