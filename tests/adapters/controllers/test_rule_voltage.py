"""Rule-based voltage controller (OpenG2G's ``RuleBasedController`` rule): the rule by hand,
then closed loop on IEEE 13 with the campus of ``ieee13_voltage_aware.toml`` for 2 minutes.

The rule (gpu2grid/openg2g ``openg2g/controller/rule_based.py``): x = log2 batch moves by
``-step * (v_low - v_min)`` on an under-voltage beyond the deadband, ``+step * (v_max - v_high)``
on an over-voltage, clamped to [log2 b_min, log2 b_max].
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.rule_voltage import RuleController, RuleVoltageParams

ROOT = Path(__file__).resolve().parents[3]


def test_rule_steps_log2_batch_by_hand():
    ctl = RuleController(RuleVoltageParams(step_log2_per_pu=100.0, deadband_pu=0.001, n_batch_min=8, n_batch_max=256))
    assert ctl.x == 8.0  # starts at n_batch_max = 2**8
    assert ctl.update(0, 0.94, 1.0) == pytest.approx(8.0 - 100.0 * 0.01)  # 0.01 pu under: -1 log2
    assert ctl.knobs()["n_batch_max"] == 128.0
    assert ctl.update(1, 0.9495, 1.0) == pytest.approx(7.0)  # 0.0005 pu under: inside the deadband
    assert ctl.update(2, 0.96, 1.06) == pytest.approx(8.0)  # 0.01 pu over: +1 log2
    assert ctl.update(3, 0.96, 1.07) == 8.0  # clamped at the ceiling ...
    assert ctl.knobs()["exhausted_frac"] == 1.0  # ... and exhausted there
    assert ctl.update(4, 0.80, 1.0) == 3.0  # 0.15 pu under: to the floor, log2 8
    assert ctl.knobs() == {"n_batch_max": 8.0, "p_cap_w": 200.0, "level_frac": 0.0, "n_changes": 3,
                           "exhausted_frac": 0.0}  # exhaustion is judged before the step
    ctl.update(5, 0.80, 1.0)
    assert ctl.knobs()["exhausted_frac"] == 1.0
    ctl.update(6, 0.9495, 1.0)  # at the floor inside the deadband: still exhausted (nothing left to cut)
    assert ctl.knobs()["exhausted_frac"] == 1.0
    assert ctl.update(7, math.nan, math.nan) == 3.0  # no measurement: hold


def test_release_hold_time_and_latency_guard():
    p = RuleVoltageParams(step_log2_per_pu=100.0, n_batch_min=8, n_batch_max=256, release_above_pu=0.96,
                          release_log2_per_s=0.5, hold_s=10.0, itl_deadline_ms=100.0)
    ctl = RuleController(p)
    ctl.update(0, 0.94, 1.0)
    assert ctl.x == pytest.approx(7.0)
    assert ctl.update(5, 0.93, 1.0) == pytest.approx(7.0)  # held: 5 s < hold_s
    assert ctl.update(10, 0.97, 1.0) == pytest.approx(7.5)  # released after the hold: vm_min above 0.96
    assert ctl.update(25, 0.955, 1.0) == pytest.approx(7.5)  # in band but below release_above_pu: no move
    assert ctl.update(30, 0.97, 1.0, itl_p99_ms=120.0) == pytest.approx(7.5)  # the guard refuses an increase
    assert ctl.update(31, 0.97, 1.0495, itl_p99_ms=50.0) == pytest.approx(7.5)  # vm_max within deadband of v_high: no release
    off = RuleController(RuleVoltageParams(enabled=False, n_batch_max=256))
    assert off.update(0, 0.80, 1.0) == 8.0


def test_bad_params_are_refused():
    with pytest.raises(ValidationError, match="n_batch_initial"):
        RuleVoltageParams(n_batch_min=8, n_batch_max=64, n_batch_initial=128)
    with pytest.raises(ValidationError, match="v_low_pu"):
        RuleVoltageParams(v_low_pu=1.1)
    for release in (0.94, 1.05):  # below the band it would raise the batch in an under-voltage
        with pytest.raises(ValidationError, match=r"release_above_pu = .* is outside \[v_low_pu, v_high_pu\)"):
            RuleVoltageParams(release_above_pu=release)
    assert RuleVoltageParams(release_above_pu=0.95).release_above_pu == 0.95


CLOSED_LOOP = """
[scenario]
name = "rule_ieee13"
start = 2023-11-16T18:00:00Z
duration_s = 120
step_s = 1
seed = 13

[sims.dc]
adapter = "datacenter"
[sims.grid]
adapter = "grid"
engine = "opendss"
network = "ieee13"
regulators = "auto"
control_mode = "time"
[sims.ctl]
adapter = "rule_voltage"

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 0
training = { n_jobs = 0 }
inference = [{ name = "chat", model = "llama-3.1-70b", replicas = 390, max_batch = 256, arrivals = "azure_conv", rate_req_s = 3900.0, diurnal_amp_frac = 0.0 }]
[entities.pcc]
sim = "grid"
model = "Load"
bus = "671"
[entities.feeder]
sim = "grid"
model = "Grid"
[entities.rule]
sim = "ctl"
model = "RuleVoltage"
n_batch_min = 8
n_batch_max = 256
step_log2_per_pu = 50.0
deadband_pu = 0.0

[[connect]]
src = "campus"
dst = "pcc"
attrs = ["p_mw", "q_mvar"]
[[connect]]
src = "feeder"
dst = "rule"
attrs = [["bus_671_c_vm_pu", "vm_min_pu"]]
[[connect]]
src = "rule"
dst = "campus"
attrs = ["n_batch_max", "p_cap_w"]
time_shifted = true
initial_data = { n_batch_max = 256.0, p_cap_w = 700.0 }

[record]
include = ["campus.p_mw", "feeder.bus_671_c_vm_pu", "rule.*"]
"""


def test_closed_loop_on_ieee13_lowers_the_load_until_the_bus_is_in_band(tmp_path):
    """671c sits under 0.95 pu all the time in the baseline (as in ieee13_voltage_aware's): the rule
    must step the batch down, the campus's power fall, and 671c's under-voltage integral halve."""
    path = tmp_path / "rule.toml"
    path.write_text(CLOSED_LOOP)
    run = cosim.run(path, out_dir=tmp_path / "on")
    base = cosim.run(path, out_dir=tmp_path / "off", overrides={"entities.rule.enabled": False})
    assert run.ok and base.ok, (run.reason, base.reason)
    ts, ts0 = run.timeseries(), base.timeseries()
    v, v0 = ts["feeder.bus_671_c_vm_pu"], ts0["feeder.bus_671_c_vm_pu"]
    assert (v0 < 0.95).all()  # the baseline is out of band the whole time
    assert ts["rule.n_batch_max"].iloc[-1] < 256
    assert ts["campus.p_mw"].iloc[-60:].mean() < ts0["campus.p_mw"].iloc[-60:].mean()
    # proportional to the violation, the rule approaches the limit from below (OpenG2G's rule has
    # no margin): the under-voltage integral falls and the last 30 s sit within 0.5 mpu of 0.95
    assert (0.95 - v).clip(lower=0).sum() < 0.5 * (0.95 - v0).clip(lower=0).sum()
    assert (v.iloc[-30:] > 0.9495).all() and (v0.iloc[-30:] < 0.9475).all()
