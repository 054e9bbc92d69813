"""``ride_through``'s ``p_grid_connected_frac`` / ``q_grid_connected_frac`` (the shares a PERC1 inside
the grid model lets through): the backup carries the ceased share while the draw asked of the grid
stays the demand; with a ``perc1`` of its own as well, validation refuses the scenario (two PERC1 in
series) before any step."""

from __future__ import annotations

import pytest

from cosim.adapters.ride_through import RideThrough, RideThroughParams
from cosim.scenario import ScenarioError, load_scenario

SCENARIO = """
[scenario]
name = "shares"
start = 2024-07-10T23:00:00Z
duration_s = 2
step_s = 0.1
tick_s = 0.1

[sims.rt]
adapter = "ride_through"

[sims.rt2]
adapter = "ride_through"

[entities.upstream]
sim = "rt2"
model = "RideThrough"
curve = "none"

[entities.ups]
sim = "rt"
model = "RideThrough"
curve = "none"
{perc1}

[[connect]]
src = "upstream"
dst = "ups"
attrs = [["p_connected_frac", "p_grid_connected_frac"]]
"""


def test_own_perc1_and_grid_shares_is_one_validation_problem_naming_the_connection(tmp_path):
    path = tmp_path / "shares.toml"
    path.write_text(SCENARIO.format(perc1="perc1 = { fcease_frac = 1.0 }"))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    problems = info.value.problems
    assert len(problems) == 1, problems
    text = str(problems[0])
    assert info.value.file == str(path) and problems[0].path == "connect[0].attrs", text
    for part in ("p_grid_connected_frac", "'ups'", "two PERC1 in series", "drop entities.ups.perc1"):
        assert part in text, (part, text)


def test_grid_shares_without_own_perc1_validate(tmp_path):
    path = tmp_path / "shares.toml"
    path.write_text(SCENARIO.format(perc1=""))
    assert load_scenario(path).entities["ups"].model == "RideThrough"


def test_the_ceased_share_rides_on_the_ups_and_the_draw_asked_stays_the_demand():
    rt = RideThrough(RideThroughParams(curve="none", e_ups_mwh=1.0, genset_start_s=None, recharge_mw=0.0))
    out = rt.step(0.0, 1.0, {"p_load_mw": 10.0, "q_load_mvar": 2.0, "p_grid_connected_frac": 0.4,
                             "q_grid_connected_frac": 0.5})
    assert out["p_mw"] == pytest.approx(10.0) and out["q_mvar"] == pytest.approx(2.0)  # the Load's PERC1 applies them
    assert out["p_lost_mw"] == pytest.approx(6.0) and out["p_ups_mw"] == pytest.approx(6.0)
    assert out["e_ups_mwh"] == pytest.approx(1.0 - 6.0 / 3600.0)  # 6 MW for 1 s
    assert out["p_connected_frac"] == 1.0  # no perc1 of its own
    # all back: nothing on backup, the UPS energy unchanged
    back = rt.step(1.0, 1.0, {"p_load_mw": 10.0, "p_grid_connected_frac": 1.0})
    assert back["p_ups_mw"] == 0.0 and back["e_ups_mwh"] == pytest.approx(out["e_ups_mwh"])


def test_a_p_share_alone_is_enough_and_nan_is_not_connected():
    rt = RideThrough(RideThroughParams(curve="none", e_ups_mwh=1.0))
    only_p = rt.step(0.0, 1.0, {"p_load_mw": 10.0, "q_load_mvar": 2.0, "p_grid_connected_frac": 0.0})
    assert only_p["p_ups_mw"] == pytest.approx(10.0)
    rt = RideThrough(RideThroughParams(curve="none", e_ups_mwh=1.0))
    unknown = rt.step(0.0, 1.0, {"p_load_mw": 10.0, "p_grid_connected_frac": float("nan")})
    assert unknown["p_ups_mw"] == 0.0 and unknown["p_mw"] == pytest.approx(10.0)


FREQUENCY = """
[scenario]
name = "ftrip"
start = 2024-07-10T23:00:00Z
duration_s = 2
step_s = 0.1
tick_s = 0.1

[sims.rt]
adapter = "ride_through"

[sims.poc]
adapter = "poc_events"

[entities.events]
sim = "poc"
model = "PocEvents"

[entities.ups]
sim = "rt"
model = "RideThrough"
curve = "none"
{keys}

[[connect]]
src = "events"
dst = "ups"
attrs = {attrs}
"""


@pytest.mark.parametrize("keys, named", [
    ("perc1 = { f_trip_low_hz = 59.5, t_f_trip_low_s = 0.2 }", "perc1.f_trip_low_hz = 59.5"),
    ("f_max_hz = 61.0", "f_max_hz = 61"),
])
def test_a_frequency_trip_without_f_hz_is_a_warning_naming_the_key(tmp_path, keys, named):
    path = tmp_path / "ftrip.toml"
    path.write_text(FREQUENCY.format(keys=keys, attrs='["vm_sag_pu"]'))
    warnings = [w for w in load_scenario(path).warnings if "f_hz" in w]
    assert len(warnings) == 1 and "ftrip.toml" in warnings[0] and "entities.ups" in warnings[0], warnings
    assert named in warnings[0] and "never act" in warnings[0]
    path.write_text(FREQUENCY.format(keys=keys, attrs='["vm_sag_pu", "f_hz"]'))
    assert not [w for w in load_scenario(path).warnings if "never act" in w]
