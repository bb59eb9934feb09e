"""The report's sections about what ran and what it measured: setup, arms, round splits,
profile mode, scaling, cost model, identity and acceptance (the comparison with a second record
is harness.render.comparesec).
Each returns sentences and `mdtable.Table`s for the templates; none reads a file."""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
from msgspec import UnsetType

from harness.analyze import acceptance as acc
from harness.analyze.costreport import Quantization
from harness.analyze.facts import Facts
from harness.analyze.gpustack import UNKNOWN
from harness.analyze.labels import NOT_SHIPPING, SHIPPING, reasons
from harness.analyze.summary import MIN_BOOTSTRAP_RUNS, duty_line, sequential_lines
from harness.core.hostinfo import HarnessInfo
from harness.render.format import f, mib, names, pct, signed_pct, speedup
from harness.render.mdtable import Table


def gate_sentence(fx: Facts, both: str | None = None) -> str:
    """The record's shipping sentence; `both`: the comparison's sentence covering both records
    (then this record's own sentence says it is this record's)."""
    ship = [a for a in fx.arm_order if fx.shipping(a)]
    not_ship = [a for a in fx.arm_order if not fx.shipping(a)]
    parts = []
    if not not_ship:
        parts.append(f"Every arm {'of this record ' if both else ''}is a {SHIPPING}: no override was in force "
                     "and the gate decided by itself.")
    else:
        parts.append(f"Only {names(ship)} {'is a' if len(ship) == 1 else 'are'} {SHIPPING}"
                     f"{'s' if len(ship) > 1 else ''}." if ship else f"No arm is a {SHIPPING}.")
        for a in not_ship:
            why = []
            for k, v in fx.overrides(a).items():
                why.append(f"{k}={v} ({fx.override_why(a, k)})")
            out = fx.outcome(a)
            if "declined" in out:
                why.append("the gate declined, so it decoded classic")
            txt = "; ".join(why) or reasons(fx.label(a))   # the sentence says "not shipping" itself
            parts.append(f"{a} is {NOT_SHIPPING}: {txt}.")
    ungated = [a for a in ship if "no exactness gate" in (fx.label(a) or "")]
    if ungated:
        parts.append(f"{names(ungated)} ran in an engine with no exactness gate: {'it ships' if len(ungated) == 1 else 'they ship'}"
                     " as configured, but nothing checked the output against classic decode before it engaged.")
    readings: dict[str, list[str]] = {}
    for a in fx.arm_order:
        r = fx.reading(a)
        if r:
            key = f"{'passed' if 'passed' in fx.outcome(a) else 'failed'} {fx.numerics_of([a])}: \"{r}\""
            readings.setdefault(key, []).append(a)
    for key, arms in readings.items():
        parts.append(f"Probe {key} ({names(arms)}).")
    if both:
        parts.append(f"Compared: {both[0].lower()}{both[1:]}")
    return " ".join(parts)


def setup_table(fx: Facts, both: str | None = None) -> Table:
    t = Table(["Field", "Value"])
    h = fx.host
    cpu, osys, repo = h.cpu, h.os, h.repo
    # A record from before the distribution was collected names the platform.
    system = osys.distribution if osys.distribution != UNKNOWN else osys.platform
    t.add("host", f"{fx.host_short()}; {h.memory.total_gib} GiB; {system}; host spec {fx.host_name()}")
    gpu = gpu_stack_row(fx)
    if gpu:
        t.add("GPU stack", gpu)
    la = fx.loadavg()
    quiet = sum("quiet_wait_timeout" in r.marks for rs in fx.groups.values() for r in rs)
    contended = sum("contended" in r.marks for rs in fx.groups.values() for r in rs)
    t.add("load average during runs",
          "unknown" if la is None else
          f"1-min load {la[0]:.2f} median, {la[1]:.2f}-{la[2]:.2f} (before and after each measured run, "
          f"{cpu.logical_cores} logical cores); {contended} contended run(s), "
          f"{quiet} quiet-wait timeout(s)")
    dirty = repo.dirty
    t.add("build and commit", f"{repo.short_commit} on {repo.branch}"
                              + ("; the tree had uncommitted changes" if dirty is True else "; clean tree" if dirty is False else ""))
    engines: dict[str, list[str]] = {}
    for a in fx.arm_order:
        engines.setdefault(fx.engine_desc(a), []).append(a)
    t.add("harness and engine versions", f"{harness_desc(h.harness)}; "
          + "; ".join(f"{k} for {names(v)}" for k, v in engines.items()))
    for role in ("target", "drafter"):
        vals = []
        for p in fx.suite.pairings:
            vals.append(f"pairing {p.name}: {fx.model_desc(p, role)}")
        if role == "drafter":
            quants: dict[str, list[str]] = {}
            for a in fx.arm_order:
                q = next((r.result_arm.drafter_quantization for r in fx.runs_of.get(a, [])
                          if r.result_arm.drafter_quantization), None)
                if q and fx.arms[a].block > 1:
                    quants.setdefault(_quantization_desc(q), []).append(a)
            if quants:
                vals.append("; ".join(f"{k} in {names(v)}" for k, v in quants.items()))
        t.add(role, "; ".join(vals))
    t.add("command", " ".join(shlex.quote(c) for c in fx.record.command) or "unknown")
    prompts = []
    for pr in fx.suite.prompts:
        ptoks = next((r.diagnostics.prompt_tokens for rs in fx.groups.values()
                      for r in rs if r.prompt == pr.name), None)
        text = " ".join(pr.text.split()).replace("`", "'")
        prompts.append(f"{pr.name} ({pr.category or 'no category'}, {ptoks if ptoks is not None else '?'} tokens): "
                       f"`{text[:70]}{'...' if len(text) > 70 else ''}`")
    t.add("prompt" + ("s" if fx.multi_prompt else ""), "; ".join(prompts))
    s = fx.settings
    t.add("sampling", f"temperature {s.temp:g}{' (greedy)' if not s.temp else ''}, seed {s.seed}, "
                      f"{s.max_tokens} tokens per run{' (EOS ignored)' if s.ignore_eos else ''}; "
                      f"{measured_runs_text(fx)}, after {s.warmups} discarded warm-up run(s) "
                      f"per arm (on the first prompt), "
                      f"cooldown {s.cooldown_s:g} s ({s.cooldown_source}), arms interleaved")
    duty = duty_line(fx.record)
    if duty:
        t.add("session", f"{duty}; the warm-ups carry what an engine's first use costs (loads, first-use compiles)")
    cpu_arms = [a for a in fx.arm_order if not fx.on_gpu(a)]
    blases: dict[str, list[str]] = {}
    for a in cpu_arms:
        blases.setdefault(fx.blas(a), []).append(a)
    on_gpu: dict[str, list[str]] = {}
    for a in fx.arm_order:
        if fx.on_gpu(a):
            on_gpu.setdefault(str(fx.device(a)), []).append(a)
    row = "; ".join(f"{k} for {names(v)}" for k, v in blases.items())
    row += " (as each engine reported it; unknown: the engine reports none)" if blases else ""
    # An engine on a GPU: the CPU BLAS its process loaded did not do the arithmetic.
    gpu_cells = [f"no CPU BLAS for {names(v)}: the engine ran on {d} (the GPU stack row names its libraries)"
                 for d, v in on_gpu.items()]
    t.add("BLAS", "; ".join(x for x in [row, *gpu_cells] if x))
    t.add("exactness gate", gate_sentence(fx, both))
    return t


# The setup rows the first screen keeps; the full table is in the appendix.
BRIEF_SETUP = ("host", "GPU stack", "build and commit", "harness and engine versions", "target", "drafter",
               "prompt", "prompts", "sampling")


def setup_brief(full: Table) -> Table:
    """What ran, where, on which build: the setup table's rows a reader needs first."""
    t = Table(list(full.header), align=full.align)
    t.rows = [r for r in full.rows if r[0] in BRIEF_SETUP]
    return t


def measured_runs_text(fx: Facts) -> str:
    """How many measured runs each arm and prompt got: the suite's repetitions, or, where a
    time budget added rounds, what was measured and the minimum it started from."""
    s = fx.settings
    counts = [len(rs) for rs in fx.groups.values()]
    seq = fx.record.sequential
    lo, hi = (min(counts), max(counts)) if counts else (0, 0)
    n = f"{lo}" if lo == hi else f"{lo}-{hi}"
    if seq is None or not seq.budget_s:
        # What was measured (ok runs), and the plan where they differ: an interrupted session or
        # failed runs once read as the suite's repetitions.
        reps = s.repetitions
        runs = "run" if hi == 1 else "runs"
        return (f"{reps} measured runs per arm and prompt" if lo == hi == reps else
                f"{n} measured {runs} per arm and prompt (the suite planned {reps})")
    least = s.repetitions if isinstance(seq.min_repetitions, UnsetType) else seq.min_repetitions
    return (f"{n} measured runs per arm and prompt (at least {least}, then more in whole "
            f"interleaved rounds within a budget of {seq.budget_s:g} s of measuring: see Against classic, paired)")


def sequential_paragraphs(fx: Facts) -> dict[str, Any] | None:
    """What the budget did and each speculative arm against classic, paired by prompt and
    repetition (analyze.summary.sequential_lines), for the report: None without a budget."""
    lines = sequential_lines(fx.record)
    if not lines:
        return None
    head, rest = lines[0], lines[1:]
    intro = rest[0] if rest and not rest[0].startswith("  ") else None
    if intro and intro.startswith("vs classic, "):
        intro = "Each speculative arm against its classic arm: " + intro[len("vs classic, "):]
    return {"head": head[0].upper() + head[1:] + ".", "intro": intro,
            "arms": [ln.strip() for ln in rest if ln.startswith("  ")]}


def gpu_stack_row(fx: Facts) -> str | None:
    """The GPU beneath the arms whose engine ran on one (None when none did): name, memory, driver,
    CUDA, cuBLAS, cuDNN (Metal and macOS on Apple silicon), "unknown" where the record holds none."""
    arms = [a for a in fx.arm_order if fx.on_gpu(a)]
    if not arms:
        return None
    g = fx.gpu_stack()
    mem = (f", {g.memory_gib:g} GiB" + (" unified memory" if g.metal else "")) if g.memory_gib else ", memory unknown"
    parts = [f"{g.name} ({g.generation}){mem}"]
    if g.metal:
        parts.append(f"Metal on macOS {g.macos}")
    else:
        cuda = f"CUDA {g.cuda}" + (" (as the driver reports it)" if g.cuda != UNKNOWN else "")
        parts += [f"driver {g.driver}", cuda, f"CUDA runtime {g.cuda_runtime}", f"cuBLAS {g.cublas}", f"cuDNN {g.cudnn}"]
    devices = sorted({str(fx.device(a)) for a in arms})
    notes = [f"{k}: {v}" for k, v in g.sources.items()]
    if any(UNKNOWN in p for p in parts):
        notes.append("unknown: the record's host metadata has no value for it")
    return "; ".join(parts) + f" (for {names(arms)}, whose engine ran on {', '.join(devices)}" \
        + "".join(f"; {n}" for n in notes) + ")"


def _quantization_desc(block: dict[str, Any]) -> str:
    """An engine's drafter_quantization block in words; one in a foreign engine's own shape, as it is."""
    try:
        q = msgspec.convert(block, Quantization)
    except msgspec.ValidationError:
        return str(block)
    if q.how == "at load":
        return f"quantized at load, {q.bits}-bit group {q.group_size}"
    return "dense" if not q.quantized else str(q.how)


def harness_desc(h: HarnessInfo) -> str:
    """The harness that measured (records before the harness was its own package: unknown)."""
    commit = h.commit
    where = f" at {commit[:12]}" if commit and commit != UNKNOWN else ""
    dirty = "; its own files had uncommitted changes" if h.dirty is True else ""
    version = h.version
    named = f" {version}" if version != "unknown" else "" if where else " (version unknown)"
    return f"harness{named}{where}{dirty}"


def probe_readings(fx: Facts) -> list[dict[str, str]]:
    """The engine's own gate message, quoted once per distinct message, with the arms it came from."""
    seen: dict[str, list[str]] = {}
    for a in fx.arm_order:
        msgs = {r.gate.message for r in fx.runs_of.get(a, [])}
        for m in sorted(x for x in msgs if x):
            if fx.runs_of[a][0].gate.outcome == "not_applicable":
                continue
            seen.setdefault(m, []).append(a)
    return [{"arms": names(v), "message": k} for k, v in seen.items()]


def arms_table(fx: Facts) -> tuple[Table, list[str]]:
    head = ["arm"] + (["prompt"] if fx.multi_prompt else []) + [
        "tok/s median", "min-max", "spread", "acceptance", "emitted per verify", "vs classic",
        "configuration", "flags"]
    # Records made before engines reported memory render as they always did: no column.
    memory = any(s.memory_bytes is not None for s in fx.rows)
    if memory:
        head.insert(head.index("acceptance"), "memory (+run)")
    t = Table(head, align=["l"] + (["l"] if fx.multi_prompt else []) + ["r"] * (6 + memory) + ["l", "l"])
    notes: list[str] = []
    for s in fx.rows:
        if s.shipping:
            conf = SHIPPING
        else:
            lab = fx.label(s.arm)
            if lab not in notes:
                notes.append(lab)
            conf = f"{NOT_SHIPPING} [{notes.index(lab) + 1}]"
        engaged = fx.engaged(s.arm, s.prompt)
        if s.runs == 0 and not s.failed:
            accept, vs = "not run", "-"   # not "declined": nothing ran here to decline
        elif s.block == 1:
            accept, vs = "-", "reference"
        else:
            accept = f(s.acceptance, ".3f") if engaged else "declined (classic decode)"
            # A declined arm decoded classic: a ratio to classic would read as a speedup it has not.
            vs = speedup(s.speedup, s.speedup_ci) if engaged else "declined"
        cells = [s.arm] + ([s.prompt] if fx.multi_prompt else []) + [
            f(s.tok_s_median, ".1f"),
            "-" if s.tok_s_min is None else f"{s.tok_s_min:.1f}-{s.tok_s_max:.1f}",
            pct(s.spread)] + ([mib(s.memory_bytes, s.run_memory_bytes)] if memory else []) + [
            accept, f(s.emitted_per_verify, ".2f") if engaged else "-", vs, conf,
            # The unpaired "speedup ..." flags judge; the paired verdict is the only judgement.
            "; ".join(x for x in s.flags if not x.startswith("speedup")) or "-"]
        t.add(*cells)
    return t, [f"[{i + 1}] {n}" for i, n in enumerate(notes)]


def columns_note(fx: Facts) -> str:
    """What the Arms table's computed columns are, so a reader does not take the unpaired ratio
    for the paired verdict."""
    paired = (" Each arm's paired verdict against classic (its runs matched to classic's by prompt and "
              "repetition) is under Against classic, paired; where the two differ, that one is the judgement."
              if sequential_paragraphs(fx) else "")
    # Said only where a run was set aside, so a record without one reads as before.
    aside = " and were not set aside for their host" if any(r.set_aside for r in fx.rows) else ""
    return (f"Columns: tok/s median and min-max over the measured runs that finished{aside}; spread is "
            "(max - min) / median; vs classic is this arm's median tok/s over its classic arm's on the same "
            "prompt, with a 95% percentile-bootstrap interval of that ratio (runs unpaired; none from fewer "
            f"than {MIN_BOOTSTRAP_RUNS} runs a side)." + paired)


def memory_note(fx: Facts) -> str | None:
    """What the memory column includes; None when no run reported memory."""
    if not any(s.memory_bytes is not None for s in fx.rows):
        return None
    return ("Memory is what an arm needs at its peak, the largest over its runs, from the engine's "
            "own report (MLX: its peak counter, reset when each generation starts): the weights its "
            "generation used (the drafter's only where speculation engaged) plus what the generation "
            "added at its peak over what was already resident, in parentheses (KV caches, "
            "activations). An engine that reports only its peak is shown at that peak.")


def identity_table(fx: Facts) -> tuple[Table, list[str]]:
    from harness.analyze.identity import describe
    from harness.analyze.outputs import classic_checks, first_differing
    head = ["arm"] + (["prompt"] if fx.multi_prompt else []) + ["own baseline", "vs classic (information only)"]
    t = Table(head)
    checks = classic_checks(fx)
    for s in fx.rows:
        counts = ", ".join(f"{k.replace('_', ' ')} {v}/{sum(s.identity.values())}" for k, v in sorted(s.identity.items()))
        differs = first_differing(fx, s.arm, s.prompt)
        if differs is not None:
            counts += f"; first: {describe(differs)}"
        c = checks.get((s.arm, s.prompt))
        if s.block == 1:
            vs = "-"
        elif s.vs_classic:
            vs = s.vs_classic
        elif c is None:
            vs = "no classic run to compare with"
        else:
            d = c.result
            status = describe(d) if d.status != "differs" else f"differs at token {d.first_token}"
            why = ("decoded classic (the gate declined)" if not c.engaged
                   else "not a reference: the gate did not pass by itself" if not c.gate_passed
                   else f"not a reference: {NOT_SHIPPING}")
            vs = f"{why}; tokens vs {c.classic_arm}: {status}"
        t.add(*([s.arm] + ([s.prompt] if fx.multi_prompt else []) + [counts or "-", vs]))
    base = fx.record.baselines
    notes = [f"Own baseline: each arm's earlier output on this host ({base or 'no baselines file recorded'}); "
             "classic decode is a reference only where the gate passed without override."]
    return t, notes


def acceptance_section(fx: Facts) -> dict[str, Any]:
    from harness.analyze.outputs import acceptance
    a = acceptance(fx)
    t = Table(["arm", "rounds", "trials", "p per step", "95% CI (Wilson)"], align=["l", "r", "r", "r", "r"])
    for u in a.unpaired:
        t.add(u.arm, u.rounds, u.trials, f(u.p, ".4f"),
              "-" if u.ci is None else f"[{u.ci[0]:.4f}, {u.ci[1]:.4f}]")
    notes = ["One measured run per arm and prompt (the first): repetitions at temperature 0 repeat the same "
             "tokens and are not independent trials."]
    if a.disagree:
        notes.append(f"Repetitions disagree for {names(a.disagree)}: the first run stands for them.")
    if a.not_paired:
        notes.append(f"Not paired (their text differs, so rounds cannot be matched): {names(a.not_paired)}.")
    return {"unpaired": t if a.unpaired else None, "paired": [paired_block(r) for r in a.paired], "notes": notes}


def paired_block(r: acc.PairedAB, label_a: str | None = None, label_b: str | None = None) -> dict[str, Any]:
    la, lb = label_a or r.a, label_b or r.b
    t = Table(["measure", "value"], align=["l", "r"])
    t.add("rounds starting at the same text offset", f"{r.matched} (of {r.rounds_a} in {la}, {r.rounds_b} in {lb})")
    t.add("identical proposal", "not logged" if r.same_proposal is None else
          f"{r.same_proposal} ({pct(r.same_proposal / r.matched) if r.matched else '-'})")
    t.add("accept counts differ", r.differ)
    t.add(f"{la} accepted more", r.a_more)
    t.add(f"{lb} accepted more", r.b_more)
    t.add("sign test p (exact, two-sided)", "no differing rounds" if r.sign_p is None else f"{r.sign_p:.3f}")
    t.add("total accepted over matched rounds", f"{la} {r.accepted_a}, {lb} {r.accepted_b}"
          + ("" if r.change is None else f" ({signed_pct(r.change)} for {lb})"))
    if r.sign_p is None:
        line = "The accept counts agree in every matched round: no directional effect to test."
    elif r.sign_p >= 0.05:
        line = f"No directional effect: sign test p = {r.sign_p:.3f}."
    else:
        more = la if r.a_more > r.b_more else lb
        line = f"{more} accepts more in the rounds where they differ: sign test p = {r.sign_p:.3f}."
    return {"title": f"{la} vs {lb} (identical text, {', '.join(r.prompts)})", "table": t, "line": line}

