"""``cosim.Session`` driven as a user drives it from a notebook: several runs in one process, an
exception in the ``with`` block, a simulator that dies mid-step, values from numpy and outside the
adapter's bounds, a Scenario object with overrides. Each test names what it failed on before.

Toy scenario (tests/helpers/toy_scenarios.py)::

    src:a (ramp) --p_mw--> sink:s
    src:b (flat) --p_mw--> sink:s
"""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

import cosim
from cosim.errors import RunInterrupted
from cosim.run.session import Session
from cosim.run.stopping import STOP, StopRequested
from toy_scenarios import ramp_sink

FAULTY = """
[scenario]
name = "faulty"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60

[sims]
src = { adapter = "toy_faulty", fail_at_s = 600 }
sink = { adapter = "toy_sink" }

[entities]
a = { sim = "src", model = "Faulty" }
s = { sim = "sink", model = "Sink" }

[[connect]]
src = "a"
dst = "s"
attrs = ["p_mw"]
"""


def _metadata(result) -> dict:
    return json.loads((result.run_dir / "metadata.json").read_text())


def test_runs_in_one_process_keep_their_own_records(toy_adapters, write_scenario, tmp_path):
    """Closing one Session, or a ``cosim.run`` on either engine, closed *every* recorder of the
    process: the other Session went on stepping, recorded nothing more and still said ``ok``
    (30 of 60 rows)."""
    path = write_scenario(ramp_sink())
    first = Session(path, out_dir=tmp_path / "a", report=False)
    second = Session(path, out_dir=tmp_path / "b", report=False)
    first.run_until(1800)
    second.run_until(1800)
    first.close()
    for engine in ("direct", "mosaik"):
        cosim.run(path, out_dir=tmp_path / engine, overrides={"scenario.engine": engine})
    second.run_until(3600)
    result = second.close()
    assert first.result.status == "stopped" and len(first.result.timeseries()) == 30
    assert result.status == "ok" and len(result.timeseries()) == 60


def test_a_stop_asked_for_does_not_outlive_its_run(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """A run that SIGTERM interrupted left its stop request behind: every later Session of the
    process raised ``StopRequested: interrupted (SIGTERM)`` at its first step."""
    from cosim.run import recorder

    real = recorder.RecorderSim.record_refs

    def record_refs(self, time, refs):
        if time == 600:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, time, refs)

    path = write_scenario(ramp_sink())
    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(recorder.RecorderSim, "record_refs", record_refs)
    with pytest.raises(RunInterrupted):
        cosim.run(path, out_dir=tmp_path / "cut", overrides={"scenario.engine": "direct"})
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGTERM) is handler and STOP.reason is None
    with Session(path, out_dir=tmp_path / "after", report=False) as s:
        s.run_until(3600)
    assert s.result.status == "ok" and len(s.result.timeseries()) == 60


def test_an_exception_in_the_with_block_says_interrupted(toy_adapters, write_scenario, tmp_path):
    """It said ``stopped``, ``session closed at t = ...``: nothing told the run was cut by an error."""
    with pytest.raises(ZeroDivisionError):
        with Session(write_scenario(ramp_sink()), out_dir=tmp_path, report=False) as s:
            s.run_until(600)
            1 / 0
    assert s.result.status == "interrupted"
    assert s.result.reason == "interrupted by ZeroDivisionError: division by zero at t = 600 s of 3600 s"
    assert _metadata(s.result)["status"] == "interrupted" and len(s.result.timeseries()) == 10


def test_interrupt_closes_the_run_as_interrupted_with_the_callers_reason(toy_adapters, write_scenario, tmp_path):
    """A caller that cannot go on (a federation that stopped granting time) says why; without it, ``stopped``."""
    s = Session(write_scenario(ramp_sink()), out_dir=tmp_path, report=False)
    s.run_until(600)
    s.interrupt("the federation stopped answering")
    result = s.close()
    assert result.status == "interrupted"
    assert result.reason == "interrupted by the federation stopped answering at t = 600 s of 3600 s"
    assert len(result.timeseries()) == 10


def test_a_stop_asked_for_at_a_step_says_interrupted(toy_adapters, write_scenario, tmp_path):
    """A stop asked for (SIGTERM or Ctrl-C under cosim's handlers: a HELICS federate on the direct engine)
    stops the step at the recorder; the folder said ``failed``, as if a simulator had raised."""
    s = Session(write_scenario(ramp_sink()), out_dir=tmp_path, report=False)
    s.run_until(600)
    STOP.request("interrupted (SIGTERM)")
    try:
        with pytest.raises(StopRequested):
            s.step()
    finally:
        STOP.reason = None
    result = s.close()
    assert result.status == "interrupted"
    assert result.reason == "interrupted (SIGTERM) at t = 600 s of 3600 s"
    assert len(result.timeseries()) == 10


def test_a_simulator_failing_mid_step_fails_the_run_and_stops_the_session(toy_adapters, write_scenario, tmp_path):
    """The folder said ``stopped`` (no cause), and the session stepped on from half a step."""
    with Session(write_scenario(FAULTY), out_dir=tmp_path, report=False) as s:
        with pytest.raises(RuntimeError, match="injected failure at t = 600 s"):
            s.run_until(3600)
        with pytest.raises(RuntimeError, match="broke at t = 600 s .*injected failure"):
            s.step()
    assert s.result.status == "failed" and "injected failure at t = 600 s" in s.result.reason
    assert len(s.result.timeseries()) == 10


def test_a_simulator_failing_at_start_leaves_a_failed_folder(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """The folder said ``running`` for ever."""
    import toy_sims

    def broken(self):
        raise RuntimeError("cannot open its data")

    monkeypatch.setattr(toy_sims.SinkSim, "setup_done", broken, raising=False)
    with pytest.raises(RuntimeError, match="cannot open its data"):
        Session(write_scenario(ramp_sink()), out_dir=tmp_path / "runs", report=False)
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "failed" and "cannot open its data" in meta["reason"]


def test_set_takes_numpy_numbers_and_refuses_values_outside_the_adapters_bounds():
    """``np.float32`` was refused as not a number; 5 MW on a ±1 MW battery or a 1,000 W cap on an
    H100 was taken, then the adapter raised at the next step from inside the run."""
    with Session("scenarios/rl_site.toml", {"scenario.duration_s": 3600}, record=False) as s:
        s.set("bess", "p_set_mw", np.float32(0.5))
        s.set("campus", "p_cap_w", np.int64(400))
        with pytest.raises(cosim.ScenarioError, match="give a finite number"):
            s.set("bess", "p_set_mw", 10**400)  # was OverflowError from math.isfinite
        with pytest.raises(cosim.ScenarioError, match=r"bess.p_set_mw = 5.0: outside the bounds \[-1, 1\] mw"):
            s.set("bess", "p_set_mw", 5.0)
        with pytest.raises(cosim.ScenarioError, match=r"campus.p_cap_w = 1000: outside the bounds \[200, 700\] w"):
            s.set("campus", "p_cap_w", 1000)
        with pytest.raises(cosim.ScenarioError, match=r"campus.p_limit_mw = -5.0: outside the bounds \[0, 100000\] mw"):
            s.set("campus", "p_limit_mw", -5.0)  # no rated_mw: was taken, then the cluster failed the run
        s.set("campus", "p_limit_mw", 1e4)  # any limit above the draw: no limit
        held = s.engine.entity_sim["bess"].held
        assert held[("bess", "p_set_mw")] == 0.5 and type(held[("bess", "p_set_mw")]) is float
        s.run_until(900)  # the refused values were not held: the run steps on
        assert s.time_s == 900


@pytest.mark.parametrize(("entity", "attr", "value", "bounds"), [
    ("hall", "q_it_mw", -1e9, r"\[0, 1000\] mw"),  # was taken; fmi2DoStep then failed the run
    ("plant", "t_chw_supply_setpoint_c", -273.0, r"\[1, 35\] c"),  # was taken: water at -273 degC, a plausible PUE
    ("pcc", "p_mw", 1000.0, r"\[-100, 100\] mw"),  # was taken: the feeder never converged again
    ("feeder", "line_1_2_in_service", 2.0, r"\[0, 1\]"),
    ("pv", "ghi_w_m2", -5.0, r"\[0, 1500\] w_m2"),
])
def test_set_refuses_fmu_and_grid_inputs_outside_their_bounds(entity, attr, value, bounds):
    """FMU inputs are bounded by the model description's min/max, grid elements' powers by the
    sim's ``element_p_max_mw`` (default: ten times the network's tabulated load and generation, at
    least 100 MW), every other input by its adapter or its unit's plausible range."""
    with Session("scenarios/default.toml", {"scenario.duration_s": 600}, record=False) as s:
        s.step()
        with pytest.raises(cosim.ScenarioError, match=rf"{entity}.{attr} = {value}: outside the bounds {bounds}"):
            s.set(entity, attr, value)
        assert (entity, attr) not in s.engine.entity_sim[entity].held
        s.step()  # the refused value was not held: the run steps on


def test_releasing_an_opened_line_restores_it():
    """``set(line, None)`` released the hold but left the line open (the adapter keeps the last state
    it was given): the feeder stayed cut. Now a release puts back the scenario's own value."""
    opened = {"scenario.duration_s": 600}
    with Session("scenarios/default.toml", opened, record=False) as s, \
            Session("scenarios/default.toml", opened, record=False) as reference:
        s.set("feeder", "line_1_2_in_service", 0)
        s.step(), reference.step()
        assert np.isnan(s.get("feeder.bus_18_vm_pu"))  # cut off from the source
        s.set("feeder", "line_1_2_in_service", None)
        s.set("pcc", "p_mw", 5.0)
        s.set("pcc", "p_mw", None)
        s.step(), reference.step()
        # the same solve, warm-started from other voltages: equal within the Newton tolerance
        assert s.get("feeder.bus_18_vm_pu") == pytest.approx(reference.get("feeder.bus_18_vm_pu"), abs=1e-9)
        assert s.get("feeder.bus_18_vm_pu") > 0.8
        assert s.get("pcc.p_mw") == reference.get("pcc.p_mw")


def test_releasing_an_fmu_input_sets_its_start_value_again():
    """An FMU keeps the last value it was set: a released setpoint stayed at the held value. Now it
    goes back to the entity's start value (``t_chw_supply_setpoint_c = 12.0`` in default.toml)."""
    short = {"scenario.duration_s": 600}
    with Session("scenarios/default.toml", short, record=False) as s, \
            Session("scenarios/default.toml", short, record=False) as reference:
        s.set("plant", "t_chw_supply_setpoint_c", 20.0)
        s.step(), reference.step()
        assert s.get("plant.t_chw_supply_c") == pytest.approx(20.0)
        s.set("plant", "t_chw_supply_setpoint_c", None)
        s.step(), reference.step()
        assert s.get("plant.t_chw_supply_c") == pytest.approx(reference.get("plant.t_chw_supply_c")) \
            == pytest.approx(12.0)


@pytest.mark.parametrize("t_s", [float("nan"), "3600", None])
def test_run_until_refuses_what_is_not_a_time(toy_adapters, write_scenario, t_s):
    """NaN did nothing without a word; text gave a raw TypeError from the comparison."""
    with Session(write_scenario(ramp_sink()), record=False) as s:
        with pytest.raises(cosim.ScenarioError, match="t_s = .*give the simulation time"):
            s.run_until(t_s)
        assert s.run_until(600) == 600 and s.run_until(0) == 600  # a time passed already does nothing


def test_a_scenario_object_takes_overrides_and_runs_as_direct(toy_adapters, write_scenario, tmp_path):
    """The overrides were dropped for a Scenario (the whole hour ran), and a scenario loaded for
    mosaik ran on the direct engine with ``engine = "mosaik"`` in its metadata."""
    scn = cosim.load_scenario(write_scenario(ramp_sink()))
    assert scn.engine == "mosaik"
    with Session(scn, {"scenario.duration_s": 600}, out_dir=tmp_path, report=False) as s:
        s.run_until(10**9)
    assert s.result.status == "ok" and len(s.result.timeseries()) == 10
    assert s.result.metadata["engine"] == "direct"


def test_set_refuses_a_perc1_share_on_a_ride_through_with_its_own_perc1(tmp_path):
    """The share would be a second PERC1 in series: the adapter raised at the next step and broke the
    run; refused at ``set`` instead, and taken on a RideThrough without perc1."""
    path = tmp_path / "rt.toml"
    path.write_text('[scenario]\nname = "rt"\nstart = 2024-07-15T00:00:00Z\nduration_s = 10\nstep_s = 1\n\n'
                    '[sims.rt]\nadapter = "ride_through"\n\n'
                    '[entities.ups]\nsim = "rt"\nmodel = "RideThrough"\nperc1 = { fcease_frac = 1.0 }\n\n'
                    '[entities.plain]\nsim = "rt"\nmodel = "RideThrough"\n')
    with Session(path, record=False) as s:
        with pytest.raises(cosim.ScenarioError, match=r"ups.p_grid_connected_frac = 0.5: not settable from outside "
                                                      r"on this entity: this RideThrough has its own perc1"):
            s.set("ups", "p_grid_connected_frac", 0.5)
        s.set("plain", "p_grid_connected_frac", 0.5)
        s.run_until(5)  # the refused value was not held: the run steps on
        assert s.time_s == 5


def test_the_heap_is_frozen_while_a_run_goes_and_thawed_after(toy_adapters, write_scenario, tmp_path, monkeypatch):
    """A Session and ``cosim run`` keep the heap alive at their start out of full collections
    (``gc.freeze``) and thaw it at the end; a heap frozen by someone else is left frozen."""
    import gc

    from cosim.run import direct

    path = write_scenario(ramp_sink())
    direct.thaw_heap(direct._HEAP_HOLDER)  # a Session another test of this worker process left open froze the
    gc.unfreeze()  # heap: start thawed
    assert gc.get_freeze_count() == 0
    with Session(path, overrides={"scenario.engine": "direct"}, out_dir=tmp_path, report=False) as session:
        assert gc.get_freeze_count() > 0
        session.step()
    assert gc.get_freeze_count() == 0
    seen = []
    step = direct.DirectEngine.step
    monkeypatch.setattr(direct.DirectEngine, "step", lambda engine, t=None: seen.append(gc.get_freeze_count()) or
                        step(engine, t))
    assert cosim.run(path, out_dir=tmp_path, overrides={"scenario.engine": "direct"}).ok
    assert seen and min(seen) > 0 and gc.get_freeze_count() == 0
    gc.freeze()  # the host's own freeze: kept (its count drops only as frozen objects are freed)
    try:
        with Session(path, overrides={"scenario.engine": "direct"}, out_dir=tmp_path, report=False) as session:
            session.step()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_second_session_leaves_the_first_ones_freeze_without_counting_it(toy_adapters, write_scenario, tmp_path,
                                                                           monkeypatch):
    """While one Session holds the heap frozen, another (a vector env's copies) neither freezes it nor
    asks ``gc.get_freeze_count()`` (a walk over every frozen object); the first one's close thaws it, the
    second one's does not touch it."""
    import gc

    from cosim.run import direct

    direct.thaw_heap(direct._HEAP_HOLDER)  # as in the tests above: start thawed
    gc.unfreeze()
    path = write_scenario(ramp_sink())
    first = Session(path, overrides={"scenario.engine": "direct"}, out_dir=tmp_path, report=False)
    counted = []
    count = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: counted.append(1) or count())
    second = Session(path, overrides={"scenario.engine": "direct"}, out_dir=tmp_path, report=False)
    assert not counted and first._frozen and not second._frozen
    first.close()
    assert count() == 0
    gc.freeze()  # someone else's freeze now: the second Session's close leaves it
    try:
        second.close()
        assert count() > 0
    finally:
        gc.unfreeze()


def test_a_session_dropped_without_close_thaws_the_heap(toy_adapters, write_scenario, tmp_path):
    """The heap frozen while a Session runs is thawed when the Session goes, closed or not."""
    import gc

    from cosim.run import direct

    direct.thaw_heap(direct._HEAP_HOLDER)  # as in the test above: start thawed
    gc.unfreeze()
    session = Session(write_scenario(ramp_sink()), overrides={"scenario.engine": "direct"}, out_dir=tmp_path,
                      report=False)
    session.step()
    assert gc.get_freeze_count() > 0
    del session
    assert gc.get_freeze_count() == 0


def test_a_session_dropped_in_a_reference_cycle_thaws_the_heap(toy_adapters, write_scenario, tmp_path):
    """A Session dropped inside a reference cycle thaws the heap once the cycle is collected: the
    Session handed out is not among the objects frozen (a frozen one is never collected, and the heap
    stayed frozen for the process)."""
    import gc

    from cosim.run import direct

    direct.thaw_heap(direct._HEAP_HOLDER)  # as in the tests above: start thawed
    gc.unfreeze()
    session = Session(write_scenario(ramp_sink()), overrides={"scenario.engine": "direct"}, out_dir=tmp_path,
                      report=False)
    session.step()
    session.owner = {"session": session}  # a cycle: the Session and a dict of the caller's
    assert gc.get_freeze_count() > 0
    del session
    gc.collect()
    assert gc.get_freeze_count() == 0
