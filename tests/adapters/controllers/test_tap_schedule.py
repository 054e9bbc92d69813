"""Tap schedule (adapters/controllers/tap_schedule.py) and the grid's tap input: entries fire in
time order and the later wins (OpenG2G's ``TapScheduleController``); a held tap shows in the
grid's outputs as that position and its ratio 1 + steps · 0.00625 (IEEE 13's regulators, 32
steps over ±10 %); the OFO controller re-solves its sensitivities when the schedule moves a tap.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

import cosim
from cosim.adapters.controllers.tap_schedule import Entry, TapScheduleParams, TapScheduleSim, taps_at

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_grid_opendss import make_sim, step  # noqa: E402

OFO_SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "ieee13_ofo.toml"


def test_entries_fire_in_time_order_and_the_later_wins():
    entries = [Entry(at_s=3300, taps={"reg1a": 10, "reg1c": 10}), Entry(at_s=1500, taps={"reg1a": 16, "reg1c": 15})]
    assert taps_at(entries, 0) == ({}, 0)
    assert taps_at(entries, 1500) == ({"reg1a": 16, "reg1c": 15}, 1)
    assert taps_at(entries, 3599) == ({"reg1a": 10, "reg1c": 10}, 2)
    with pytest.raises(ValueError, match="±16"):
        TapScheduleParams(entries=[{"at_s": 0, "taps": {"reg1a": 40}}])
    problems = TapScheduleSim.check_entity("TapSchedule", TapScheduleParams(entries=entries), None,
                                           TapScheduleSim.SimParams(regulators=["reg1a"]))
    assert problems and "reg1c" in problems[0]


def test_grid_holds_a_tap_from_its_input_and_hands_it_back():
    """regulators = "auto" (static): the RegControls pick their taps; the input holds reg1a at
    +16 (ratio 1.1), NaN gives it back to its RegControl, which steps down until its
    compensated voltage is inside its band (from above it stops at 11, from below at 9: the
    band's hysteresis)."""
    sim = make_sim(regulators="auto")
    auto = dict(step(sim))
    held = dict(step(sim, 1, {"grid": {"reg_reg1a_tap_set_count": 16.0}}))
    assert held["reg_reg1a_tap_count"] == 16 != auto["reg_reg1a_tap_count"]
    assert held["reg_reg1a_tap_pu"] == pytest.approx(1.0 + 16 * 0.00625)
    assert held["bus_rg60_a_vm_pu"] > auto["bus_rg60_a_vm_pu"] + 0.01
    back = dict(step(sim, 2, {"grid": {"reg_reg1a_tap_set_count": math.nan}}))
    assert auto["reg_reg1a_tap_count"] <= back["reg_reg1a_tap_count"] < 16


def test_ofo_recomputes_its_sensitivities_when_the_schedule_moves_the_taps(tmp_path):
    """ieee13_ofo.toml with OpenG2G's IEEE 13 tap moves (+16/+6/+17, reg1c held at +16: the regulator's
    MaxTap) brought forward to 60 s,
    2 minutes: the taps follow the schedule and OFO re-solves its feeder copy once more."""
    text = OFO_SCENARIO.read_text().replace("[sims.ctl]", """[sims.taps]
adapter = "tap_schedule"
regulators = ["reg1a", "reg1b", "reg1c"]

[entities.schedule]
sim = "taps"
model = "TapSchedule"
entries = [{ at_s = 60, taps = { reg1a = 16, reg1b = 6, reg1c = 16 } }]

[[connect]]
src = "schedule"
dst = "feeder"
attrs = ["reg_reg1a_tap_set_count", "reg_reg1b_tap_set_count", "reg_reg1c_tap_set_count"]

[sims.ctl]""", 1)
    path = tmp_path / "ieee13_ofo_taps.toml"
    path.write_text(text)
    result = cosim.run(path, out_dir=tmp_path, overrides={"scenario.duration_s": 120})
    assert result.ok, result.reason
    ts = result.timeseries()
    assert (ts["feeder.reg_reg1a_tap_count"].iloc[61:] == 16).all() and (ts["feeder.reg_reg1c_tap_count"].iloc[61:] == 16).all()
    updates = ts["ofo.n_sensitivity_updates"]
    assert updates.iloc[50] == 1 and updates.iloc[-1] == 2


def test_a_tap_past_the_regulators_range_is_refused():
    """IEEE 13's regulators span 0.9-1.1 pu in 32 steps (±16). OpenDSS would set +17 (1.10625) or +40
    (1.25) without a word and report the voltage it gives; the grid refuses a held count outside the
    regulator's own MinTap/MaxTap, naming the input and the range, and a schedule refuses one past ±16."""
    sim = make_sim(regulators="auto")
    step(sim)
    for count in (17.0, 40.0, -17.0):
        with pytest.raises(ValueError, match=r"reg_reg1a_tap_set_count = -?\d+: regulator .* from -16 to 16 steps"):
            step(sim, 1, {"grid": {"reg_reg1a_tap_set_count": count}})
    with pytest.raises(ValueError, match=r"tap reg1c = 17 is outside a standard regulator's ±16 steps"):
        TapScheduleParams.model_validate({"entries": [{"at_s": 0, "taps": {"reg1c": 17}}]})
    assert TapScheduleParams.model_validate({"entries": [{"at_s": 0, "taps": {"reg1c": 16}}]})
