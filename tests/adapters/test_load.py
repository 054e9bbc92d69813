"""Tests of the load adapter (facility load following a measured trace) and its trace."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from cosim.sdk import ScenarioContext
from cosim.adapters.load import FacilityLoadParams, LoadSim, facility_from_params, reactive_power_mvar
from cosim.adapters.signals import TimeSeries

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"
DAY = DATA / "loads" / "helios_earth_day_2020-05-20.csv"
MONTH = DATA / "loads" / "helios_earth_2020-05_1min.csv.gz"
UTC = timezone.utc
START = {"start_utc": "2024-07-15T00:00:00Z", "step_s": 60, "duration_s": 86_400, "seed": 7}


def started(**overrides) -> LoadSim:
    sim = LoadSim()
    sim.init("load", **{**START, **overrides})
    return sim


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


# -- physics --------------------------------------------------------------------------------
@pytest.mark.parametrize(("pf", "q_per_p"), [(1.0, 0.0), (0.98, math.sqrt(1 - 0.98**2) / 0.98), (0.8, 0.75)])
def test_reactive_power_follows_the_power_factor(pf, q_per_p):
    """q = p tan(acos(pf)); for pf = 0.8 the power triangle is 3-4-5, so q/p = 0.75."""
    assert reactive_power_mvar(2.0, pf) == pytest.approx(2.0 * q_per_p)
    assert reactive_power_mvar(2.0, pf) ** 2 + 4.0 == pytest.approx((2.0 / pf) ** 2)  # |S| = p / pf


@pytest.mark.parametrize("pf", [0.0, -0.5, 1.01])
def test_power_factor_outside_0_1_is_rejected(pf):
    with pytest.raises(ValueError):
        reactive_power_mvar(1.0, pf)
    with pytest.raises(ValidationError, match="power_factor"):
        FacilityLoadParams(file=DAY, power_factor=pf)


# -- the adapter, driven without a mosaik world -----------------------------------------------
def test_load_sim_follows_the_trace_with_lagging_q():
    sim = started()
    meta = sim.meta
    assert meta["models"]["FacilityLoad"]["outputs"] == ["p_mw", "q_mvar", "p_it_mw"]
    sim.create(1, "FacilityLoad", eid="campus", file=str(DAY), repeat=True, power_factor=0.95)
    trace = pd.read_csv(DAY)
    for minute in (0, 1, 719, 1439):
        assert sim.step(minute * 60, {}, 86_400) == minute * 60 + 60
        data = sim.get_data({"campus": ["p_mw", "q_mvar"]})["campus"]
        assert data["p_mw"] == trace.p_mw[minute]  # 2024-07-15 reads 2020-05-20 by UTC time of day
        assert data["q_mvar"] == pytest.approx(data["p_mw"] * math.tan(math.acos(0.95)))
        assert data["q_mvar"] > 0


def test_default_day_runs_every_step_inside_the_trace_range():
    sim = started()
    sim.create(1, "FacilityLoad", eid="campus", file=str(DAY), repeat=True)
    seen = []
    time_s = 0
    while time_s < START["duration_s"]:
        time_s_next = sim.step(time_s, {}, START["duration_s"])
        seen.append(sim.get_data({"campus": ["p_mw"]})["campus"]["p_mw"])
        time_s = time_s_next
    assert len(seen) == 1440
    assert seen == pd.read_csv(DAY).p_mw.tolist()


def test_peak_mw_rescales_the_whole_trace():
    sim = started()
    sim.create(1, "FacilityLoad", eid="big", file=str(MONTH), repeat=True, peak_mw=50.0)
    sim.create(1, "FacilityLoad", eid="own", file=str(MONTH), repeat=True)
    sim.step(0, {}, 86_400)
    data = sim.get_data({"big": ["p_mw"], "own": ["p_mw"]})
    peak = pd.read_csv(MONTH).p_mw.max()
    assert data["big"]["p_mw"] == pytest.approx(data["own"]["p_mw"] * 50.0 / peak)


def test_linear_and_other_columns(tmp_path):
    path = write(tmp_path, "time_utc,load_kw\n2024-07-15T00:00Z,1000\n2024-07-15T01:00Z,3000\n"
                           "2024-07-16T00:00Z,3000\n")
    facility = facility_from_params(FacilityLoadParams(file=path, column="load_kw", interpolation="linear",
                                                       peak_mw=3.0, power_factor=1.0))
    assert isinstance(facility.series, TimeSeries)  # the signals module's code, not a copy
    assert facility.power_at(datetime(2024, 7, 15, 0, 30, tzinfo=UTC)) == pytest.approx((2.0, 0.0))


def test_uncovered_trace_is_an_error_at_create_and_in_check():
    params = FacilityLoadParams(file=DAY)  # no repeat: a 2020 day cannot cover 2024-07-15
    ctx = ScenarioContext(datetime(2024, 7, 15, tzinfo=UTC), 86_400, 60, 7)
    (problem,) = LoadSim.check_entity("FacilityLoad", params, ctx)
    assert "covers 2020-05-20T00:00:00Z to 2020-05-21T00:00:00Z" in problem and "repeat = true" in problem
    sim = started()
    with pytest.raises(ValueError) as err:
        sim.create(1, "FacilityLoad", eid="campus", file=str(DAY))
    assert str(err.value) == f"campus: {problem}"


def test_missing_column_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"no column 'p_kw'; available: n_busy_gpus, busy_gpu_frac, p_mw"):
        started().create(1, "FacilityLoad", eid="campus", file=str(DAY), column="p_kw", repeat=True)


# -- the shipped trace --------------------------------------------------------------------------
def test_trace_follows_the_stated_power_model():
    """loads/README.md: p = 4096 (63 + (400 - 63) f + 126) W, f = busy GPUs / 856."""
    for path in (DAY, MONTH):
        trace = pd.read_csv(path)
        np.testing.assert_allclose(trace.busy_gpu_frac, trace.n_busy_gpus / 856, atol=1e-6)
        model_mw = 4096 * (63 + (400 - 63) * trace.n_busy_gpus / 856 + 126) / 1e6
        np.testing.assert_allclose(trace.p_mw, model_mw, atol=1e-6)
        assert pd.to_datetime(trace.time_utc).diff().dropna().eq(pd.Timedelta(minutes=1)).all()
    month = pd.read_csv(MONTH)
    assert len(month) == 44_640 and month.p_mw.max() == pytest.approx(2.006, abs=5e-4)
    assert month.time_utc.iloc[0] == "2020-04-30T16:00:00Z"  # 2020-05-01 00:00 in China (UTC+8)
    day = pd.read_csv(DAY)
    assert len(day) == 1440 and day.time_utc.iloc[0] == "2020-05-20T00:00:00Z"
    assert day.p_mw.tolist() == month.set_index("time_utc").loc[day.time_utc, "p_mw"].tolist()


@pytest.mark.parametrize("overrides, params", [
    ({"start_utc": "2024-07-15T13:00:00Z", "duration_s": 36 * 3600}, {"file": str(DAY), "repeat": True}),
    ({"start_utc": "2020-05-10T22:00:00Z", "duration_s": 30 * 3600, "step_s": 420},
     {"file": str(MONTH), "interpolation": "linear", "peak_mw": 3.3, "power_factor": 0.9}),
    ({"start_utc": "2024-07-15T23:59:58.5Z", "duration_s": 30, "step_s": 1.5, "time_resolution": 0.5},
     {"file": str(DAY), "repeat": True, "interpolation": "linear"}),  # sub-second: read time by time
])
def test_the_trace_read_ahead_is_power_at_each_step(overrides, params):
    """The sim reads a day of the trace at once; each step's outputs are ``FacilityLoad.power_at``
    of its own time, to the bit (hold and linear, scaled to a peak, across midnight, at a 1.5 s
    step on a 0.5 s tick). Control: the values change over the run."""
    sim = started(**overrides)
    sim.create(1, "FacilityLoad", eid="campus", **params)
    facility = sim.entities["campus"]
    ticks = round(1 / overrides.get("time_resolution", 1.0))
    step_ticks = round(overrides.get("step_s", 60) * ticks)
    seen = set()
    for t in range(0, overrides["duration_s"] * ticks, step_ticks):
        sim.step(t, {}, overrides["duration_s"] * ticks)
        p_mw, q_mvar = facility.power_at(sim.utc(sim.seconds(t)))
        data = sim.get_data({"campus": ["p_mw", "q_mvar", "p_it_mw"]})["campus"]
        assert [v.hex() for v in data.values()] == [p_mw.hex(), q_mvar.hex(), p_mw.hex()], t
        seen.add(p_mw)
    assert len(seen) > 1
