"""The direct engine's worker process for the simulators that take no inputs (cosim.run.ahead).

Identity with mosaik and with the in-process direct engine is checked on every catalogue
scenario (test_engines_equal.py) and on each engine semantic (test_engine_semantics.py, whose
runs include ``ahead = "on"``); here: which simulators form the head, what happens to errors,
warnings, a run ended on purpose, a worker that dies, and a failure or stop in the parent.
"""

from __future__ import annotations

import os
import signal

import pandas as pd
import pytest

import cosim
from cosim.errors import RunInterrupted, ScenarioError
from cosim.folder import RunFolder
from cosim.run import ahead
from cosim.run.direct import DirectEngine
from cosim.scenario import load_scenario
from toy_scenarios import FEEDBACK, ramp_sink

ROOT = ahead.__file__.rsplit("/cosim/", 1)[0]


def _run(path, tmp_path, mode, name=None, **overrides):
    return cosim.run(path, out_dir=tmp_path / (name or mode), overrides={"scenario.engine": "direct",
                                                                           "scenario.ahead": mode, **overrides})


def _same(a, b) -> pd.DataFrame:
    assert (a.status, a.reason) == (b.status, b.reason)
    pd.testing.assert_frame_equal(a.timeseries(), b.timeseries(), check_exact=True)
    assert a.kpis == b.kpis
    return b.timeseries()


def _head(path, **overrides) -> list[str]:
    engine = DirectEngine(load_scenario(path, {"scenario.engine": "direct", **overrides}), None)
    engine.start()
    try:
        return [s.sid for s in ahead.head_sims(engine)]
    finally:
        engine.finalize()


def test_the_head_of_the_default_scenario():
    """Weather and carbon series, the datacenter and PV (fed by the weather only) take no input
    from the rest; the FMUs, the battery and the grid do."""
    assert sorted(_head(f"{ROOT}/scenarios/default.toml")) == ["carbon", "dc", "solar", "weather"]


def test_a_simulator_fed_back_from_the_rest_is_not_in_the_head(toy_adapters, write_scenario):
    """Without feedback the sink's sources are all in the head, but only the recorder reads the
    sink: it stays in the parent (its last stage); feedback through a time-shifted connection
    makes ramp and sink depend on each other: no head."""
    assert _head(write_scenario(ramp_sink())) == ["src"]
    assert _head(write_scenario(ramp_sink(extra=FEEDBACK), "fb.toml")) == []


@pytest.mark.parametrize("mode", ["on", "auto"])
def test_a_run_without_a_head_runs_in_process(toy_adapters, write_scenario, tmp_path, monkeypatch, mode):
    forks = []
    monkeypatch.setattr(ahead, "Ahead", lambda *a: forks.append(a))
    result = _run(write_scenario(ramp_sink(extra=FEEDBACK)), tmp_path, mode)
    assert result.ok and not forks


def test_the_last_stage_stays_in_the_parent():
    """ieee13_llm_campus: the inference fleet feeds the grid, which only the recorder reads."""
    assert _head(f"{ROOT}/scenarios/ieee13_llm_campus.toml") == ["inference"]


def test_auto_leaves_a_run_in_process_when_only_the_recorder_would_stay(monkeypatch):
    """mig_inference is one datacenter and the recorder: the worker would do everything."""
    from cosim.run.direct import _Sim

    monkeypatch.setattr(ahead, "usable_cores", lambda: 2)
    for mode, wanted in (("auto", False), ("on", True)):
        scn = load_scenario(f"{ROOT}/scenarios/mig_inference.toml", {"scenario.engine": "direct",
                                                                      "scenario.ahead": mode})
        engine = DirectEngine(scn, None)  # no run folder: no recorder; a stand-in for it below
        engine.start()
        try:
            head = ahead.head_sims(engine)
            assert [s.sid for s in head] == ["dc"]
            engine.sims.append(_Sim(engine.RECORDER_SID, object()))
            assert ahead.wanted(engine, head) is wanted
        finally:
            engine.sims.pop()
            engine.finalize()


def test_auto_forks_only_for_long_runs(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """"auto" forks at AUTO_MIN_STEPS head steps or more, when the machine has two cores."""
    if ahead.usable_cores() < 2:
        pytest.skip("one usable core: auto never forks here")
    started = []
    real = ahead.Ahead

    def spy(engine, head):
        started.append([s.sid for s in head])
        return real(engine, head)

    monkeypatch.setattr(ahead, "Ahead", spy)
    path = write_scenario(ramp_sink())
    short = ahead.AUTO_MIN_STEPS - 1  # the ramp at 1 s steps: one head step a second
    assert _run(path, tmp_path, "auto", "short", **{"scenario.duration_s": short, "scenario.step_s": 1}).ok
    assert started == []
    assert _run(path, tmp_path, "auto", "long", **{"scenario.duration_s": short + 1, "scenario.step_s": 1}).ok
    assert started == [["src"]]


def test_ahead_on_is_refused_where_it_cannot_apply(toy_adapters, write_scenario):
    path = write_scenario(ramp_sink())
    with pytest.raises(ScenarioError, match="scenario.ahead"):
        load_scenario(path, {"scenario.engine": "mosaik", "scenario.ahead": "on"})
    with pytest.raises(ScenarioError, match="rt_factor"):
        load_scenario(path, {"scenario.engine": "direct", "scenario.ahead": "on", "scenario.rt_factor": 1.0})


def test_a_run_ended_on_purpose_in_the_worker_ends_at_the_same_step(toy_adapters, write_scenario, tmp_path):
    extra = '\n[sims.end]\nadapter = "toy_ending"\nend_at_s = 1200\n\n[entities.e]\nsim = "end"\nmodel = "Ending"\n'
    path = write_scenario(ramp_sink(extra=extra))
    ts = _same(_run(path, tmp_path, "off"), on := _run(path, tmp_path, "on"))
    assert on.metadata["ahead"]["sims"] == ["src", "end"]
    assert "peak_rss_mib" in on.metadata["ahead"]  # the worker's END (after its finalize) was read
    assert on.status == "ok" and "reached its end at t = 1200 s" in on.reason
    assert len(ts) == 20  # 0 .. 1140 s


def test_a_warning_in_the_worker_is_given_in_the_parent(toy_adapters, write_scenario, tmp_path):
    extra = '\n[sims.w]\nadapter = "toy_warn"\nwarn_at_s = 300\n\n[entities.wa]\nsim = "w"\nmodel = "Ramp"\n'
    path = write_scenario(ramp_sink(extra=extra))
    with pytest.warns(UserWarning, match="toy w warns at t = 300 s") as caught:
        result = _run(path, tmp_path, "on")
    assert result.ok and result.metadata["ahead"]["sims"] == ["src", "w"]
    assert sum("toy w warns" in str(w.message) for w in caught) == 1
    assert any(w.filename.endswith("toy_sims.py") for w in caught if "toy w warns" in str(w.message))


def test_a_worker_that_dies_fails_the_run_and_keeps_what_was_recorded(toy_adapters, write_scenario, tmp_path):
    extra = (f'\n[sims.k]\nadapter = "toy_kill_self"\nkill_at_s = 1800\nparent_pid = {os.getpid()}\n\n'
             '[entities.ka]\nsim = "k"\nmodel = "Ramp"\n')
    result = _run(write_scenario(ramp_sink(extra=extra)), tmp_path, "on")
    assert result.status == "failed"
    assert "WorkerDied" in result.reason and "killed by signal 9" in result.reason
    ts = result.timeseries()
    assert 0 < len(ts) <= 30 and ts.index[0] == pd.Timestamp("2024-07-15T00:00Z")  # no step at or past 1800 s
    assert ts["a.p_mw"].notna().all()


def test_a_worker_that_hangs_fails_the_run_after_the_stall_timeout(toy_adapters, write_scenario, tmp_path,
                                                                    workers):
    extra = '\n[sims.h]\nadapter = "toy_stall"\nstall_at_s = 1800\nsleep_s = 30.0\n\n[entities.ha]\nsim = "h"\nmodel = "Ramp"\n'
    result = _run(write_scenario(ramp_sink(extra=extra)), tmp_path, "on", **{"scenario.stall_timeout_s": 0.5})
    assert result.status == "failed"
    assert "WorkerDied" in result.reason and "sent nothing for 0.5 s" in result.reason
    # the rows of the steps the worker sent before it hung: up to its last batch (it sends one at
    # least every FLUSH_S, so all but the last few toy steps); never one at or past 1800 s
    assert 0 < len(result.timeseries()) <= 30
    assert len(workers) == 1 and _gone(workers[0].pid)  # killed, not waited for 30 s


def test_an_output_the_worker_cannot_send_fails_the_run_at_its_step_with_the_fix(toy_adapters, write_scenario,
                                                                                  tmp_path, workers):
    """In one process the recorder would take the odd value as it can; through the pipe it cannot
    go: the run fails at that step, naming the simulator and the fix, rows before it kept."""
    extra = ('\n[sims.odd]\nadapter = "toy_odd_output"\nodd_at_s = 1200\n\n'
             '[entities.oa]\nsim = "odd"\nmodel = "Ramp"\n')
    result = _run(write_scenario(ramp_sink(extra=extra)), tmp_path, "on")
    assert result.status == "failed"
    assert "simulator 'odd'" in result.reason and "at time 1200" in result.reason
    assert "scenario.ahead=off" in result.reason
    assert len(result.timeseries()) == 20  # 0 .. 1140 s
    assert len(workers) == 1 and _gone(workers[0].pid)


def test_no_process_to_be_had_runs_in_one_process(toy_adapters, write_scenario, tmp_path, monkeypatch):
    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    path = write_scenario(ramp_sink())
    plain = _run(path, tmp_path, "off")
    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.warns(RuntimeWarning, match="could not be started"):
        result = _run(path, tmp_path, "on")
    assert result.ok and result.metadata["ahead"] is None
    _same(plain, result)


TIME_SHIFTED_FROM_HEAD = """
[[connect]]
src = "a"
dst = "s"
attrs = [["p_mw", "p_mw"]]
time_shifted = true
initial_data = { p_mw = 5.0 }
"""
CHAIN = """
[sims.mid]
adapter = "toy_sink"
step_s = 45

[entities.m]
sim = "mid"
model = "Sink"

[[connect]]
src = "b"
dst = "m"
attrs = ["p_mw"]

[[connect]]
src = "m"
dst = "s"
attrs = [["p_sum_mw", "p_mw"]]
time_shifted = true
initial_data = { p_sum_mw = 7.0 }
"""
#: head -> rest over time-shifted connections, mixed steps, a two-stage head, sub-second ticks,
#: a head simulator whose next step is past the end (after the review of 2026-12-03)
CASES = {
    "time_shifted_mixed": (ramp_sink(duration_s=7200, src_step_s=60, sink_step_s=20, extra=TIME_SHIFTED_FROM_HEAD),
                           ["src"]),
    "chain_mixed": (ramp_sink(duration_s=7200, step_s=30, src_step_s=7, sink_step_s=20, extra=CHAIN),
                    ["src", "mid"]),
    "subsecond": (ramp_sink(duration_s=120, step_s=1, extra=CHAIN).replace("seed = 1", "seed = 1\ntick_s = 0.25"),
                  ["src", "mid"]),
    "past_the_end": (ramp_sink(duration_s=3600, src_step_s=2400, extra=CHAIN), ["src", "mid"]),
}


@pytest.mark.parametrize("case", CASES)
def test_head_to_rest_semantics_with_and_without_the_worker(toy_adapters, write_scenario, tmp_path, case):
    text, head = CASES[case]
    path = write_scenario(text)
    on = _run(path, tmp_path, "on")
    assert on.metadata["ahead"]["sims"] == head
    _same(_run(path, tmp_path, "off"), on)


def test_outputs_changed_in_place_later_are_sent_as_they_were_at_their_step(toy_adapters, write_scenario,
                                                                           tmp_path):
    path = write_scenario(ramp_sink(duration_s=7200).replace('src = { adapter = "toy_ramp" }',
                                                              'src = { adapter = "toy_alias" }'))
    on = _run(path, tmp_path, "on")
    assert on.metadata["ahead"]["sims"] == ["src"]
    ts = _same(_run(path, tmp_path, "off"), on)
    assert ts["a.p_mw"].is_monotonic_increasing and ts["a.p_mw"].nunique() == len(ts)


def test_a_slow_head_keeps_the_parent_fed_and_is_no_stall(toy_adapters, write_scenario, tmp_path):
    """Batches go out at least every FLUSH_S: 5 ms head steps with a 0.5 s stall timeout are fine."""
    path = write_scenario(ramp_sink(duration_s=1200, step_s=5).replace(
        'src = { adapter = "toy_ramp" }', 'src = { adapter = "toy_slow_steps", step_wall_s = 0.005 }'))
    on = _run(path, tmp_path, "on", **{"scenario.stall_timeout_s": 0.5})
    assert on.ok and on.metadata["ahead"]["sims"] == ["src"]
    _same(_run(path, tmp_path, "off"), on)


def test_a_failure_in_the_parent_stops_a_slow_worker_promptly(toy_adapters, write_scenario, tmp_path, workers):
    """The worker notices at its next send (at least every FLUSH_S), not after STOP_WAIT_S."""
    text = ramp_sink(duration_s=7200, step_s=5).replace('src = { adapter = "toy_ramp" }',
                                                         'src = { adapter = "toy_slow_steps", step_wall_s = 0.005 }')
    path = write_scenario(text.replace('sink = { adapter = "toy_sink" }',
                                       'sink = { adapter = "toy_faulty_sink", fail_at_s = 60 }'))
    result = _run(path, tmp_path, "on")
    assert result.status == "failed" and "injected sink failure at t = 60 s" in result.reason
    assert len(workers) == 1 and _gone(workers[0].pid)
    # it ended by itself (finalizing the head), not killed after STOP_WAIT_S as with batches by count only
    assert workers[0].ended_how == "exit code 0"


def test_an_error_and_a_warning_at_the_heads_finalize_reach_the_run(toy_adapters, write_scenario, tmp_path):
    path = write_scenario(ramp_sink().replace('src = { adapter = "toy_ramp" }', 'src = { adapter = "toy_finalize_fail" }'))
    with pytest.warns(UserWarning, match="toy src warns at finalize"):
        off = _run(path, tmp_path, "off")
    with pytest.warns(UserWarning, match="toy src warns at finalize"):
        on = _run(path, tmp_path, "on")
    assert on.metadata["ahead"]["sims"] == ["src"]
    assert on.status == "failed" and "RuntimeError: toy src failed to finalize" in on.reason
    _same(off, on)


def test_a_worker_that_dies_finalizing_the_head_fails_the_run(toy_adapters, write_scenario, tmp_path):
    """Every row is recorded, but the head's finalize never finished: the run must not say ok."""
    path = write_scenario(ramp_sink().replace('src = { adapter = "toy_ramp" }',
                                              f'src = {{ adapter = "toy_kill_at_finalize", parent_pid = {os.getpid()} }}'))
    result = _run(path, tmp_path, "on")
    assert result.metadata["ahead"]["sims"] == ["src"]
    assert result.status == "failed" and "WorkerDied" in result.reason and "killed by signal 9" in result.reason
    assert len(result.timeseries()) == 60


@pytest.fixture
def workers(monkeypatch):
    """The run's :class:`cosim.run.ahead.Ahead` objects, as they start."""
    started = []
    real = ahead.Ahead.__init__

    def init(self, engine, head):
        real(self, engine, head)
        started.append(self)

    monkeypatch.setattr(ahead.Ahead, "__init__", init)
    return started


def _gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # reaped: not our child any more
    return False


def test_a_failure_in_the_parent_stops_the_worker(toy_adapters, write_scenario, tmp_path, workers):
    path = write_scenario(ramp_sink().replace('sink = { adapter = "toy_sink" }',
                                              'sink = { adapter = "toy_faulty_sink", fail_at_s = 900 }'))
    ts = _same(_run(path, tmp_path, "off"), on := _run(path, tmp_path, "on"))
    assert on.status == "failed" and "injected sink failure at t = 900 s" in on.reason
    assert len(ts) == 15
    assert len(workers) == 1 and _gone(workers[0].pid)


def test_a_stop_in_the_parent_stops_the_worker(toy_adapters, write_scenario, tmp_path, workers, monkeypatch):
    """SIGTERM reaches the parent (the worker ignores it): the run is interrupted at a recorded
    step, the worker is told to stop and is gone, the rows so far are kept."""
    from cosim.run import recorder

    real = recorder.RecorderSim.record_refs

    def record_refs(self, time, refs):
        if time == 600:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, time, refs)

    monkeypatch.setattr(recorder.RecorderSim, "record_refs", record_refs)
    with pytest.raises(RunInterrupted):
        _run(write_scenario(ramp_sink(duration_s=7200)), tmp_path, "on")
    assert len(workers) == 1 and _gone(workers[0].pid)
    (folder,) = (tmp_path / "on").iterdir()
    ts = RunFolder(folder).timeseries()
    assert 10 <= len(ts) < 120
