"""Observations (cosim/gym/observations.py) and the adapter hooks they and the actions use:
missing values, time features, forecasts (signals, tariff), default bounds (battery, datacenter)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from cosim.adapters.battery import BatteryParams, BatterySim
from cosim.adapters.datacenter import ClusterParams, DatacenterSim
from cosim.adapters.signals import SignalsSim
from cosim.adapters.tariff import TariffSim
from cosim.gym.observations import Observer, time_features
from cosim.gym.forecasts import ForecastSpec
from cosim.gym.spec import AgentSpec

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data"
MONDAY_6H = datetime(2024, 7, 15, 6, 0, tzinfo=timezone.utc)


class FakeSim:
    """An adapter object whose outputs the test sets, and a forecast that counts up."""

    def __init__(self, out):
        self.out = out

    def get_data(self, request):
        return {eid: {a: self.out.get(a) for a in attrs} for eid, attrs in request.items()}

    def forecast(self, attr, start_utc, n, step_s):
        return [start_utc.hour + k * step_s / 3600 for k in range(n)]


class FakeEngine:
    def __init__(self, sim):
        self.entity_sim = {"x": type("S", (), {"obj": sim})()}


def test_missing_values_become_the_last_value_or_zero():
    sim = FakeSim({"a_mw": None, "b_frac": 0.5, "ok_flag": True})
    spec = AgentSpec((), ("x.a_mw", "x.b_frac", "x.ok_flag"), False, (), {})
    observer = Observer(spec)
    engine = FakeEngine(sim)
    assert observer.observe(engine, MONDAY_6H).tolist() == [0.0, 0.5, 1.0]  # nothing yet: 0; a flag: 1
    sim.out.update(a_mw=2.0, b_frac=math.nan)
    assert observer.observe(engine, MONDAY_6H).tolist() == [2.0, 0.5, 1.0]  # NaN: the last finite value
    sim.out.update(a_mw=None)
    assert observer.observe(engine, MONDAY_6H).tolist() == [2.0, 0.5, 1.0]
    observer.reset()
    assert observer.observe(engine, MONDAY_6H).tolist()[:2] == [0.0, 0.0]


def test_outputs_of_several_entities_come_in_the_order_listed():
    """Names listed with entities interleaved: each value sits at its name's place."""
    engine = FakeEngine(FakeSim({"a_mw": 1.0, "c_mw": 3.0}))
    engine.entity_sim["y"] = type("S", (), {"obj": FakeSim({"b_frac": 0.5})})()
    spec = AgentSpec((), ("x.a_mw", "y.b_frac", "x.c_mw"), False, (), {})
    observer = Observer(spec)
    assert observer.names == ["x.a_mw", "y.b_frac", "x.c_mw"]
    assert observer.observe(engine, MONDAY_6H).tolist() == [1.0, 0.5, 3.0]


def test_time_features_and_forecasts_follow_the_documented_order():
    spec = AgentSpec((), ("x.a_mw",), True, (ForecastSpec("x", "a_mw", 2, 1800),), {})
    observer = Observer(spec)
    assert observer.names == ["x.a_mw", "time.hour_sin", "time.hour_cos", "time.dow_sin", "time.dow_cos",
                              "x.a_mw@+0s", "x.a_mw@+1800s"]
    obs = observer.observe(FakeEngine(FakeSim({"a_mw": 1.0})), MONDAY_6H)
    np.testing.assert_allclose(obs, [1.0, 1.0, 0.0, 0.0, 1.0, 6.0, 6.5], atol=1e-7)  # 06:00, Monday
    hour_sin, hour_cos, dow_sin, dow_cos = time_features(MONDAY_6H + timedelta(days=3, hours=12))
    assert (hour_sin, hour_cos) == pytest.approx((-1.0, 0.0), abs=1e-12)  # 18:00
    assert (dow_sin, dow_cos) == pytest.approx((math.sin(6 * math.pi / 7), math.cos(6 * math.pi / 7)))  # Thursday


def test_the_signals_forecast_reads_ahead_and_holds_the_last_value_past_the_data():
    sim = SignalsSim()
    sim.init("p", start_utc="2024-07-15T00:00:00Z", step_s=300, duration_s=3600, seed=0,
             file=str(DATA / "tariffs" / "example_hourly_prices_usd_kwh.csv"),
             columns={"price_usd_mwh": {"column": "price_usd_kwh", "from_unit": "usd/kWh"}})
    sim.create(1, "Series", eid="price")
    start = datetime(2024, 7, 15, 22, 0, tzinfo=timezone.utc)
    values = sim.forecast("price_usd_mwh", start, 4, 3600)
    expected = [sim.series.at(start + timedelta(hours=k))["price_usd_mwh"] for k in range(2)]
    assert values[:2] == expected and values[0] != values[1]
    assert values[2:] == [values[1], values[1]]  # the file ends at 2024-07-16 00:00
    assert sim.forecast("other_mw", start, 2, 3600) is None


def test_the_tariff_forecast_is_its_price_ahead():
    sim = TariffSim()
    sim.init("t", start_utc="2024-07-15T00:00:00Z", step_s=300, duration_s=3600, seed=0,
             **TariffSim.EXAMPLE["sim"])
    start = datetime(2024, 7, 15, 17, 0, tzinfo=timezone.utc)  # 13:00 EDT; on-peak is 14-19 EDT
    assert sim.forecast("price_usd_mwh", start, 3, 3600) == [60.0, 140.0, 140.0]


def test_adapters_give_the_default_bounds_of_their_inputs():
    battery = BatteryParams(e_capacity_mwh=2.0, p_charge_max_mw=0.5, p_discharge_max_mw=0.75)
    assert BatterySim.input_bounds("Battery", battery) == {"p_set_mw": (-0.75, 0.5)}
    cluster = ClusterParams(node="DGX-H100", n_gpus=64,
                            inference=[{"name": "chat", "model": "llama-3.1-8b", "max_batch": 128}])
    bounds = DatacenterSim.input_bounds("Cluster", cluster)
    assert bounds["p_cap_w"] == (200.0, 700.0)  # the H100's settable power limits
    assert bounds["n_batch_max"] == (1.0, 128.0) and bounds["n_batch_max_chat"] == (1.0, 128.0)
    assert bounds["pause_flexible_frac"] == (0.0, 1.0)
    assert bounds["p_limit_mw"] == (0.0, math.inf)  # no rating given: never negative, open above
    mixed = ClusterParams(node="DGX-A100", n_gpus=64, rated_mw=1.5,
                          inference=[{"name": "chat", "model": "llama-3.1-8b", "node": "DGX-H100"}])
    bounds = DatacenterSim.input_bounds("Cluster", mixed)
    assert bounds["p_cap_w"] == (200.0, 400.0)  # a cap every GPU takes: H100 200-700 W and A100 100-400 W
    assert bounds["p_cap_normal_w"] == (100.0, 400.0) and bounds["p_cap_infer_w"] == (200.0, 700.0)
    assert bounds["p_limit_mw"] == (0.0, 1.5)
