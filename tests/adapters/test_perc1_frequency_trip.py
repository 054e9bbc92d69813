"""PERC1's frequency trip, on the co-simulated model (adapters/ride_through.py) and the native one
inside ANDES (adapters/andes_grid/perc1.py).

The trip is the common under-/over-frequency trip of inverter and load models (PSS/E's DER_A,
DERA1: thresholds ``fl``/``fh`` in Hz, timers ``tfl``/``tfh``), not PowerWorld's PERC1 definition,
which could not be read: below ``f_trip_low_hz`` for ``t_f_trip_low_s`` (or above
``f_trip_high_hz`` for ``t_f_trip_high_s``) the whole load trips, latched, no reconnection; the
timer counts only while the frequency is beyond the threshold, which lies outside the deadband.

Analytical cases: a frequency ramp ``f(t) = 60 -/+ r t`` crosses the threshold at
``t_c = |60 - f_trip| / r``; the exact trip instant is ``t_c + pickup``.

* native (its logic driven as ANDES drives it, one call per Newton iteration at 1/60 s steps): the
  trip acts at the first step at or after the exact instant, so within one ANDES step;
* co-simulated (0.1 s steps, the frequency a step late as it comes back time-shifted): within one
  cosim step after the exact instant, counted from the step that first saw the frequency beyond;
* inside the deadband, or beyond the threshold for less than the pickup time, no trip.

In ANDES (IEEE 39, machine GENROU_9 tripped at 0.5 s, the campus's bus frequency falls through
59.9 Hz): the native trip acts within one ANDES step (1/60 s) of the crossing plus the pickup time,
found from the sub-steps' own bus frequency; the co-simulated model fed the same run's frequency
(as a scenario feeds it: the previous step's value) trips 0 to 0.1 s + 1/60 s later.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from cosim.adapters.andes_grid import perc1_record as record
from cosim.adapters.andes_grid.perc1 import DEFAULTS, Perc1Logic
from cosim.adapters.andes_grid import AndesGridSim
from cosim.adapters.ride_through import Perc1, Perc1Params
from cosim.scenario import ScenarioError, load_scenario

H_S = 1 / 60  # the ANDES step of the analytical native cases and of the ANDES run [s]
DT_S = 0.1    # the cosim step [s]


# -- the co-simulated model ----------------------------------------------------------------------------------
def _cosim_trip_time(params: dict, f_of_t, t_end_s: float = 4.0) -> float | None:
    """Start of the first step the co-simulated model draws nothing (f(t_k) given at step k), else None."""
    model = Perc1(Perc1Params(**params))
    for k in range(round(t_end_s / DT_S)):
        t = k * DT_S
        p, q = model.step(DT_S, 1.0, f_of_t(t))
        if p == 0.0 and q == 0.0:
            return t
    return None


@pytest.mark.parametrize("side", ["low", "high"])
def test_cosimulated_ramp_through_the_threshold_trips_one_step_after_the_pickup_time_at_most(side):
    rate = 0.45  # Hz/s: crosses 59.5 (60.5) at 1.111 s
    sign = -1 if side == "low" else 1
    params = ({"f_trip_low_hz": 59.5, "t_f_trip_low_s": 0.5} if side == "low"
              else {"f_trip_high_hz": 60.5, "t_f_trip_high_s": 0.5})
    t_exact = 0.5 / rate + 0.5
    t_trip = _cosim_trip_time(params, lambda t: 60.0 + sign * rate * t)
    assert t_trip is not None and t_exact <= t_trip <= t_exact + DT_S + 1e-9
    # latched: the frequency back at 60 Hz does not bring the load back
    model = Perc1(Perc1Params(**params))
    shares = [model.step(DT_S, 1.0, 60.0 + sign * rate * k * DT_S if k < 25 else 60.0) for k in range(60)]
    assert shares[-1] == (0.0, 0.0) and shares[10] == (1.0, 1.0)


def test_cosimulated_no_trip_inside_the_deadband_or_for_less_than_the_pickup_time():
    params = {"f_trip_low_hz": 59.5, "t_f_trip_low_s": 0.5, "f_trip_high_hz": 60.5, "t_f_trip_high_s": 0.5}
    assert _cosim_trip_time(params, lambda t: 60.0 - 0.03 * math.sin(t)) is None  # inside the ±36 mHz deadband
    assert _cosim_trip_time(params, lambda t: 59.6) is None                        # beyond the band, not the trip
    # two dips to 59.4 Hz of 0.4 s each, 0.2 s apart: the timer starts over each time
    assert _cosim_trip_time(params, lambda t: 59.4 if 1.0 <= t < 1.4 or 1.6 <= t < 2.0 else 60.0) is None
    assert _cosim_trip_time(params, lambda t: 59.4 if 1.0 <= t < 1.6 else 60.0) == pytest.approx(1.5)


def test_the_trip_takes_the_whole_load_whatever_fcease_and_past_the_lead_lags():
    params = {"fcease_frac": 0.3, "tap_s": 0.0, "tbp_s": 2.0, "taq_s": 0.0, "tbq_s": 2.0,
              "f_trip_high_hz": 60.5, "t_f_trip_high_s": 0.0}
    model = Perc1(Perc1Params(**params))
    assert model.step(DT_S, 1.0, 60.0) == (1.0, 1.0)
    assert model.step(DT_S, 1.0, 60.6) == (0.0, 0.0)


# -- the native model's logic, driven as ANDES drives it ------------------------------------------------------
def _native_logic(params: dict) -> Perc1Logic:
    values = {**DEFAULTS, **{name: params[key] for name, (key, _u, _m) in record.PARAMS.items() if key in params}}
    owner_params = {name: SimpleNamespace(v=np.array([float(v)])) for name, v in values.items()}
    v, f = SimpleNamespace(v=np.array([1.0])), SimpleNamespace(v=np.array([1.0]))
    logic = Perc1Logic(owner_params, v, f)
    logic.owner = SimpleNamespace(system=SimpleNamespace(config=SimpleNamespace(freq=60.0)))
    logic.list2array(1)
    return logic


def _native_trip_time(params: dict, f_of_t, t_end_s: float = 4.0) -> float | None:
    """The first ANDES step time whose converged iterate has the trip (the flag ``on`` at 0), else None.
    Each step: three Newton iterations, the first from the previous step's frequency."""
    logic = _native_logic(params)
    f_prev = f_of_t(0.0)
    logic.f.v[:] = f_prev / 60.0
    logic.check_var(0.0)
    for k in range(1, round(t_end_s / H_S) + 1):
        t = k * H_S
        for f_hz in (f_prev, 0.5 * (f_prev + f_of_t(t)), f_of_t(t)):
            logic.f.v[:] = f_hz / 60.0
            logic.check_var(t)
        f_prev = f_of_t(t)
        if logic.on[0] == 0.0:
            return t
    return None


@pytest.mark.parametrize("side", ["low", "high"])
def test_native_ramp_through_the_threshold_trips_within_one_andes_step_of_the_pickup_time(side):
    rate = 0.45
    sign = -1 if side == "low" else 1
    params = ({"f_trip_low_hz": 59.5, "t_f_trip_low_s": 0.5} if side == "low"
              else {"f_trip_high_hz": 60.5, "t_f_trip_high_s": 0.5})
    t_exact = 0.5 / rate + 0.5
    t_trip = _native_trip_time(params, lambda t: 60.0 + sign * rate * t)
    assert t_trip is not None and t_exact - 1e-9 <= t_trip < t_exact + H_S
    # latched: back at 60 Hz the flag stays 0 and the shares P and Q are multiplied by it in the equations
    logic = _native_logic(params)
    for k in range(1, 240):
        t = k * H_S
        logic.f.v[:] = (60.0 + sign * rate * t if t < 2.5 else 60.0) / 60.0
        logic.check_var(t)
    assert logic.on[0] == 0.0


def test_native_no_trip_inside_the_deadband_or_for_less_than_the_pickup_time():
    params = {"f_trip_low_hz": 59.5, "t_f_trip_low_s": 0.5, "f_trip_high_hz": 60.5, "t_f_trip_high_s": 0.5}
    assert _native_trip_time(params, lambda t: 60.0 - 0.03 * math.sin(t)) is None
    assert _native_trip_time(params, lambda t: 59.6) is None
    assert _native_trip_time(params, lambda t: 59.4 if 1.0 <= t < 1.4 or 1.6 <= t < 2.0 else 60.0) is None
    # a step below the threshold: the crossing is placed between the two samples, the trip 0.5 s later
    t_trip = _native_trip_time(params, lambda t: 59.4 if t >= 1.0 else 60.0)
    assert t_trip is not None and 1.5 - H_S <= t_trip <= 1.5 + H_S


def test_native_off_by_default():
    assert _native_trip_time({}, lambda t: 55.0) is None


# -- inside ANDES, and the two side by side ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def andes_run():
    """IEEE 39, GENROU_9 tripped at 0.5 s; a 200 MW campus at bus 16 with a native PERC1 whose
    under-frequency trip is 59.9 Hz after 0.5 s. Per ANDES sub-step: time, bus frequency, flag ``on``."""
    sim = AndesGridSim()
    sim.init("tgrid", time_resolution=0.1, start_utc="2024-07-10T00:00:00Z", step_s=DT_S, duration_s=60, seed=1,
             case="ieee39", faults=[], gen_trips=[[0.5, "GENROU_9"]], dt_s=H_S)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="pcc", bus=16, p_mw=200.0, q_mvar=40.0,
               perc1={"f_trip_low_hz": 59.9, "t_f_trip_low_s": 0.5})
    sub, steps = [], []
    substep = AndesGridSim._substep

    def spy(self, t_end_s, step_start_s):
        substep(self, t_end_s, step_start_s)
        ss = self.system
        sub.append((t_end_s, float(ss.BusFreq.f.v[self.bf_uid["pcc"]]) * 60.0, float(ss.PERC1.SH.on[0])))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(AndesGridSim, "_substep", spy)
        for k in range(36):
            sim.step(k, {"pcc": {"p_mw": {"dc": 200.0}, "q_mvar": {"dc": 40.0}}}, None)
            steps.append(sim.get_data({"pcc": ["f_hz", "vm_min_pu", "p_connected_frac", "p_served_mw"]})["pcc"])
    return np.array(sub), steps


def test_native_trip_inside_andes_acts_within_one_andes_step(andes_run):
    sub, steps = andes_run
    t, f, on = sub[:, 0], sub[:, 1], sub[:, 2]
    k_trip = int(np.argmax(on == 0.0))
    assert on[k_trip] == 0.0 and on[:k_trip].min() == 1.0
    # the last downward crossing of 59.9 Hz before the trip, between two sub-steps' samples
    down = [k for k in range(1, k_trip + 1) if f[k - 1] >= 59.9 > f[k]]
    k = down[-1]
    t_c = t[k - 1] + (f[k - 1] - 59.9) / (f[k - 1] - f[k]) * (t[k] - t[k - 1])
    assert (f[k:k_trip + 1] < 59.9).all()
    assert t_c + 0.5 - 1e-9 <= t[k_trip] < t_c + 0.5 + H_S + 1e-9
    # latched for the rest of the run, and what the Load reports: nothing drawn from the trip's step on
    assert (on[k_trip:] == 0.0).all()
    k_step = int(t[k_trip] / DT_S - 1e-9)  # the cosim step whose interval holds the trip
    assert all(s["p_connected_frac"] == 0.0 and s["p_served_mw"] == 0.0 for s in steps[k_step:])
    assert steps[k_step - 1]["p_connected_frac"] == pytest.approx(1.0)


def test_cosimulated_fed_the_same_frequency_trips_at_most_one_cosim_step_later(andes_run):
    """The co-simulated model sees at step k the frequency the grid reported at the end of step k - 1
    (a time-shifted connection); until the trip both models draw the same, so the grid is the same."""
    sub, steps = andes_run
    t_native = sub[int(np.argmax(sub[:, 2] == 0.0)), 0]
    model = Perc1(Perc1Params(f_trip_low_hz=59.9, t_f_trip_low_s=0.5))
    t_cosim = None
    for k in range(1, len(steps)):
        if model.step(DT_S, steps[k - 1]["vm_min_pu"], steps[k - 1]["f_hz"]) == (0.0, 0.0):
            t_cosim = k * DT_S
            break
    assert t_cosim is not None
    assert 0.0 <= t_cosim - t_native <= DT_S + H_S + 1e-9


# -- bad input ----------------------------------------------------------------------------------------------------
SCENARIO = """
[scenario]
name = "ftrip"
start = 2024-07-10T23:00:00Z
duration_s = 2
step_s = 0.1
tick_s = 0.1

[sims.rt]
adapter = "ride_through"

[entities.ups]
sim = "rt"
model = "RideThrough"
curve = "none"
perc1 = {{ {perc1} }}
"""


@pytest.mark.parametrize("perc1, expected", [
    ("f_trip_low_hz = 59.98", ["f_trip_low_hz = 59.98", "f_nominal_hz - dbfl_hz = 59.964", "set 0"]),
    ("f_trip_high_hz = 59.0", ["f_trip_high_hz = 59", "f_nominal_hz + dbfh_hz = 60.036", "set 0"]),
    ("f_trip_low_hz = 59.5, dbfl_hz = 0.6", ["f_trip_low_hz = 59.5", "59.4"]),
    ("t_f_trip_low_s = -1", ["t_f_trip_low_s", "-1"]),
])
def test_thresholds_out_of_order_are_one_problem_naming_file_key_value_and_fix(tmp_path, perc1, expected):
    path = tmp_path / "ftrip.toml"
    path.write_text(SCENARIO.format(perc1=perc1))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert info.value.file == str(path) and problems[0].path.startswith("entities.ups"), problems
    text = str(problems[0])
    for part in expected:
        assert part in text, (part, text)


def test_defaults_leave_the_trip_off_and_in_order():
    p = Perc1Params()
    assert (p.f_trip_low_hz, p.f_trip_high_hz, p.t_f_trip_low_s, p.t_f_trip_high_s) == (0.0, 0.0, 0.0, 0.0)
    assert _cosim_trip_time({}, lambda t: 50.0) is None


def test_the_trip_stays_for_the_run_also_past_the_ups_logics_off_s():
    """As the module docstring of ``ride_through`` says: ``off_s`` times the UPS logic's own trips, not
    PERC1's frequency trip, which holds for the rest of the run with the load on its backup."""
    from cosim.adapters.ride_through import RideThrough, RideThroughParams  # noqa: PLC0415

    rt = RideThrough(RideThroughParams(curve="none", off_s=1.0, e_ups_mwh=10.0, genset_start_s=None,
                                       perc1={"f_trip_low_hz": 59.5}))
    outs = [rt.step(k * DT_S, DT_S, {"p_load_mw": 10.0, "f_hz": 59.0 if k < 3 else 60.0}) for k in range(40)]
    assert all(o["p_connected_frac"] == 0.0 and o["p_ups_mw"] == pytest.approx(10.0) for o in outs)
    assert all(o["in_service"] and o["n_trips"] == 0 for o in outs)
