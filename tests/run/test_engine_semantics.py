"""The engines' semantics on toy simulators, each test run on mosaik and on the direct engine
with the two results compared (mosaik's scenario tests draw the graph; so do these)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import cosim
from cosim.run import direct, mosaik_engine
from toy_scenarios import ramp_sink

ENGINES = ("mosaik", "direct")

scenario = ramp_sink


#: (engine, [scenario] ahead): mosaik, and the direct engine with and without its worker process
#: for the simulators that take no inputs (cosim.run.ahead; "on" forks even for these short runs
#: where the toy has a head — not in the feedback toys, where ramp and sink feed each other; the
#: head-to-rest cases that do fork, asserted, are in test_ahead.py)
VARIANTS = (("mosaik", "auto"), ("direct", "off"), ("direct", "on"))


def run_both(write_scenario, tmp_path, text, **overrides):
    path = write_scenario(text)
    return [cosim.run(path, out_dir=tmp_path / f"{e}-{a}",
                      overrides={**overrides, "scenario.engine": e, "scenario.ahead": a}) for e, a in VARIANTS]


def same(results) -> pd.DataFrame:
    a = results[0]
    for b in results[1:]:
        assert a.status == b.status and a.reason == b.reason
        pd.testing.assert_frame_equal(a.timeseries(), b.timeseries(), check_exact=True)
        assert a.kpis == b.kpis
    return results[-1].timeseries()


def test_mixed_step_sizes(toy_adapters, write_scenario, tmp_path):
    """A 60 s source into a 1 s sink (recorded every 1 s)::

        src:a (60 s) --p_mw--> sink:s (1 s)

    the sink sees the source's output of its latest step: constant over each minute."""
    ts = same(run_both(write_scenario, tmp_path, scenario(duration_s=600, step_s=1, src_step_s=60)))
    assert len(ts) == 600
    minute_start = (np.arange(600) // 60) * 60
    np.testing.assert_allclose(ts["s.p_sum_mw"], 1.0 + minute_start / 3600.0 + 2.0)
    assert ts["a.p_mw"].diff().fillna(0).ne(0).sum() == 9  # changes only at each new minute


def test_a_source_that_stops_stepping_keeps_delivering(toy_adapters, write_scenario, tmp_path):
    """A 2,400 s source in a 3,600 s run steps at 0 and 2,400 (its next, 4,800, is past the end);
    its last output holds to the end."""
    ts = same(run_both(write_scenario, tmp_path, scenario(src_step_s=2400)))
    assert (ts["a.p_mw"].iloc[:40] == 1.0).all() and (ts["a.p_mw"].iloc[40:] == 1.0 + 2400 / 3600).all()
    assert (ts["s.p_sum_mw"] == ts["a.p_mw"] + 2.0).all()


def test_a_step_longer_than_the_run_is_refused(toy_adapters, write_scenario):
    with pytest.raises(cosim.ScenarioError, match=r"sims.src.step_s = 7200: longer than the run"):
        cosim.load_scenario(write_scenario(scenario(src_step_s=7200)))


FEEDBACK = """
[[connect]]
src = "s"
dst = "a"
attrs = ["p_cap_mw"]
{kind} = true
initial_data = {{ p_cap_mw = 100.0 }}
"""


def test_time_shifted_feedback(toy_adapters, write_scenario, tmp_path):
    """::

        a --p_mw--> s --p_cap_mw (time-shifted)--> a

    ``a`` at step k sees the sink's offer of step k-1; the initial data before the first."""
    ts = same(run_both(write_scenario, tmp_path, scenario(extra=FEEDBACK.format(kind="time_shifted"))))
    assert ts["a.p_cap_mw"].iloc[0] == 100.0
    np.testing.assert_array_equal(ts["a.p_cap_mw"].iloc[1:].to_numpy(), ts["s.p_cap_mw"].iloc[:-1].to_numpy())


def test_time_shifted_from_a_slower_source(toy_adapters, write_scenario, tmp_path):
    """A 60 s sink offering a cap to a 20 s ramp (delayed): the ramp reads the sink's output of
    its latest step strictly before each of its own (the direct engine; mosaik may drop the value
    here, see the warning, so only the direct engine is checked)."""
    path = write_scenario(scenario(step_s=20, sink_step_s=60, extra=FEEDBACK.format(kind="time_shifted")))
    scn = cosim.load_scenario(path)
    assert any("mosaik 3.6 may deliver None" in w for w in scn.warnings)
    direct = cosim.run(path, out_dir=tmp_path, overrides={"scenario.engine": "direct"})
    ts = direct.timeseries()
    t = np.arange(len(ts)) * 20
    sink_step = ((t - 1) // 60) * 60  # latest sink step strictly before t
    expected = np.where(t == 0, 100.0, ts["s.p_cap_mw"].to_numpy()[np.clip(sink_step // 20, 0, None)])
    np.testing.assert_array_equal(ts["a.p_cap_mw"].to_numpy(), expected)


def test_weak_feedback_is_read_like_time_shifted(toy_adapters, write_scenario, tmp_path):
    """A weak loop of time-based simulators is not iterated by mosaik 3.6 (same-time re-steps
    come only from trigger inputs): the destination reads the source's previous output, the
    same series as time-shifted — on both engines."""
    weak = same(run_both(write_scenario, tmp_path / "weak", scenario(extra=FEEDBACK.format(kind="weak"))))
    shifted = same(run_both(write_scenario, tmp_path / "ts", scenario(extra=FEEDBACK.format(kind="time_shifted"))))
    pd.testing.assert_frame_equal(weak, shifted, check_exact=True)


def test_a_weak_connection_without_a_way_back_is_refused(toy_adapters, write_scenario):
    """Whether mosaik delivers the source's output of this time or the last one would depend on
    its scheduling: the scenario says which it wants (time-shifted) instead."""
    text = scenario() + '\n[[connect]]\nsrc = "s"\ndst = "a"\nattrs = ["p_cap_mw"]\ntime_shifted = true\n' \
        'initial_data = { p_cap_mw = 100.0 }\n'
    text = text.replace('[[connect]]\nsrc = "b"\ndst = "s"\nattrs = ["p_mw"]',
                        '[[connect]]\nsrc = "b"\ndst = "s"\nattrs = [["p_cap_mw", "p_mw"]]\nweak = true\n'
                        'initial_data = { p_cap_mw = 0.0 }')
    text = text.replace('src = "a"\ndst = "s"\nattrs = ["p_mw"]\n', 'src = "a"\ndst = "s"\nattrs = ["p_mw"]\n', 1)
    # b feeds s weakly, but s feeds nothing of b's sim back without delay (s -> a is delayed)
    with pytest.raises(cosim.ScenarioError, match="a weak connection needs 'sink' to feed 'src' back"):
        cosim.load_scenario(write_scenario(text))


def test_failure_mid_run_on_both_engines(toy_adapters, write_scenario, tmp_path):
    text = scenario() + '\n[sims.bad]\nadapter = "toy_faulty"\nfail_at_s = 600\n\n[entities.f]\nsim = "bad"\n' \
        'model = "Faulty"\n'
    results = run_both(write_scenario, tmp_path, text)
    ts = same(results)
    for result in results:
        assert result.status == "failed" and "injected failure at t = 600 s" in result.reason
        meta = json.loads((result.run_dir / "metadata.json").read_text())
        assert meta["status"] == "failed" and meta["engine"] in ENGINES
    assert len(ts) == 10 and ts.index[-1] == pd.Timestamp("2024-07-15T00:09Z")  # 0..540 s kept


def test_several_sources_are_summed_in_mosaiks_order(toy_adapters, write_scenario, tmp_path):
    """Three sources of different magnitude into one input: floats are not associative, so the
    sums agree to the last bit only when both engines add in the same order."""
    extra = '\n[entities.c]\nsim = "src"\nmodel = "Ramp"\np0_mw = 1e8\nslope_mw_h = 0.0\n' \
        '\n[[connect]]\nsrc = "c"\ndst = "s"\nattrs = ["p_mw"]\n'
    text = scenario(extra=extra).replace('p0_mw = 1.0 }', 'p0_mw = 0.1 }').replace('p0_mw = 2.0,', 'p0_mw = -1e8,')
    ts = same(run_both(write_scenario, tmp_path, text))
    assert (ts["s.p_sum_mw"] == (ts["a.p_mw"] + ts["b.p_mw"]) + ts["c.p_mw"]).all()
    assert not (ts["s.p_sum_mw"] == ts["a.p_mw"] + (ts["b.p_mw"] + ts["c.p_mw"])).all()  # the order shows


def test_engine_choice_is_validated(toy_adapters, write_scenario):
    text = scenario().replace('sink = { adapter = "toy_sink" }', 'sink = { adapter = "toy_sink", process = "subprocess" }')
    with pytest.raises(cosim.ScenarioError, match=r'sims.sink: process = "subprocess" runs the simulator outside'):
        cosim.load_scenario(write_scenario(text), {"scenario.engine": "direct"})
    with pytest.raises(cosim.ScenarioError, match="scenario.engine = 'fast'"):
        cosim.load_scenario(write_scenario(scenario()), {"scenario.engine": "fast"})


# -- real time -----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_real_time_paces_the_run(engine, toy_adapters, write_scenario, tmp_path, monkeypatch):
    """rt_factor 0.001 s per simulated second reaches the pacing: the direct engine waits for a
    deadline 0.06 s (60 simulated s) after the one before at each of the 10 steps; mosaik's
    ``World.run`` gets ``rt_factor = 0.001``. The lag is reported in metadata.json. (What is
    checked is what the engines are told, not how long the run took: no timing asserts.)"""
    told: list = []
    if engine == "direct":
        sleep_until = direct._sleep_until
        monkeypatch.setattr(direct, "_sleep_until", lambda deadline: (told.append(deadline), sleep_until(deadline)))
    else:
        world_run = mosaik_engine.mosaik.World.run
        monkeypatch.setattr(mosaik_engine.mosaik.World, "run",
                            lambda world, *a, **kw: (told.append(kw.get("rt_factor")), world_run(world, *a, **kw))[1])
    result = cosim.run(write_scenario(scenario(duration_s=600)), out_dir=tmp_path,
                       overrides={"scenario.engine": engine, "scenario.rt_factor": 0.001})
    assert result.ok, result.reason
    if engine == "direct":
        assert len(told) == 10
        assert np.diff(told) == pytest.approx([0.06] * 9, abs=1e-9)
    else:
        assert told == [0.001]
    assert result.metadata["rt_factor"] == 0.001 and result.metadata["rt_behind_max_s"] is not None


def test_output_caches_stay_bounded(toy_adapters, write_scenario, tmp_path):
    """The direct engine keeps a simulator's outputs only while a reader may still ask for them:
    over a run of 180 steps (mixed step sizes, a time-shifted feedback) no cache holds more than
    ``PRUNE_AT`` + ``PRUNE_EVERY`` outputs (the sizes are looked at every ``PRUNE_EVERY`` steps),
    and what it keeps still gives the run's series (same as mosaik's)."""
    text = scenario(duration_s=3 * 3600, step_s=60, sink_step_s=20, extra=FEEDBACK.format(kind="time_shifted"))
    same(run_both(write_scenario, tmp_path, text))
    with cosim.Session(write_scenario(text), out_dir=tmp_path / "s") as s:
        largest = 0
        while not s.done:
            s.step()
            largest = max(largest, *(len(sim.cache) for sim in s.engine.sims))
    assert 2 <= largest <= direct.PRUNE_AT + direct.PRUNE_EVERY


# -- Session ---------------------------------------------------------------------------------
def test_session_steps_reads_sets_and_writes_the_run_folder(toy_adapters, write_scenario, tmp_path):
    path = write_scenario(scenario())
    with cosim.Session(path, out_dir=tmp_path) as s:
        assert s.time_s == 0 and s.utc == pd.Timestamp("2024-07-15T00:00Z")
        assert s.step() == 60 and s.get("a.p_mw") == 1.0
        s.run_until(1800)
        assert s.time_s == 1800 and s.get("s.p_sum_mw") == pytest.approx(1.0 + 1740 / 3600 + 2.0)
        s.set("a", "p_cap_mw", 1.2)  # held from the next step on, replacing the sink's offer
        s.run_until(3600)
        assert s.done and s.get("a.p_mw") == 1.2 and s.outputs()["a.p_cap_mw"] == 1.2
    result = s.result
    assert result.status == "ok" and result.metadata["engine"] == "direct"
    ts = result.timeseries()
    assert len(ts) == 60 and (ts["a.p_mw"].iloc[30:] == 1.2).all()
    assert ts["a.p_mw"].iloc[29] == pytest.approx(1.0 + 1740 / 3600)  # before the cap: the ramp
    assert result.kpis["entities"]["a"]["energy_mwh"] == pytest.approx(ts["a.p_mw"].sum() / 60)


def test_session_is_deterministic_and_matches_a_run(toy_adapters, write_scenario, tmp_path):
    """No set calls: a Session gives the run's series; the same set calls twice: the same series."""
    path = write_scenario(scenario(extra=FEEDBACK.format(kind="time_shifted")))
    plain = cosim.run(path, out_dir=tmp_path / "run", overrides={"scenario.engine": "direct"}).timeseries()
    with cosim.Session(path, out_dir=tmp_path / "s0") as s:
        s.run_until(3600)
    pd.testing.assert_frame_equal(s.result.timeseries(), plain, check_exact=True)
    series = []
    for k in range(2):
        with cosim.Session(path, out_dir=tmp_path / f"s{k + 1}") as s:
            for t in range(0, 3600, 600):
                s.run_until(t)
                s.set("a", "p_cap_mw", 1.0 + t / 7200)
            s.run_until(3600)
        series.append(s.result.timeseries())
    pd.testing.assert_frame_equal(series[0], series[1], check_exact=True)


def test_session_refuses_unknown_inputs_and_bad_values(toy_adapters, write_scenario, tmp_path):
    with cosim.Session(write_scenario(scenario()), record=False) as s:
        with pytest.raises(cosim.ScenarioError, match="a has no input 'p_max_mw'; inputs: p_cap_mw"):
            s.set("a", "p_max_mw", 1.0)
        with pytest.raises(cosim.ScenarioError, match="no entity 'zz'"):
            s.get("zz.p_mw")
        with pytest.raises(cosim.ScenarioError, match="give a finite number"):
            s.set("a", "p_cap_mw", float("nan"))
    assert s.result is None


def test_session_closed_early_says_stopped(toy_adapters, write_scenario, tmp_path):
    with cosim.Session(write_scenario(scenario()), out_dir=tmp_path) as s:
        s.run_until(600)
    assert s.result.status == "stopped" and "t = 600 s of 3600 s" in s.result.reason
    assert len(s.result.timeseries()) == 10
    with pytest.raises(RuntimeError, match="closed"):
        s.step()


def test_the_direct_engine_never_imports_mosaik(tmp_path):
    """Only cosim.run.mosaik_engine imports mosaik; a direct run leaves it unloaded."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys, cosim\n"
            f"r = cosim.run({str(root / 'tests' / 'scenarios' / 'golden_short.toml')!r}, out_dir={str(tmp_path)!r},"
            " overrides={'scenario.engine': 'direct', 'scenario.duration_s': 600})\n"
            "assert r.ok, r.reason\n"
            "print(sorted(m for m in sys.modules if m == 'mosaik' or m.startswith('mosaik.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_engine_flags_on_run_and_sweep(toy_adapters, write_scenario, tmp_path, capsys):
    from cosim.cli import main

    path = write_scenario(scenario())
    assert main(["run", str(path), "--engine", "direct", "--out", str(tmp_path / "r"), "--quiet", "--no-report"]) == 0
    meta = json.loads(next((tmp_path / "r").glob("*/metadata.json")).read_text())
    assert meta["engine"] == "direct"
    assert main(["sweep", str(path), "--engine", "direct", "--workers", "0", "--set", "entities.a.p0_mw=1,2",
                 "--out", str(tmp_path / "sw"), "--quiet"]) == 0
    metas = [json.loads(p.read_text()) for p in (tmp_path / "sw" / "runs").glob("*/metadata.json")]
    assert len(metas) == 2 and {m["engine"] for m in metas} == {"direct"}
    with pytest.raises(SystemExit) as exit_:  # argparse refuses it with its usage message
        main(["run", str(path), "--engine", "warp"])
    assert exit_.value.code == 2 and "invalid choice: 'warp'" in capsys.readouterr().err
