"""What people see in a terminal: the runner's progress bar and live table (one plain line per
run when output is not a terminal) and the summary table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn
from rich.table import Table
from rich.text import Text

from harness.analyze.summary import ArmSummary
from harness.render.format import f, mib, speedup

TABLE_ROWS = 14   # the live table shows the last runs only; the record has them all

@dataclass
class RunnerUI:
    """The progress bar and live table; plain one-line-per-run output when not a terminal.
    (NullUI is the same interface doing nothing.)"""
    console: Console
    total: int
    done_before: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.live_mode = self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("{task.completed}/{task.total}"), _EtaColumn(),
            TextColumn("{task.fields[status]}"), console=self.console)
        self.task = self.progress.add_task("runs", total=self.total, completed=self.done_before,
                                           status="", eta_s=None)
        self.live: Live | None = None

    def __enter__(self) -> RunnerUI:
        if self.live_mode:
            self.live = Live(self._render(), console=self.console, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)

    def status(self, text: str, eta_s: float | None) -> None:
        self.progress.update(self.task, status=text, eta_s=eta_s)
        if self.live is not None:
            self.live.update(self._render())

    def finished_run(self, run: dict[str, Any], eta_s: float | None) -> None:
        self.rows.append(run)
        self.progress.update(self.task, advance=1, status="", eta_s=eta_s)
        if self.live is not None:
            self.live.update(self._render())
        else:
            self.console.print(_plain_line(run, self.progress.tasks[0].completed, self.total),
                               highlight=False, soft_wrap=True)

    def _render(self) -> Group:
        return Group(live_table(self.rows[-TABLE_ROWS:]), self.progress)


class _EtaColumn(ProgressColumn):
    """ETA from the runner's own estimate, which counts cooldowns and quiet-gate waits."""

    def render(self, task: Any) -> Text:
        eta = task.fields.get("eta_s")
        if eta is None:
            return Text("eta -:--", style="progress.remaining")
        m, s = divmod(int(eta + 0.5), 60)
        h, m = divmod(m, 60)
        return Text(f"eta {h}:{m:02d}:{s:02d}" if h else f"eta {m}:{s:02d}", style="progress.remaining")


def live_table(runs: list[dict[str, Any]]) -> Table:
    t = Table(title="runs", title_justify="left", expand=False)
    for col in ("#", "arm", "prompt", "rep", "tok/s", "ms/tok", "accept", "marks", "identity", "label"):
        t.add_column(col, overflow="fold")
    for r in runs:
        acc = (r.get("diagnostics") or {}).get("acceptance_rate")
        marks = mark_text(r) or ("warmup" if r.get("warmup") else "")
        style = "red" if r["status"] == "failed" else ("dim" if r.get("warmup") else None)
        t.add_row(str(r["index"]), r["arm"], r["prompt"], ("w" if r["warmup"] else "") + str(r["repetition"]),
                  f(r.get("decode_tokens_per_s"), ".1f"), f(r.get("ms_per_token"), ".2f"),
                  f(acc, ".2f"), marks, (r.get("identity") or {}).get("status", "-"),
                  short_label(r), style=style)
    return t


def mark_text(r: dict[str, Any]) -> str:
    """The run's marks for people: contention with its counts ("contended 4/12")."""
    c = (r.get("load") or {}).get("contention") or {}
    out = []
    for m in r.get("marks") or []:
        if m == "contended" and c.get("samples"):
            m = f"contended {c.get('contended_samples', 0)}/{c['samples']}"
        elif m == "watch_undersampled" and c.get("samples") is not None:
            m = f"watch_undersampled ({c['samples']} samples)"
        out.append(m)
    return ",".join(out)


def short_label(r: dict[str, Any]) -> str:
    """The live table's label: the full text is in the record and under the summary table."""
    if r.get("shipping"):
        return "shipping"
    why = [f"{k}={v}" for k, v in sorted((r.get("overrides") or {}).items())]
    outcome = (r.get("gate") or {}).get("outcome")
    if outcome not in (None, "passed", "not_applicable"):
        why.append(f"gate {outcome}")
    return "NOT shipping" + (f" ({', '.join(why)})" if why else "")


def _plain_line(r: dict[str, Any], done: float, total: int) -> str:
    tps = f(r.get("decode_tokens_per_s"), ".1f")
    marks = mark_text(r)
    ident = (r.get("identity") or {}).get("status", "-")
    err = f" error={r['error']}" if r.get("error") else ""
    return (f"[{int(done)}/{total}] run {r['index']} arm={r['arm']} prompt={r['prompt']} "
            f"rep={'w' if r['warmup'] else ''}{r['repetition']} status={r['status']} tok/s={tps} "
            f"identity={ident} marks={marks or '-'} label={short_label(r)}{err}")


def summary_table(rows: list[ArmSummary], title: str = "summary") -> Group:
    """The people's table; long labels become numbered notes under it, quoted in full."""
    t = Table(title=title, title_justify="left")
    # Memory only where an engine reported it: the table is wide already.
    memory = any(s.memory_bytes is not None for s in rows)
    for col in ("arm", "prompt", "n", "tok/s median", "min-max", "ms/tok", "spread",
                *(["memory MiB (+run)"] if memory else []),
                "accept", "per-step (95% CI)", "emit/verify", "vs classic", "identity", "label", "flags"):
        t.add_column(col, overflow="fold")
    notes: list[str] = []
    for s in rows:
        per_step = "-" if s.per_step_acceptance is None else (
            f"{s.per_step_acceptance:.3f} ({s.per_step_ci[0]:.3f}-{s.per_step_ci[1]:.3f})" if s.per_step_ci
            else f"{s.per_step_acceptance:.3f}")
        speed = speedup(s.speedup, s.speedup_ci)
        accept = f(s.acceptance, ".3f")
        if s.declined:   # two classic decodes: their ratio is not a speed-up of speculation
            speed = accept = "declined (classic decode)"
        ident = ", ".join(f"{k} {v}" for k, v in sorted(s.identity.items()))
        if s.vs_classic:
            ident += f"; {s.vs_classic}"
        if s.shipping:
            label = "shipping"
        else:
            refs = []
            for text in s.labels:
                if text not in notes:
                    notes.append(text)
                refs.append(f"[{notes.index(text) + 1}]")
            label = "NOT shipping " + "".join(refs)
        t.add_row(s.arm, s.prompt, f"{s.runs}" + (f"+{s.failed} failed" if s.failed else ""),
                  f(s.tok_s_median, ".1f"),
                  "-" if s.tok_s_min is None else f"{s.tok_s_min:.1f}-{s.tok_s_max:.1f}",
                  f(s.ms_per_token_median, ".2f"), f(s.spread, ".1%"),
                  *([mib(s.memory_bytes, s.run_memory_bytes, unit="")] if memory else []), accept,
                  per_step, f(s.emitted_per_verify, ".2f"), speed, ident, label,
                  "; ".join(s.flags) or "-", style="yellow" if s.do_not_publish else None)
    lines = [Text(f"[{i + 1}] {n}") for i, n in enumerate(notes)]
    return Group(t, *lines)
