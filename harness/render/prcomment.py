"""`harness pr-check`'s pull-request comment, rendered from the judged comparison of two commits
(harness.render.prinput): no analysis and no I/O here.

What shows: one sentence with the size and interval of each gated change ("HEAD is 12.3%
slower on classic ms/token (+8.1% to +16.4%); 2 figures unchanged; 1 inconclusive: ..."), the
gated figures in a table of five columns, and the links to the report and the dashboard where
a team configured them. Everything else folds behind <details>: the diagnostics (figures that
say where a change sits and do not decide), asv's own table over the same samples, and how the
check judged. For the default suite what shows is well under 25 lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analyze import paired
from harness.analyze.contended import contention_lines
from harness.analyze.counters import is_counter_figure
from harness.render import prcomment_asv, prcomment_method
from harness.render.hostwords import set_aside_lines
from harness.render.prinput import STATUS_WORDS, CheckMeta, ComparisonIn, FigureIn, Links
from harness.render.verdictwords import change_cell, change_sentence, moved

MARKER = "<!-- harness-pr-check:{machine} -->"   # one comment per host, updated in place


def headline(c: ComparisonIn) -> str:
    """The finding in one sentence: each gated change with its size and interval, then what was
    unchanged and what this host could not see, then runs and outputs that broke."""
    t = c.design.threshold
    gated = [f for f in c.figures if f.gated]
    parts = [change_sentence([(f.arm, f.figure, f.result, f.ack) for f in gated], t)] if gated else []
    if not gated:
        parts.append("no gated figure could be compared (did every run fail on one side?)")
    if c.newly_failing:
        parts.append("runs fail at HEAD only: " + ", ".join(c.newly_failing))
    broke = [r for r in c.identity if r.status in ("differs", "nondeterministic")]
    if broke:
        parts.append(f"{len(broke)} arm/prompt output{'s' if len(broke) != 1 else ''} no longer "
                     "byte-identical to BASE's")
    text = "; ".join(p for p in parts if p)
    return text[:1].upper() + text[1:] + "."


def figure_name(f: FigureIn) -> str:
    return f"{f.arm} {f.figure}"


def value(x: float | None, figure: str) -> str:
    """A median as people read it: "5.57 ms", "73.3%" for a rate, "1.50" tokens per round."""
    if x is None:
        return "-"
    if "rate" in figure:
        return f"{x:.1%}"
    return prcomment_asv.sig(x) + (" ms" if "ms" in figure else "")


def verdict_cell(f: FigureIn, threshold: float) -> str:
    """The verdict, bold where it decides something (a gated change or an unseen one)."""
    word = change_cell(f.figure, f.result, threshold, f.ack)
    strong = f.gated and not f.ack and f.result.verdict in ("worse", "improved", "inconclusive")
    return f"**{word}**" if strong else word


def table(figures: Sequence[FigureIn], threshold: float, note: bool = False) -> list[str]:
    """figure | base | head | change (interval) | verdict, and the note where asked for."""
    head = "| figure | base | head | change (interval) | verdict |" + (" note |" if note else "")
    out = [head, "|---|---|---|---|---|" + ("---|" if note else "")]
    for f in figures:
        row = (f"| {figure_name(f)} | {value(f.base_median, f.figure)} | {value(f.head_median, f.figure)} | "
               f"{paired.ratio_text(f.result)} | {verdict_cell(f, threshold)} |")
        # An inconclusive verdict's cell already says what it could not see.
        said = f.result.note if not f.result.note.startswith("smallest detectable change") else ""
        out.append(row + (f" {said or '-'} |" if note else ""))
    return out


def exact_row(held: Sequence[FigureIn]) -> list[str]:
    """One row for every exact figure (rejection rate, tokens per round at temperature 0) that
    is the same at HEAD as at BASE."""
    arms = list(dict.fromkeys(f.arm for f in held))
    # The work counters fold into one kind: a row naming each would not fit.
    kinds = list(dict.fromkeys("work counters" if is_counter_figure(f.figure)
                               else f.figure.removesuffix(" (exact)") for f in held))
    return [f"| {' and '.join(kinds)} of {', '.join(arms)} ({len(held)} exact figures) | - | - | "
            f"none (exact at temperature 0) | unchanged |"]


def links_line(links: Links | None) -> list[str]:
    """"[Report](url) · [Dashboard](url)", or nothing where neither is configured."""
    if links is None:
        return []
    said = [f"[{w}]({u})" for w, u in (("Report", links.report_url), ("Dashboard", links.dashboard_url)) if u]
    return [" · ".join(said), ""] if said else []


def diagnostics(c: ComparisonIn) -> list[str]:
    """The figures that do not decide, folded: where a change sits (ms/round, each phase)."""
    diag = [f for f in c.figures if not f.gated]
    if not diag:
        return []
    t = c.design.threshold
    n = {w: sum(moved(f.figure, f.result.verdict) == w for f in diag) for w in ("slower", "faster")}
    said = ", ".join(f"{k} {w}" for w, k in n.items() if k)
    return [f"<details><summary>Diagnostics: {len(diag)} figures that say where a change sits and do not "
            f"decide the check{': ' + said if said else ''}</summary>", "", *table(diag, t, note=True),
            "", "</details>", ""]


def visible(c: ComparisonIn, meta: CheckMeta, links: Links | None) -> list[str]:
    """What shows before anything is unfolded."""
    st = STATUS_WORDS.get(c.exit_status, str(c.exit_status))
    out = [MARKER.format(machine=meta.machine),
           f"### Benchmark check on {meta.machine}: {st} (`{c.head[:8]}` against `{c.base[:8]}`)", "",
           f"**{headline(c)}**", ""]
    # A side contended past its share, and waiting that took the check, are said before any figure.
    for said in (contention_lines(c.notes.contention), set_aside_lines(c.notes.contention),
                 meta.waiting):
        if said:
            out += [" ".join(x.strip() for x in said), ""]
    if c.notes.environment:        # what differs between the sides comes before the figures
        out += [prcomment_method.environment(c)[0], ""]
    gated = [f for f in c.figures if f.gated]
    if gated:
        # Exact figures that held fold into one row: they can only be equal or not.
        held = [f for f in gated if f.figure.endswith("(exact)") and f.result.verdict == "unchanged"]
        shown = table([f for f in gated if f not in held], c.design.threshold)
        out += shown + (exact_row(held) if held else []) + [""]
    broke = [r for r in c.identity if r.status in ("differs", "nondeterministic")]
    if broke:
        out += ["Not byte-identical to BASE's output: " + "; ".join(f"{r.arm} {r.prompt} ({r.detail})"
                                                                 for r in broke), ""]
    return out + links_line(links)


def comment(c: ComparisonIn, meta: CheckMeta, asv_rows: Sequence[prcomment_asv.AsvRow] = (),
            asv_table: str = "", links: Links | None = None, asv_factor: float | None = None) -> str:
    """The whole comment: what shows, then the diagnostics, asv's table and the method folded.
    `asv_factor` is the factor asv compare was given (default: 1 + the threshold)."""
    verdicts = {(f.arm, f.figure): f.result.verdict for f in c.figures}
    factor = asv_factor if asv_factor is not None else 1.0 + c.design.threshold
    asv = prcomment_asv.section(asv_rows, asv_table, verdicts, factor)
    lines = visible(c, meta, links) + diagnostics(c) + (asv + [""] if asv else [])
    lines += prcomment_method.details(c, meta)
    return "\n".join(lines) + "\n"


def visible_lines(md: str) -> list[str]:
    """The lines a reader sees before unfolding anything (outside every <details>)."""
    out, depth = [], 0
    for line in md.splitlines():
        depth += line.count("<details") - line.count("</details>")
        if depth == 0 and "</details>" not in line:
            out.append(line)
    return out
