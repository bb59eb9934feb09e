"""`harness report`: a record (and optionally a second one) -> analyses -> a jinja2 Markdown record.

This module turns analyses into a template context of sentences and `mdtable.Table`s; the
templates (harness/templates/*.md.j2, or a file of the same name in ./reports/templates/,
which wins) only lay them out. It reads records and model headers and runs nothing.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from harness import acceptance as acc
from harness import compare as cmp
from harness import declare, mdtable, reportcost, rounds
from harness.errors import UserError
from harness.mdtable import Table

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
USER_TEMPLATES = Path("reports") / "templates"
SHIPPING = "shipping configuration"
NOT_SHIPPING = "not a shipping configuration"
# --- small formatting helpers ----------------------------------------------------------

def f(x: float | None, spec: str, dash: str = "-") -> str:
    return dash if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def pct(x: float | None, digits: int = 1) -> str:
    return f(None if x is None else 100 * x, f".{digits}f") + ("%" if x is not None else "")


def signed_pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def names(xs: list[str]) -> str:
    return ", ".join(xs) if xs else "none"


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _sec(host: dict[str, Any], name: str) -> dict[str, Any]:
    s = host.get(name)
    return s if isinstance(s, dict) else {}


# --- facts about a record that several sections share -----------------------------------

class Facts:
    """One record's analyses, computed once: summary rows, splits, gate outcomes, labels."""

    def __init__(self, path: str, data: dict[str, Any]):
        from harness.hosts import match_profile
        from harness.summary import summarize
        self.path, self.rec = path, data
        self.suite = data["suite"]
        self.settings = self.suite["settings"]
        self.arms = {a["name"]: a for a in self.suite["arms"]}
        self.arm_order = [a["name"] for a in self.suite["arms"]]
        self.prompts = [p["name"] for p in self.suite["prompts"]]
        self.multi_prompt = len(self.prompts) > 1
        self.rows = summarize(data)
        self.groups = rounds.by_arm_prompt(data)
        self.splits = rounds.all_splits(data)
        self.profiles = rounds.profile_comparisons(data)
        self.profile = match_profile(data.get("host") or {})
        self.host = data.get("host") or {}
        measured = [r for r in data["runs"] if not r.get("warmup")]
        self.runs_of: dict[str, list[dict[str, Any]]] = {a: [] for a in self.arm_order}
        for r in measured:
            self.runs_of.setdefault(r["arm"], []).append(r)

    # gate and labels ----------------------------------------------------------------
    def outcome(self, arm: str) -> str:
        outs = sorted({(r.get("gate") or {}).get("outcome") or "unknown" for r in self.runs_of.get(arm, [])})
        return "/".join(outs) if outs else "no runs"

    def engaged(self, arm: str, prompt: str | None = None) -> bool:
        keys = [(arm, p) for p in self.prompts if prompt is None or p == prompt]
        rs = [r for k in keys for r in self.groups.get(k, [])]
        return rounds.engaged(rs)

    def shipping(self, arm: str) -> bool:
        rs = self.runs_of.get(arm, [])
        return bool(rs) and all(r.get("shipping") for r in rs)

    def overrides(self, arm: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for r in self.runs_of.get(arm, []):
            out.update(r.get("overrides") or {})
        return dict(sorted(out.items()))

    def profiled(self, arm: str) -> bool:
        return rounds.profiled_arm(self.rec, arm, self.overrides(arm))

    def override_why(self, arm: str, var: str) -> str:
        """What an override does, as the arm's engine declares it."""
        return declare.of_record(self.rec, arm).overrides.get(var, "changes how the engine runs")

    def label(self, arm: str) -> str:
        labels = sorted({r.get("label") or "unlabelled" for r in self.runs_of.get(arm, [])})
        return "; ".join(labels)

    def engine_desc(self, arm: str) -> str:
        for r in self.runs_of.get(arm, []):
            e = r.get("engine_info") or {}
            if e:
                # Only what the engine reported: a foreign engine need not use MLX or a BLAS.
                extra = [f"{k.replace('_', '-')} {e[k]}" for k in ("mlx", "mlx_lm") if e.get(k)]
                extra += [str(e[k]) for k in ("device",) if e.get(k)]
                extra += [f"{k} {e[k]}" for k in ("numerics",) if e.get(k)]
                extra += [f"BLAS {e['blas']}" for _ in [0] if e.get("blas")]
                return f"{e.get('name', '?')} {e.get('version', '?')}" + (f" ({', '.join(extra)})" if extra else "")
        return "unknown"

    def blas(self, arm: str) -> str:
        for r in self.runs_of.get(arm, []):
            b = (r.get("engine_info") or {}).get("blas")
            if b:
                return str(b)
        return "unknown"

    def reading(self, arm: str) -> str | None:
        for r in self.runs_of.get(arm, []):
            g = r.get("gate") or {}
            if g.get("reading") and g.get("outcome") not in ("not_applicable", None):
                return str(g["reading"])
        return None

    # host ---------------------------------------------------------------------------
    def host_name(self) -> str:
        return self.profile["name"] if self.profile else "local"

    def host_tag(self) -> str:
        return f"{self.host_name()} {_sec(self.host, 'os').get('hostname', 'unknown')}"

    def host_short(self) -> str:
        cpu, osys, mlx = _sec(self.host, "cpu"), _sec(self.host, "os"), _sec(self.host, "mlx")
        dev = str(mlx.get("default_device", "unknown"))
        backend = "MLX CPU" if "cpu" in dev else ("MLX GPU" if "gpu" in dev else dev)
        return (f"{self.host_name()} ({osys.get('hostname', 'unknown')}: {cpu.get('model', 'unknown')}, "
                f"{cpu.get('logical_cores', '?')} logical cores, {backend})")

    def is_cpu(self) -> bool:
        return "cpu" in str(_sec(self.host, "mlx").get("default_device", ""))

    def loadavg(self) -> tuple[float, float, float] | None:
        xs = []
        for rs in self.groups.values():
            for r in rs:
                for k in ("before", "after"):
                    v = ((r.get("load") or {}).get(k) or {}).get("loadavg_1")
                    if isinstance(v, (int, float)):
                        xs.append(float(v))
        return rounds.median_range(xs) if xs else None

    def date(self) -> str:
        return str(self.rec.get("created") or "")[:10] or "undated"

    def model_desc(self, pairing: dict[str, Any], role: str) -> str:
        """The suite's entry, and the directory the engine reported, relative to the repo when inside it."""
        v = pairing.get(role)
        if v is None:
            return "none"
        seen = sorted({str((r.get("result_arm") or {}).get(role)) for rs in self.runs_of.values() for r in rs
                       if r.get("pairing") == pairing["name"] and (r.get("result_arm") or {}).get(role)})
        root = str(_sec(self.host, "repo").get("path") or "")
        rel = [x[len(root) + 1:] if root and x.startswith(root + "/") else x for x in seen]
        where = f" ({', '.join(rel)})" if rel else ""
        return (f"the engine's embedded {role}{where}" if v == "embedded" else f"{v}")

    def row_label(self, arm: str, prompt: str) -> str:
        return f"{arm} ({prompt})" if self.multi_prompt else arm

    def classic_ref(self) -> dict[tuple[str, str], tuple[str, float]]:
        """(arm, prompt) -> (classic arm, its median ms/token), as the summary chose it."""
        ms = {(s.arm, s.prompt): s.ms_per_token_median for s in self.rows if s.block == 1}
        out = {}
        for s in self.rows:
            ref = s.arm if s.block == 1 else s.classic_arm
            if ref and ms.get((ref, s.prompt)):
                out[(s.arm, s.prompt)] = (ref, ms[(ref, s.prompt)])
        return out


# --- sections --------------------------------------------------------------------------

def gate_sentence(fx: Facts) -> str:
    ship = [a for a in fx.arm_order if fx.shipping(a)]
    not_ship = [a for a in fx.arm_order if not fx.shipping(a)]
    parts = []
    if not not_ship:
        parts.append(f"Every arm is a {SHIPPING}: no override was in force and the gate decided by itself.")
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
            txt = "; ".join(why) or fx.label(a)
            parts.append(f"{a} is {NOT_SHIPPING}: {txt}.")
    ungated = [a for a in ship if "no exactness gate" in (fx.label(a) or "")]
    if ungated:
        parts.append(f"{names(ungated)} ran in an engine with no exactness gate: {'it ships' if len(ungated) == 1 else 'they ship'}"
                     " as configured, but nothing checked the output against classic decode before it engaged.")
    readings: dict[str, list[str]] = {}
    for a in fx.arm_order:
        r = fx.reading(a)
        if r:
            key = f"{'passed' if 'passed' in fx.outcome(a) else 'failed'} with BLAS {fx.blas(a)}: \"{r}\""
            readings.setdefault(key, []).append(a)
    for key, arms in readings.items():
        parts.append(f"Probe {key} ({names(arms)}).")
    return " ".join(parts)


def setup_table(fx: Facts) -> Table:
    t = Table(["Field", "Value"])
    h = fx.host
    cpu, mem, osys = _sec(h, "cpu"), _sec(h, "memory"), _sec(h, "os")
    repo, harness = _sec(h, "repo"), _sec(h, "harness")
    t.add("host", f"{fx.host_short()}; {mem.get('total_gib', '?')} GiB; {osys.get('distribution', osys.get('platform', '?'))}; "
                  f"host profile {fx.host_name()}")
    la = fx.loadavg()
    quiet = sum("quiet_gate_timeout" in (r.get("marks") or []) for rs in fx.groups.values() for r in rs)
    contended = sum("contended" in (r.get("marks") or []) for rs in fx.groups.values() for r in rs)
    t.add("load average during runs",
          "unknown" if la is None else
          f"1-min load {la[0]:.2f} median, {la[1]:.2f}-{la[2]:.2f} (before and after each measured run, "
          f"{cpu.get('logical_cores', '?')} logical cores); {contended} contended run(s), "
          f"{quiet} quiet-gate timeout(s)")
    dirty = repo.get("dirty")
    t.add("build and commit", f"{repo.get('short_commit', 'unknown')} on {repo.get('branch', 'unknown')}"
                              + ("; the tree had uncommitted changes" if dirty else "; clean tree" if dirty is False else ""))
    engines = {}
    for a in fx.arm_order:
        engines.setdefault(fx.engine_desc(a), []).append(a)
    t.add("harness and engine versions", f"{harness_desc(harness)}; "
          + "; ".join(f"{k} for {names(v)}" for k, v in engines.items()))
    for role in ("target", "drafter"):
        vals = []
        for p in fx.suite["pairings"]:
            vals.append(f"pairing {p['name']}: {fx.model_desc(p, role)}")
        if role == "drafter":
            quants: dict[str, list[str]] = {}
            for a in fx.arm_order:
                q = next(((r.get("result_arm") or {}).get("drafter_quantization") for r in fx.runs_of.get(a, [])
                          if (r.get("result_arm") or {}).get("drafter_quantization")), None)
                if q and fx.arms[a]["block"] > 1:
                    desc = (f"quantized at load, {q.get('bits')}-bit group {q.get('group_size')}" if q.get("how") == "at load"
                            else "dense" if not q.get("quantized") else str(q.get("how")))
                    quants.setdefault(desc, []).append(a)
            if quants:
                vals.append("; ".join(f"{k} in {names(v)}" for k, v in quants.items()))
        t.add(role, "; ".join(vals))
    t.add("command", " ".join(shlex.quote(c) for c in fx.rec.get("command") or []) or "unknown")
    prompts = []
    for p in fx.suite["prompts"]:
        ptoks = next(((r.get("diagnostics") or {}).get("prompt_tokens") for rs in fx.groups.values()
                      for r in rs if r["prompt"] == p["name"]), None)
        text = " ".join(p["text"].split()).replace("`", "'")
        prompts.append(f"{p['name']} ({p.get('category') or 'no category'}, {ptoks if ptoks is not None else '?'} tokens): "
                       f"`{text[:70]}{'...' if len(text) > 70 else ''}`")
    t.add("prompt" + ("s" if fx.multi_prompt else ""), "; ".join(prompts))
    s = fx.settings
    t.add("sampling", f"temperature {s['temp']:g}{' (greedy)' if not s['temp'] else ''}, seed {s['seed']}, "
                      f"{s['max_tokens']} tokens per run{' (EOS ignored)' if s.get('ignore_eos', True) else ''}; "
                      f"{s['repetitions']} measured runs after {s['warmups']} warm-up(s) per arm and prompt, "
                      f"cooldown {s['cooldown_s']:g} s ({s.get('cooldown_source', 'suite')}), arms interleaved")
    blases: dict[str, list[str]] = {}
    for a in fx.arm_order:
        blases.setdefault(fx.blas(a), []).append(a)
    t.add("BLAS", "; ".join(f"{k} for {names(v)}" for k, v in blases.items())
          + " (as each engine reported it; unknown: the engine reports none)")
    t.add("exactness gate", gate_sentence(fx))
    return t


def harness_desc(h: dict[str, Any]) -> str:
    """The harness that measured (records before the harness was its own package: unknown)."""
    commit = h.get("commit")
    where = f" at {str(commit)[:12]}" if commit and commit != "unknown" else ""
    dirty = "; its own files had uncommitted changes" if h.get("dirty") is True else ""
    version = h.get("version", "unknown")
    named = f" {version}" if version != "unknown" else "" if where else " (version unknown)"
    return f"harness{named}{where}{dirty}"


def probe_readings(fx: Facts) -> list[dict[str, str]]:
    """The engine's own gate message, quoted once per distinct message, with the arms it came from."""
    seen: dict[str, list[str]] = {}
    for a in fx.arm_order:
        msgs = {(r.get("gate") or {}).get("message") for r in fx.runs_of.get(a, [])}
        for m in sorted(x for x in msgs if x):
            if (fx.runs_of[a][0].get("gate") or {}).get("outcome") == "not_applicable":
                continue
            seen.setdefault(m, []).append(a)
    return [{"arms": names(v), "message": k} for k, v in seen.items()]


def arms_table(fx: Facts) -> tuple[Table, list[str]]:
    head = ["arm"] + (["prompt"] if fx.multi_prompt else []) + [
        "tok/s median", "min-max", "spread", "acceptance", "emitted per verify", "vs classic",
        "configuration", "flags"]
    t = Table(head, align=["l"] + (["l"] if fx.multi_prompt else []) + ["r"] * 6 + ["l", "l"])
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
        if s.block == 1:
            accept, vs = "-", "reference"
        else:
            accept = f(s.acceptance, ".3f") if engaged else "declined (classic decode)"
            vs = "-" if s.speedup is None else (
                f"{s.speedup:.2f}x ({s.speedup_ci[0]:.2f}-{s.speedup_ci[1]:.2f})" if s.speedup_ci else f"{s.speedup:.2f}x")
        cells = [s.arm] + ([s.prompt] if fx.multi_prompt else []) + [
            f(s.tok_s_median, ".1f"),
            "-" if s.tok_s_min is None else f"{s.tok_s_min:.1f}-{s.tok_s_max:.1f}",
            pct(s.spread), accept, f(s.emitted_per_verify, ".2f") if engaged else "-", vs, conf,
            "; ".join(s.flags) or "-"]
        t.add(*cells)
    return t, [f"[{i + 1}] {n}" for i, n in enumerate(notes)]


def split_sections(fx: Facts) -> list[dict[str, Any]]:
    out = []
    for s in fx.splits:
        unit = s.unit
        t = Table(["component", "total ms", f"ms/{unit}", "share"], align=["l", "r", "r", "r"])
        for c in s.components:
            t.add(c.label, f"{c.total_ms:.2f}", f"{c.per_unit_ms:.3f}", pct(c.share))
        t.add(f"{unit} total (decode)", f"{s.decode_ms:.2f}", f"{s.per_unit_ms:.3f}", "100.0%")
        what = (f"{s.runs} runs, {s.units} rounds, {s.emitted_per_verify:.3f} tokens per round" if unit == "round"
                else f"{s.runs} runs, {s.units} tokens")
        notes = declare.of_record(fx.rec, s.arm).split_notes
        key = "profile" if s.profile else "default"
        mode = (f"{key} mode: {notes.get(key, 'phases as the engine timed them')}" if unit == "round"
                else "classic decode")
        title = fx.row_label(s.arm, s.prompt)
        if s.mode == "classic" and fx.arms.get(s.arm, {}).get("block", 1) > 1:
            title += ": decoded classic (the gate declined)"
        out.append({"title": title, "table": t, "mode": mode,
                    "closure": f"Components close against the decode total to within {s.closure_pct:.3%} "
                               f"({s.closure_ms:+.4f} ms over {what})."})
    return out


def profile_sections(fx: Facts) -> list[dict[str, Any]]:
    out = []
    for p in fx.profiles:
        u, q = p.unprofiled, p.profiled
        t = Table(["component", f"unprofiled ms/round ({u.arm})", f"profiled ms/round ({q.arm})", "change"],
                  align=["l", "r", "r", "r"])
        for c in u.components:
            qc = q.component(c.name)
            if qc is None:
                continue
            ch = signed_pct(qc.per_unit_ms / c.per_unit_ms - 1) if c.per_unit_ms else "-"
            t.add(c.label, f"{c.per_unit_ms:.3f}", f"{qc.per_unit_ms:.3f}", ch)
        t.add("round total", f"{u.per_unit_ms:.3f}", f"{q.per_unit_ms:.3f}", signed_pct(p.cost))
        lines = []
        if p.drafter_step_ms is not None:
            lines.append(f"Drafter step, profiled: {p.drafter_step_ms:.3f} ms per drafter forward "
                         f"({p.drafter_steps_per_round:.2f} forwards per round inside draft_block, synced).")
        lines.append(f"Profile mode costs {signed_pct(p.cost)} per round ({q.per_unit_ms:.3f} against "
                     f"{u.per_unit_ms:.3f} ms; {p.syncs_per_round:.2f} syncs per round, "
                     f"{p.sync_ms_per_round:.3f} ms per round spent waiting in them)"
                     + ("." if p.resolved else "; the two arms' per-round ranges overlap, so this record does "
                        "not resolve that cost from noise."))
        lines.append("Quote the unprofiled round as the cost; the profiled column is for attribution only. "
                     "This engine's profile mode syncs per stage and does not split the drafter step further "
                     "(no layers / LM head / readback split).")
        out.append({"title": fx.row_label(q.arm, q.prompt), "table": t, "lines": lines})
    return out


def scaling_section(fx: Facts) -> dict[str, Any] | None:
    sc = fx.rec.get("scaling")
    if not isinstance(sc, dict) or not sc.get("widths"):
        return None
    t = Table(["T (positions)", "median ms", "min-max ms", "vs T=1"], align=["r", "r", "r", "r"])
    for w in sc["widths"]:
        t.add(w.get("T"), f(w.get("median_ms"), ".3f"), f"{f(w.get('min_ms'), '.3f')}-{f(w.get('max_ms'), '.3f')}",
              f(w.get("vs_T1"), ".2f") + "x")
    return {"table": t, "line": f"One evaluated target forward of T positions after {sc.get('context_tokens', '?')} "
                                f"context tokens on {sc.get('device', '?')}, median of "
                                f"{sc['widths'][0].get('repeats', '?')}."}


def cost_section(fx: Facts) -> dict[str, Any]:
    c = reportcost.build(fx.rec, fx.classic_ref(), fx.splits, fx.profiles, fx.profile)
    out: dict[str, Any] = {"available": c.available, "reason": c.reason, "notes": list(c.notes),
                           "peak": c.peak_note}
    if c.target is not None:
        b = Table(["tensor set", "bytes"], align=["l", "r"])
        for name, n in c.target.rows:
            b.add(name, f"{n:,}")
        if c.drafter is not None:
            for name, n in c.drafter.rows:
                b.add(name, f"{n:,}")
        out["bytes"] = b
        out["bytes_notes"] = [x for x in ((c.target.note and f"Target: {c.target.note}."),
                                          (c.drafter and c.drafter.note and f"Drafter: {c.drafter.note}.")) if x]
        bw = Table(["model", "bytes per step", "measured step", "effective GB/s", "efficiency vs peak"],
                   align=["l", "r", "r", "r", "r"])
        eff = c.target_eff
        on = f", {c.prompt}" if fx.multi_prompt else ""
        bw.add(f"target ({c.classic_arm} ms/token median{on})", f"{c.target.total:,}", f"{c.target_step_ms:.3f} ms",
               f"{eff.achieved_gb_s:.2f}", "unknown peak" if eff.fraction is None else pct(eff.fraction))
        if c.drafter is not None and c.drafter_step_ms is not None and c.drafter_eff is not None:
            d = c.drafter_eff
            bw.add("drafter (profiled step)", f"{c.drafter.total:,}", f"{c.drafter_step_ms:.3f} ms",
                   f"{d.achieved_gb_s:.2f}", "unknown peak" if d.fraction is None else pct(d.fraction))
        out["bandwidth"] = bw
    if c.what_if:
        w = Table(["scenario", "drafter step ms", "round ms", "tok/s", "vs classic", "round in classic steps"],
                  align=["l", "r", "r", "r", "r", "r"])
        for r in c.what_if:
            w.add(r.name, f"{r.drafter_step_ms:.3f}", f"{r.round_ms:.3f}", f"{r.tokens_per_s:.1f}",
                  f"{r.speedup:.2f}x", f"{r.round_in_classic_steps:.2f}")
        out["what_if"] = w
        out["model_note"] = c.model_note
        m = c.model
        out["what_if_line"] = (f"Break-even at the measured round: {c.what_if[0].break_even_emitted:.3f} emitted per "
                               f"verify, against {m.emitted_per_round:.3f} measured; with a free drafter it would be "
                               f"{next(r for r in c.what_if if r.name == 'free drafter').break_even_emitted:.3f}. "
                               "Projections from the cost model, not measurements.")
    if c.break_even:
        be = Table(["arm", "against", "ms/round", "emitted per verify", "break-even emitted per verify",
                    "round cost in classic steps"], align=["l", "l", "r", "r", "r", "r"])
        for arm, prompt, ref, ms, epv, brk, steps in c.break_even:
            be.add(fx.row_label(arm, prompt), ref, f"{ms:.3f}", f"{epv:.3f}", f"{brk:.3f}", f"{steps:.2f}")
        out["break_even"] = be
    return out


def identity_table(fx: Facts) -> tuple[Table, list[str]]:
    from harness.identity import compare_output, describe
    head = ["arm"] + (["prompt"] if fx.multi_prompt else []) + ["own baseline", "vs classic (information only)"]
    t = Table(head)
    classic = {}
    for (arm, prompt), rs in fx.groups.items():
        if fx.arms[arm]["block"] == 1 and (fx.arms[arm]["pairing"], prompt) not in classic:
            classic[(fx.arms[arm]["pairing"], prompt)] = (arm, rs[0])
    for s in fx.rows:
        rs = fx.groups.get((s.arm, s.prompt), [])
        counts = ", ".join(f"{k.replace('_', ' ')} {v}/{sum(s.identity.values())}" for k, v in sorted(s.identity.items()))
        differs = [r for r in rs if (r.get("identity") or {}).get("status") == "differs"]
        if differs:
            counts += f"; first: {describe(differs[0]['identity'])}"
        ref = classic.get((s.pairing, s.prompt))
        if s.block == 1:
            vs = "-"
        elif s.vs_classic:
            vs = s.vs_classic
        elif ref is None or not rs:
            vs = "no classic run to compare with"
        else:
            d = compare_output(rs[0].get("token_ids"), rs[0].get("text"),
                               {"token_ids": ref[1].get("token_ids"), "text": ref[1].get("text")})
            status = describe(d) if d["status"] != "differs" else f"differs at token {d['first_token']}"
            why = ("decoded classic (the gate declined)" if not fx.engaged(s.arm, s.prompt)
                   else "not a reference: the gate did not pass by itself" if "passed" not in fx.outcome(s.arm)
                   else f"not a reference: {NOT_SHIPPING}")
            vs = f"{why}; tokens vs {ref[0]}: {status}"
        t.add(*([s.arm] + ([s.prompt] if fx.multi_prompt else []) + [counts or "-", vs]))
    base = fx.rec.get("baselines")
    notes = [f"Own baseline: each arm's earlier output on this host ({base or 'no baselines file recorded'}); "
             "classic decode is a reference only where the gate passed without override."]
    return t, notes


def acceptance_section(fx: Facts) -> dict[str, Any]:
    spec = [a for a in fx.arm_order if fx.arms[a]["block"] > 1 and fx.engaged(a)]
    # A profile-mode arm decodes its twin's tokens; pairing it would only restate that.
    paired_arms = [a for a in spec if not fx.profiled(a)]
    by_arm = {a: acc.first_runs({p: fx.groups.get((a, p), []) for p in fx.prompts}) for a in spec}
    t = Table(["arm", "rounds", "trials", "p per step", "95% CI (Wilson)"], align=["l", "r", "r", "r", "r"])
    for a in spec:
        u = acc.unpaired(a, by_arm[a])
        t.add(a, u.rounds, u.trials, f(u.p, ".4f"),
              "-" if u.ci is None else f"[{u.ci[0]:.4f}, {u.ci[1]:.4f}]")
    pairs, unpaired_only = [], []
    for i, a in enumerate(paired_arms):
        for b in paired_arms[i + 1:]:
            ea, eb = fx.arms[a], fx.arms[b]
            if (ea["pairing"], ea["block"]) != (eb["pairing"], eb["block"]):
                continue
            if acc.identical_text(by_arm[a], by_arm[b]):
                pairs.append(paired_block(acc.paired(a, by_arm[a], b, by_arm[b])))
            else:
                unpaired_only.append(f"{a} / {b}")
    notes = ["One measured run per arm and prompt (the first): repetitions at temperature 0 repeat the same "
             "tokens and are not independent trials."]
    disagree = [a for a in spec for p in fx.prompts if len(fx.groups.get((a, p), [])) > 1
                and not acc.repetitions_agree(fx.groups[(a, p)])]
    if disagree:
        notes.append(f"Repetitions disagree for {names(sorted(set(disagree)))}: the first run stands for them.")
    if unpaired_only:
        notes.append(f"Not paired (their text differs, so rounds cannot be matched): {names(unpaired_only)}.")
    return {"unpaired": t if spec else None, "paired": pairs, "notes": notes}


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


def compare_section(fa: Facts, fb: Facts) -> dict[str, Any]:
    cmp.check_comparable(fa.rec, fb.rec, fa.path, fb.path)
    changes = cmp.component_changes(fa.rec, fb.rec)
    cross = not cmp.same_host(fa.rec, fb.rec)
    groups: dict[tuple[str, str], list[cmp.ComponentChange]] = {}
    for c in changes:
        groups.setdefault((c.arm, c.prompt), []).append(c)
    tables = []
    for (arm, prompt), cs in groups.items():
        unit = cs[0].unit
        if cross:
            t = Table(["component", f"A: {fa.host_tag()} ms/{unit}", f"B: {fb.host_tag()} ms/{unit}", "speedup"],
                      align=["l", "r", "r", "r"])
            for c in cs:
                t.add(c.component, f"{c.before.median:.3f}", f"{c.after.median:.3f}",
                      f"{c.before.median / c.after.median:.2f}x" if c.after.median else "-")
        else:
            t = Table(["component", f"before ms/{unit}", f"after ms/{unit}", "change"], align=["l", "r", "r", "r"])
            for c in cs:
                t.add(c.component, f"{c.before.median:.3f} ({c.before.lo:.3f}-{c.before.hi:.3f})",
                      f"{c.after.median:.3f} ({c.after.lo:.3f}-{c.after.hi:.3f})",
                      f"{signed_pct(c.change)} ({c.verdict})")
        tables.append({"title": fa.row_label(arm, prompt), "table": t})
    lines = []
    if cross:
        lines.append(f"Host A: {fa.host_short()}, {fa.path}. Host B: {fb.host_short()}, {fb.path}. "
                     "Speedup is A's time over B's: above 1x, B is faster.")
    else:
        lines.append(f"Before: {fa.path} ({fa.date()}); after: {fb.path} ({fb.date()}); same host. Medians with "
                     "min-max of per-run values. A change is noise unless it clears both runs' spreads (the after "
                     "median outside the before range and the before median outside the after range).")
        real = [c for c in changes if not c.noise]
        lines.append(f"{len(real)} of {len(changes)} component changes clear both spreads." if changes else
                     "No component appears in both records.")
        n = min(fa.settings["repetitions"], fb.settings["repetitions"])
        if n < 5:
            lines.append(f"With {n} runs per side a min-max range underestimates the spread: read 'faster' and "
                         "'slower' as changes to re-measure with more runs, not as findings.")
    ab = []
    for arm in fa.arm_order:
        if arm not in fb.arms or fa.arms[arm]["block"] == 1 or not (fa.engaged(arm) and fb.engaged(arm)):
            continue
        ra = acc.first_runs({p: fa.groups.get((arm, p), []) for p in fa.prompts})
        rb = acc.first_runs({p: fb.groups.get((arm, p), []) for p in fb.prompts})
        if acc.identical_text(ra, rb):
            ab.append(paired_block(acc.paired(arm, ra, arm, rb),
                                   f"{arm} (A)" if cross else f"{arm} before", f"{arm} (B)" if cross else f"{arm} after"))
    return {"cross_host": cross, "other": fb.path, "tables": tables, "lines": lines, "acceptance": ab,
            "changes": changes}


def _env_diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [f"{k}={b[k]}" if k in b else f"without {k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def one_override_pairs(fx: Facts) -> list[dict[str, Any]]:
    """Arms that differ from another arm of the same pairing and block by exactly one env var.

    Profile-mode pairs have their own section. The ratio is of median tok/s per prompt,
    with the bootstrap CI the summary uses.
    """
    from harness import stats
    out = []
    tps = {k: [r["decode_tokens_per_s"] for r in rs if r.get("decode_tokens_per_s")] for k, rs in fx.groups.items()}
    for i, a in enumerate(fx.arm_order):
        for b in fx.arm_order[i + 1:]:
            ea, eb = fx.arms[a], fx.arms[b]
            if (ea["pairing"], ea["block"]) != (eb["pairing"], eb["block"]):
                continue
            diff = _env_diff(ea.get("env") or {}, eb.get("env") or {})
            pvars = {rounds.profile_var(fx.rec, a), rounds.profile_var(fx.rec, b)} - {None}
            if len(diff) != 1 or any(v in diff[0] for v in pvars):
                continue
            for p in fx.prompts:
                xa, xb = tps.get((a, p)), tps.get((b, p))
                if not xa or not xb:
                    continue
                ratio, lo, hi = stats.bootstrap_ratio_ci(xb, xa)
                ga, gb = fx.groups[(a, p)][0], fx.groups[(b, p)][0]
                out.append({"a": a, "b": b, "prompt": p, "diff": diff[0], "ratio": ratio, "lo": lo, "hi": hi,
                            "engines": (ea["engine"], eb["engine"]),
                            "gate": (fx.outcome(a), fx.outcome(b)),
                            "same_tokens": ga.get("token_ids") is not None and ga.get("token_ids") == gb.get("token_ids")})
    return out


def override_table(fx: Facts) -> Table | None:
    pairs = one_override_pairs(fx)
    if not pairs:
        return None
    t = Table(["arm", "against"] + (["prompt"] if fx.multi_prompt else []) +
              ["differs by", "tok/s ratio (95% CI)", "gate", "same tokens"], align=["l", "l"] +
              (["l"] if fx.multi_prompt else []) + ["l", "r", "l", "l"])
    for o in pairs:
        by = o["diff"] + (f" (engine {o['engines'][1]} vs {o['engines'][0]})" if o["engines"][0] != o["engines"][1] else "")
        verdict = "" if o["lo"] > 1 or o["hi"] < 1 else ", not resolved"
        gate = o["gate"][0] if o["gate"][0] == o["gate"][1] else f"{o['gate'][0]} -> {o['gate'][1]}"
        t.add(*([o["b"], o["a"]] + ([o["prompt"]] if fx.multi_prompt else []) +
                [by, f"{o['ratio']:.2f}x ({o['lo']:.2f}-{o['hi']:.2f}){verdict}", gate,
                 "yes" if o["same_tokens"] else "no"]))
    return t


def thrown_table(fx: Facts) -> Table:
    """Runs left out of the figures, and runs or rows kept but flagged, one line per arm and reason."""
    t = Table(["arm"] + (["prompt"] if fx.multi_prompt else []) + ["runs", "treatment", "why"])
    s = fx.settings
    found: dict[tuple[str, str, str], tuple[str, str, list[int]]] = {}

    def note(r: dict[str, Any], kind: str, treat: str, why: str) -> None:
        found.setdefault((r["arm"], r["prompt"], kind), (treat, why, []))[2].append(r["index"])
    watch_pct = (s.get("watch") or {}).get("threshold_pct", "?")
    for r in fx.rec["runs"]:
        marks = r.get("marks") or []
        if r.get("warmup"):
            note(r, "warmup", "left out of every figure", "warm-up: loads weights and compiles kernels")
            continue
        if r.get("status") == "failed":
            note(r, f"failed {r.get('error')}", "left out of every figure", f"failed: {r.get('error')}")
        if "contended" in marks:
            note(r, "contended", "kept; the row is flagged do not publish",
                 f"contended: a foreign process above {watch_pct}% CPU in more than "
                 f"{pct(s['contention_threshold'], 0)} of the watch's samples")
        if "quiet_gate_timeout" in marks:
            note(r, "quiet", "kept; the row is flagged",
                 f"the quiet gate gave up after {s['quiet']['timeout_s']:g} s and the run went ahead")
    order = {a: i for i, a in enumerate(fx.arm_order)}
    kinds = ["warmup", "failed", "contended", "quiet"]
    for (arm, prompt, kind), (treat, why, idx) in sorted(
            found.items(), key=lambda kv: (kinds.index(kv[0][2].split()[0]), order.get(kv[0][0], 0), kv[0][1])):
        runs = f"{len(idx)} (run{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx))})"
        t.add(*([arm] + ([prompt] if fx.multi_prompt else []) + [runs, treat, why]))
    for row in fx.rows:
        if row.spread is not None and row.spread > s["spread_threshold"]:
            t.add(*([row.arm] + ([row.prompt] if fx.multi_prompt else []) +
                    [f"{row.runs} (the row)", "kept; the row is flagged do not publish",
                     f"spread {pct(row.spread)} > {pct(s['spread_threshold'], 0)}"]))
    return t


def limits(fx: Facts, cost: dict[str, Any]) -> list[str]:
    out = []
    cores = _sec(fx.host, "cpu").get("logical_cores")
    la = fx.loadavg()
    over = [r for r in fx.rows if r.spread is not None and r.spread > fx.settings["spread_threshold"]]
    if isinstance(cores, int) and cores <= 4:
        out.append(f"A small shared host: {cores} logical cores"
                   + (f", 1-min load average {la[1]:.2f}-{la[2]:.2f} during the runs" if la else "")
                   + f"; {len(over)} of {len(fx.rows)} rows exceed the {pct(fx.settings['spread_threshold'], 0)} "
                     "spread threshold. Differences smaller than the spread are not findings.")
    elif over:
        out.append(f"{len(over)} of {len(fx.rows)} rows exceed the {pct(fx.settings['spread_threshold'], 0)} spread threshold.")
    if fx.is_cpu():
        out.append("MLX CPU backend: absolute tok/s and ms do not carry over to the lab's GPUs or to another CPU; "
                   "only ratios between arms of this record mean anything, and only for this host.")
    blases: dict[str, list[str]] = {}
    for a in fx.arm_order:
        blases.setdefault(fx.blas(a), []).append(a)
    if len(blases) > 1:
        out.append("Arms ran on different BLAS (" + "; ".join(f"{k}: {names(v)}" for k, v in blases.items())
                   + "): between those groups a speed difference is the BLAS's, and so is the gate's verdict.")
    ov = [a for a in fx.arm_order if fx.overrides(a)]
    if ov:
        out.append(f"Overrides in force for {names(ov)}: their figures are {NOT_SHIPPING} and say nothing "
                   "about what ships.")
    declined = [a for a in fx.arm_order if fx.arms[a]["block"] > 1 and "declined" in fx.outcome(a)]
    if declined:
        out.append(f"{names(declined)} declined to classic decode: {'its' if len(declined) == 1 else 'their'} "
                   "'vs classic' is classic against classic, noise by construction.")
    s = fx.settings
    if s["repetitions"] < 5:
        out.append(f"Medians of {s['repetitions']} runs (the lab protocol is 5 after a warm-up).")
    if fx.rec.get("quick"):
        out.append("A --quick session: no warm-up, no cooldown, no quiet gate.")
    elif not s.get("cooldown_s"):
        out.append("No cooldown between runs: back-to-back runs penalise the wide verify shapes.")
    if not fx.rec.get("complete"):
        out.append(f"The record is incomplete ({len(fx.rec['runs'])} of {fx.rec.get('planned_runs', '?')} "
                   "planned runs): finish it with harness run --resume.")
    if _sec(fx.host, "repo").get("dirty"):
        out.append("The working tree had uncommitted changes: the commit alone does not reproduce this build.")
    if fx.profiles:
        unresolved = not all(p.resolved for p in fx.profiles)
        out.append("The drafter step cost comes from profile mode, which changes the timing it measures "
                   f"({', '.join(signed_pct(p.cost) for p in fx.profiles)} per round here"
                   + (", not resolved from noise)." if unresolved else ")."))
    peak = str(cost.get("peak", ""))
    if cost.get("available") and ("unknown peak" in peak or "no host profile" in peak):
        out.append("No peak bandwidth is known for this host: efficiency is not computed.")
    tools = [declare.of_record(fx.rec, a).tools.get("scaling") for a in fx.arm_order]
    if fx.rec.get("scaling") is None and any(tools):
        # Only an engine that declares a scaling tool is pointed to one.
        out.append(f"No verify-forward cost scaling in this record ({next(t for t in tools if t)} measures it).")
    return out


def reproducing(fx: Facts) -> dict[str, Any]:
    repo = _sec(fx.host, "repo")
    cmds = [f"git checkout {repo.get('commit', 'unknown')}   # in the measured engine's repository"]
    suite = fx.suite.get("path")
    ids = {k for s in fx.rows for k in s.identity}
    if fx.rec.get("baselines") and ids & {"identical", "differs"}:
        cmds.append(f"harness baseline record {shlex.quote(str(suite))} --baselines "
                    f"{shlex.quote(str(fx.rec['baselines']))}   # own baselines, if not already recorded")
    cmds.append(" ".join(shlex.quote(c) for c in fx.rec.get("command") or ["harness", "run", str(suite)]))
    cmds.append(f"harness report {shlex.quote(fx.path)}")
    lines = [f"Suite file {suite}, sha256 {fx.suite.get('sha256', 'unknown')}: check it before re-running "
             f"(`sha256sum {suite}`). A new session needs a --record path that does not exist yet."]
    if repo.get("dirty"):
        lines.append("The tree was dirty at record time: the checkout above lacks those changes.")
    return {"code": "\n".join(cmds), "lines": lines}


def headline(fx: Facts, cmp_sec: dict[str, Any] | None) -> tuple[str, str]:
    s = fx.settings
    spec = [r for r in fx.rows if r.block > 1 and r.speedup and fx.engaged(r.arm, r.prompt)
            and not fx.profiled(r.arm)]   # profile mode slows itself on purpose
    per_arm: dict[str, list[float]] = {}
    for r in spec:
        per_arm.setdefault(r.arm, []).append(r.speedup)
    parts = [f"{fx.suite['name']} on {fx.host_short()}: {len(fx.arm_order)} arms, {len(fx.prompts)} prompt"
             f"{'s' if fx.multi_prompt else ''}, {s['max_tokens']} tokens per run, medians of {s['repetitions']}."]
    short = ""
    if per_arm:
        agg = {a: geomean(v) for a, v in per_arm.items()}
        best = max(agg, key=agg.get)
        row = next(r for r in spec if r.arm == best)
        classic_tps = next((c.tok_s_median for c in fx.rows if c.arm == row.classic_arm and c.prompt == row.prompt), None)
        x = agg[best]
        if len(per_arm[best]) > 1:   # one pair of tok/s would not match a mean over prompts
            tps = (f"geometric mean over {len(per_arm[best])} prompts: "
                   + ", ".join(f"{r.speedup:.2f}x on {r.prompt}" for r in spec if r.arm == best))
        else:
            tps = f"{row.tok_s_median:.1f} against {classic_tps:.1f} tok/s" if classic_tps else f"{row.tok_s_median:.1f} tok/s"
        if x > 1:
            sent = f"The fastest speculative arm is {best} at {x:.2f}x classic decode ({tps})"
        else:
            sent = f"No speculative arm beats classic decode: the best, {best}, runs at {x:.2f}x ({tps})"
        if not fx.shipping(best):
            ov = ", ".join(f"{k}={v}" for k, v in fx.overrides(best).items())
            sent += f", and it is {NOT_SHIPPING}" + (f" ({ov})" if ov else "")
        if any("inconclusive" in fl for fl in row.flags):
            sent += f"; the data cannot resolve a change that small (smallest resolvable change {pct(row.min_detectable_change)})"
        parts.append(sent + ".")
        short = sent + "."
        worst = max(agg, key=lambda a: abs(math.log(agg[a])))
        if worst != best:
            parts.append(f"The largest change against classic is {worst}'s {agg[worst]:.2f}x"
                         + ("" if fx.shipping(worst) else f" ({NOT_SHIPPING})") + ".")
    elif any(r.block > 1 and fx.engaged(r.arm, r.prompt) for r in fx.rows):
        parts.append("No classic arm of the same pairing ran, so no speedup is computed.")
        short = "No classic reference: no speedup."
    else:
        parts.append("No speculative arm engaged, so every figure is classic decode.")
        short = "No speculative arm engaged."
    singles: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for o in one_override_pairs(fx):
        singles.setdefault((o["b"], o["a"], o["diff"]), []).append(o)
    if singles:
        parts.append("One override at a time: " + "; ".join(
            f"{b} ({diff}) runs at {geomean([o['ratio'] for o in v]):.2f}x {a}"
            + (" (not resolved)" if all(o["lo"] <= 1 <= o["hi"] for o in v) else "")
            for (b, a, diff), v in singles.items()) + ".")
    declined = [a for a in fx.arm_order if fx.arms[a]["block"] > 1 and "declined" in fx.outcome(a)]
    passed = [a for a in fx.arm_order if "passed" in fx.outcome(a)]
    gate_short = []
    if declined:
        gate_short.append(f"the probe fails with BLAS {fx.blas(declined[0])} ({names(declined)} declined to classic)")
    if passed:
        gate_short.append(f"passes with BLAS {', '.join(sorted({fx.blas(a) for a in passed}))} ({names(passed)})")
    if gate_short:
        g = " and ".join(gate_short)
        short += " " + g[0].upper() + g[1:] + "."
    if declined:
        parts.append(f"The exactness probe fails here (\"{fx.reading(declined[0])}\", BLAS {fx.blas(declined[0])}), "
                     f"so without an override {names(declined)} declined to classic decode.")
    if passed:
        parts.append(f"The probe passes for {names(passed)} (BLAS {', '.join(sorted({fx.blas(a) for a in passed}))}).")
    if cmp_sec is not None and not cmp_sec["cross_host"]:
        real = [c for c in cmp_sec["changes"] if not c.noise]
        if real:
            big = max(real, key=lambda c: abs(c.change))
            parts.append(f"Against {cmp_sec['other']}, the largest change that clears both runs' spreads is "
                         f"{fx.row_label(big.arm, big.prompt)} {big.component} {signed_pct(big.change)}.")
        else:
            parts.append(f"Against {cmp_sec['other']}, no component change clears both runs' spreads: noise.")
    not_ship = [a for a in fx.arm_order if not fx.shipping(a)]
    parts.append(f"{len(not_ship)} of {len(fx.arm_order)} arms are {NOT_SHIPPING} ({names(not_ship)})."
                 if not_ship else f"Every arm is a {SHIPPING}.")
    flagged = [r for r in fx.rows if r.do_not_publish]
    if flagged:
        parts.append("Every row is flagged do not publish." if len(flagged) == len(fx.rows)
                     else f"{len(flagged)} of {len(fx.rows)} rows are flagged do not publish.")
    return " ".join(parts), short


def shipping_status(fx: Facts) -> str:
    not_ship = [a for a in fx.arm_order if not fx.shipping(a)]
    if not not_ship:
        return f"all arms: {SHIPPING}"
    return f"{len(not_ship)} of {len(fx.arm_order)} arms {NOT_SHIPPING}"


# --- context, rendering, index -----------------------------------------------------------

def load_record(path: str) -> dict[str, Any]:
    from harness.record import Record
    rec = Record.load(path).data
    for key in ("settings", "arms", "prompts", "pairings"):
        if key not in rec["suite"]:
            raise UserError(f"{path}: record's suite has no {key!r} field")
    return rec


def build_context(path: str, compare_path: str | None = None) -> dict[str, Any]:
    fx = Facts(path, load_record(path))
    cmp_sec = compare_section(fx, Facts(compare_path, load_record(compare_path))) if compare_path else None
    arms, arm_notes = arms_table(fx)
    ident, ident_notes = identity_table(fx)
    cost = cost_section(fx)
    head, short = headline(fx, cmp_sec)
    return {
        "title": f"{fx.suite['name']} on {fx.host_name()}, {fx.date()}",
        "record_path": path, "created": fx.rec.get("created"), "host": fx.host_short(),
        "headline": head, "short_headline": short, "shipping_status": shipping_status(fx),
        "setup": setup_table(fx), "probe_readings": probe_readings(fx),
        "arms": arms, "arm_notes": arm_notes, "overrides": override_table(fx),
        "splits": split_sections(fx), "profiles": profile_sections(fx),
        "scaling": scaling_section(fx), "cost": cost,
        "identity": ident, "identity_notes": ident_notes,
        "acceptance": acceptance_section(fx), "compare": cmp_sec,
        "thrown": thrown_table(fx), "limits": limits(fx, cost), "reproducing": reproducing(fx),
    }


def environment(user_dir: Path | None = None) -> Any:
    import jinja2
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(user_dir or USER_TEMPLATES)),
                                  jinja2.FileSystemLoader(str(TEMPLATES_DIR))])
    env = jinja2.Environment(loader=loader, autoescape=False, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["table"] = mdtable.render
    return env


def render(context: dict[str, Any], template: str = "record", user_dir: Path | None = None) -> str:
    import jinja2
    name = template if template.endswith(".j2") else f"{template}.md.j2"
    try:
        tpl = environment(user_dir).get_template(name)
    except jinja2.TemplateNotFound:
        raise UserError(f"template {name!r} not found in {user_dir or USER_TEMPLATES}/ or {TEMPLATES_DIR}/") from None
    except jinja2.TemplateSyntaxError as e:
        raise UserError(f"template {e.filename or name}:{e.lineno}: {e.message}") from None
    try:
        return tpl.render(**context)
    except jinja2.UndefinedError as e:
        raise UserError(f"template {name}: {e.message}") from None


def index_context(reports_dir: Path) -> dict[str, Any]:
    rows = []
    skipped = []
    for p in sorted(reports_dir.glob("*.json")):
        try:
            ctx = build_context(str(p))   # Record.load: kind, version (migrated) and shape
        except UserError as e:
            skipped.append(str(e))
            continue
        md = p.with_suffix(".md")
        link = f"[{md.name}]({md.name}) ([JSON]({p.name}))" if md.exists() else f"[{p.name}]({p.name}) (not rendered)"
        rows.append((ctx["created"] or "", link, ctx))
    rows.sort(key=lambda r: _when(r[0]), reverse=True)
    t = Table(["date", "record", "host", "headline", "shipping status"])
    for created, link, ctx in rows:
        t.add(str(created)[:10], link, ctx["host"], ctx["short_headline"], ctx["shipping_status"])
    return {"table": t, "count": len(rows), "skipped": skipped, "reports_dir": str(reports_dir)}


def _when(created: str) -> float:
    import datetime as dt
    try:
        return dt.datetime.fromisoformat(created).timestamp()
    except (TypeError, ValueError):
        return 0.0    # undated records sort last


def cmd_report(args: argparse.Namespace) -> int:
    if args.index:
        if args.record or args.compare:
            raise UserError("--index renders every record in the reports directory; drop RECORD and --compare")
        d = Path(args.reports_dir)
        if not d.is_dir():
            raise UserError(f"{d}: no reports directory")
        ctx = index_context(d)
        for s in ctx["skipped"]:
            print(f"harness: skipped {s}", file=sys.stderr)
        text = render(ctx, args.template or "index")
        out = Path(args.out) if args.out else d / "README.md"
    else:
        if not args.record:
            raise UserError("report needs a RECORD (or --index)")
        text = render(build_context(args.record, args.compare), args.template or "record")
        out = Path(args.out) if args.out else None
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"harness: wrote {out}", file=sys.stderr)
    return 0


def add_cli(sub: Any) -> None:
    p = sub.add_parser("report", help="render a record (optionally against another) as Markdown",
                       epilog="templates: harness/templates/NAME.md.j2; a file of the same name in "
                              "./reports/templates/ wins. exit status: 0 written; 2 a problem to fix "
                              "(one line on stderr: unreadable, truncated or other-schema record, records "
                              "of different pairings, unknown template)")
    p.add_argument("record", nargs="?", help="record JSON")
    p.add_argument("--compare", metavar="RECORD", help="a second record: before/after on one host, "
                                                         "cross-host otherwise (RECORD is A/before)")
    p.add_argument("--template", metavar="NAME", help="template name (default: record, or index with --index)")
    p.add_argument("--out", metavar="FILE", help="write here (default: stdout; with --index, REPORTS_DIR/README.md)")
    p.add_argument("--index", action="store_true", help="regenerate the index of every record in the reports directory")
    p.add_argument("--reports-dir", default="reports", help="where --index looks (default: reports)")
    p.set_defaults(func=cmd_report)
