"""Work counters: the contract (declared and reported), per round in the round split, and two
sides of a check compared exactly, beside the timing verdicts."""
from __future__ import annotations

import msgspec
import pytest
from harness_helpers import declared_engine_suite

from harness.analyze import counters
from harness.analyze.design import Design
from harness.ci import twocommits
from harness.core import counters as core
from harness.core.declare import EngineDecl
from harness.core.results import result_problem
from harness.core.schema import EngineResult, RunDiagnostics
from harness.render.roundsec import counters_line

DESIGN = Design(threshold=0.10, alpha=0.05, looks=1, figures=1)


def _run(arm, prompt, rep, syncs, rounds=10, mode="speculative", temp=0.0, ms=20.0):
    return {"index": rep, "arm": arm, "prompt": prompt, "repetition": rep, "status": "ok", "ms_per_token": ms,
            "result_arm": {"temp": temp},
            "diagnostics": {"mode": mode, "rounds": rounds if mode == "speculative" else 0,
                            "generated_tokens": 24, "decode_ms": ms * 24,
                            "counters": {"host_syncs": syncs, "target_forwards": rounds,
                                         "target_tokens": 3 * rounds, "host_uploads": rounds}}}


def _side(syncs, jitter=0):
    return [_run("block3", p, rep, syncs + (rep % 2) * jitter) for rep in range(3) for p in ("a", "b")]


def test_an_added_sync_per_round_is_worse_exactly_and_fails_the_check():
    changes = {c.figure: c for c in counters.compare(_side(10), _side(30), ["block3"])}
    c = changes["host syncs/round (exact)"]
    assert (c.verdict, c.base, c.head, c.gated) == ("worse", 1.0, 3.0, True)
    assert changes["target forwards/round (exact)"].verdict == "unchanged"
    assert changes["host uploads/round (exact)"].verdict == "unchanged"   # an engine's own counter
    figs = twocommits.judge(_side(10), _side(30), ["block3"], DESIGN)
    fig = next(f for f in figs if f.figure == "host syncs/round (exact)")
    assert fig.gated and fig.failing and fig.result.ratio == 3.0
    cmp = twocommits.Comparison("a" * 40, "b" * 40, DESIGN, figs, [], {}, {}, {}, 1.0)
    assert cmp.exit_status == twocommits.FAIL and "block3 host syncs/round (exact) +200.0%" in cmp.headline()


def test_fewer_syncs_are_improved_and_the_same_counts_unchanged():
    assert {c.verdict for c in counters.compare(_side(10), _side(10), ["block3"])} == {"unchanged"}
    fewer = {c.figure: c.verdict for c in counters.compare(_side(20), _side(10), ["block3"])}
    assert fewer["host syncs/round (exact)"] == "improved"


def test_runs_of_one_side_that_count_differently_are_shown_not_gated():
    c = next(c for c in counters.compare(_side(10, jitter=1), _side(10), ["block3"])
             if c.figure.startswith("host syncs"))
    assert c.verdict == "inconclusive" and not c.gated and "nondeterministic" in c.note


def test_no_counters_no_figure_and_classic_counts_per_token():
    bare = [{**r, "diagnostics": {k: v for k, v in r["diagnostics"].items() if k != "counters"}} for r in _side(10)]
    assert counters.compare(bare, bare, ["block3"]) == []
    classic = [_run("classic", "a", rep, 24, mode="classic") for rep in range(2)]
    (c, *_) = counters.compare(classic, classic, ["classic"])
    assert c.figure == "host syncs/token (exact)" and c.base == 1.0
    # Sampled runs are no exact figure.
    assert counters.compare([_run("b", "a", 0, 5, temp=0.7)], [_run("b", "a", 0, 9, temp=0.7)], ["b"]) == []


def test_the_round_split_says_the_counters_per_round():
    diags = [msgspec.convert(r["diagnostics"], RunDiagnostics) for r in _side(20)]
    sc = counters.split_counters(diags, 3, EngineDecl(name="x", counters={"host_uploads": "ids up"}))
    assert sc is not None and sc.unit == "round" and sc.units == 60
    assert [c.name for c in sc.counts] == ["host_syncs", "target_forwards", "host_uploads"]
    assert counters_line(sc) == ("Counted per round at block 3, over 60 rounds: 2 host syncs, "
                                 "1 target forward of 3 tokens, 1 host upload.")
    assert counters.split_counters([msgspec.structs.replace(diags[0], counters=None), diags[1]], 3) is None


def test_a_reported_counter_must_be_a_count():
    res = {"token_ids": [1, 2], "diagnostics": {"decode_ms": 1.0, "counters": {"host_syncs": -1}}}
    assert result_problem(res) == "diagnostics.counters.host_syncs is -1, a count must be a whole number >= 0"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"token_ids": [1], "diagnostics": {"counters": {"host_syncs": 1.5}}}, EngineResult)


@pytest.mark.parametrize("declared, key", [({"host_syncs": "x"}, "host_syncs"), ({"Bad-Name": "x"}, "Bad-Name"),
                                           ({"kv_copies": ""}, "kv_copies"), (["kv_copies"], "")])
def test_declared_counters_are_new_names_with_what_they_count(declared, key):
    bad = core.declared_problem(declared)
    assert bad is not None and bad[0] == key
    assert core.declared_problem({"kv_copies": "KV rows copied"}) is None


def test_a_declaration_keeps_its_counters_in_the_record():
    d = EngineDecl(name="x", counters={"kv_copies": "KV rows copied"})
    assert EngineDecl.from_dict(d.to_dict()).counters == {"kv_copies": "KV rows copied"}
    assert "counters" not in EngineDecl(name="y").to_dict()   # older records' shape kept


def test_the_nightly_charts_each_counter_per_round_and_judges_it_exactly():
    from harness.ci import asvsession as session
    from harness.ci.history import series_info
    from harness.core.figures import is_exact
    arms = [session.ArmSpec("block3", "block3", 3, (), (), ("host_uploads",))]
    assert session.declared_counters(arms) == ["host_syncs", "target_forwards", "drafter_forwards", "host_uploads"]
    runs = [{**r, "warmup": False, "identity": {"status": "identical"}, "marks": []} for r in _side(20)]
    f = session.figures_from_record(runs, arms)
    assert f.counter_per_round.samples["block3|host_syncs"] == [2.0] * 6
    assert f.counter_per_round.samples["block3|host_uploads"] == [1.0] * 6
    assert "block3|drafter_forwards" in f.counter_per_round.skip   # not reported: n/a, never 0
    info = series_info("x", "bench_engine.Counters.track_counter_per_round", ("block3", "host_syncs"), None)
    assert info.figure == "counter_per_round:host_syncs" and is_exact(info.figure, 0.0)
    assert not is_exact(info.figure, 0.7)


def test_bisect_follows_a_counter_exactly(tmp_path):
    """Each probe of a counter is decisive: the first commit with more host syncs is found."""
    import subprocess

    from harness.ci import bisect as bis
    from harness.core.errors import UserError
    repo = tmp_path / "r"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()  # noqa: E731
    run("init", "-q", "-b", "main")
    shas = []
    for i in range(5):
        (repo / "f").write_text(str(i))
        run("add", "f")
        run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", str(i))
        shas.append(run("rev-parse", "HEAD"))
    syncs = {s: (10 if i < 3 else 30) for i, s in enumerate(shas)}   # commit 3 adds a sync per round

    def compare(repo_, lo, mid, suite, work, **kw):
        figs = twocommits.judge(_side(syncs[lo]), _side(syncs[mid]), ["block3"], DESIGN)
        return twocommits.Comparison(lo, mid, DESIGN, figs, [], {}, {}, {}, 1.0)
    b = bis.bisect(repo, shas[0], shas[4], "block3", "counter_per_round:host_syncs", None, tmp_path, compare=compare)
    assert b.first_bad == shas[3] and all(p.verdict in ("worse", "unchanged") for p in b.trials)
    with pytest.raises(UserError):
        bis.bisect(repo, shas[0], shas[4], "block3", "host uploads/token (exact)", None, tmp_path, compare=compare)


SUITE = declared_engine_suite("counters", "counters = %s")


def test_a_suite_declares_an_engines_own_counters(tmp_path):
    from harness.collect.suite import load_suite
    from harness.core.errors import UserError
    (tmp_path / "t").mkdir()
    p = tmp_path / "suite.toml"
    p.write_text(SUITE % '{ kv_copies = "KV rows copied on rollback" }')
    assert load_suite(p).engines["mine"].counters == {"kv_copies": "KV rows copied on rollback"}
    p.write_text(SUITE % '{ host_syncs = "mine" }')
    with pytest.raises(UserError, match=r"engines\.mine\.counters\.host_syncs.*standard counter"):
        load_suite(p)


def test_a_counter_failing_at_the_first_look_ends_the_sampling():
    """A check's look gives only the counter that got worse when there is one, whatever the
    timings read: that figure needs no more data, so a check with a budget stops at its first
    look (and the final verdict, over every figure, fails on it)."""
    from types import SimpleNamespace

    from harness.analyze import sequential
    # Timings too noisy to resolve anything: per-run ms/token all over the place on both sides.
    base = [{**r, "ms_per_token": 10.0 + 7 * (i % 3)} for i, r in enumerate(_side(10))]
    head = [{**r, "ms_per_token": 12.0 - 5 * (i % 2)} for i, r in enumerate(_side(30))]
    records = {"base": SimpleNamespace(runs=base), "head": SimpleNamespace(runs=head)}
    session = SimpleNamespace(design=Design(threshold=0.10, alpha=0.05, looks=4, figures=1),
                              record=records.get, arms=["block3"],
                              suite=SimpleNamespace(settings=SimpleNamespace(watch=SimpleNamespace(contended_share=1.0))))
    figs = twocommits._PairedSession.look(session, None, 0.0, (0.25,), (3.0,))
    assert list(figs) == ["block3 host syncs/round (exact)"] and figs["block3 host syncs/round (exact)"].resolved
    rounds: list[int] = []
    out = sequential.run(2, 50, 600.0, 4, rounds.append, lambda t, s: figs,
                         clock=lambda: 1000.0 + 200.0 * len(rounds))
    assert out.stopped == "resolved" and len(out.looks) == 1
    # Without the added syncs the same look reads the timings, unresolved here.
    records["head"] = SimpleNamespace(runs=[{**r, "ms_per_token": r["ms_per_token"]} for r in base])
    assert "block3 ms/token" in twocommits._PairedSession.look(session, None, 0.0, (0.25,), (3.0,))


def test_a_readback_added_without_its_count_fails_specdecs_own_guard(tmp_path):
    from test_counters_e2e import ON_DEVICE
    from test_specdec_counters import REPO, _sync_calls
    text = (REPO / "specdec/drafter.py").read_text()
    bad = tmp_path / "drafter.py"
    bad.write_text(text.replace(ON_DEVICE, "            tok.item()\n"))
    lines = bad.read_text().splitlines()
    uncounted = [n for n, _ in _sync_calls(bad) if "host_syncs += 1" not in "\n".join(lines[n - 1:n + 3])]
    assert len(uncounted) == 1


def test_asvs_row_of_a_counter_is_matched_to_the_checks_figure():
    from types import SimpleNamespace

    from harness.render.prcomment_asv import figure_of
    row = SimpleNamespace(name="bench_engine.Counters.track_counter_per_round('block3 [not shipping: X]', 'host_syncs')")
    assert figure_of(row) == ("block3", "host syncs/round (exact)")
