"""Run guards (cosim/kpis/guards.py): a controller chattering between its limits, or sitting at its floor.

The chatter case is the droop loop of adapters/controllers/storage_droop.py on its own: stepped
with the grid, ``v_(k+1) = v0 + s·q_k`` and ``q_k = clip(g·(v_ref − v_k), ±q_max)``, which settles
when the loop gain ``s·g < 1`` and swings between ±q_max when it is above 1 (the IEEE 13 case of
issue 31: s ≈ 0.17 pu/Mvar at 675c, g = q_max / 0.045: 0.1 Mvar gives s·g ≈ 0.38, 0.3 Mvar 1.1;
tests/adapters/controllers/test_storage_droop.py runs it against OpenDSS).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.kpis._block import KpiInput
from cosim.kpis.guards import BLOCK, FED_PARAM, chatter_frac, floor_frac, run_warnings, unserved_frac
from cosim.roles import RunRoles

S_PU_PER_MVAR, V0_PU, FULL_ERR_PU = 0.17, 0.94, 0.045


def _droop_q(q_max_mvar: float, n: int = 200) -> np.ndarray:
    g = q_max_mvar / FULL_ERR_PU
    v, out = V0_PU, []
    for _ in range(n):
        q = float(np.clip(g * (1.0 - v), -q_max_mvar, q_max_mvar))
        out.append(q)
        v = V0_PU + S_PU_PER_MVAR * q
    return np.array(out)


@pytest.mark.parametrize(("q_max", "fires"), [(0.05, False), (0.1, False), (0.2, False), (0.3, True), (0.6, True)])
def test_chatter_fires_exactly_when_the_loop_gain_is_above_one(q_max, fires):
    gain = S_PU_PER_MVAR * q_max / FULL_ERR_PU
    assert (gain > 1.0) is fires  # the premise: the loop gain decides
    assert (chatter_frac(_droop_q(q_max)) >= 0.3) is fires


def test_floor_needs_a_knob_that_started_high_and_stayed_low():
    knob = np.r_[np.full(10, 128.0), np.linspace(128, 8, 10), np.full(80, 8.0)]
    assert floor_frac(knob) == pytest.approx(0.81)      # 80 steps at 8 plus the arrival, of 100
    assert floor_frac(np.r_[knob[:50], np.full(50, 128.0)]) == pytest.approx(0.31)  # came back: 31 of 100, below 50 %
    dual = np.r_[np.zeros(10), np.ones(5), np.zeros(85)]  # a diagnostic at 0 most of the time
    assert floor_frac(dual) == 0.0
    assert floor_frac(np.full(100, 5.0)) == 0.0          # never moved
    assert floor_frac(np.r_[np.full(10, 100.0), np.full(90, 50.0)]) == 0.0  # a floor at half: not saturated


def _input(frame: pd.DataFrame, roles: RunRoles) -> KpiInput:
    frame.index = pd.date_range("2024-01-01", periods=len(frame), freq="1s", tz="UTC")
    return KpiInput(ts=frame, dt_h=1 / 3600, step_s=1.0, roles=roles, links={})


def test_only_controllers_are_judged_and_the_warning_reaches_the_run():
    n = 200
    frame = pd.DataFrame({"droop.q_mvar": _droop_q(0.3, n), "ofo.n_batch_max": np.r_[128.0, np.full(n - 1, 8.0)],
                          "site.p_mw": np.r_[10.0, np.zeros(n - 1)], "calm.q_mvar": _droop_q(0.1, n)})
    roles = RunRoles(entities={"droop": "controller", "ofo": "controller", "calm": "controller", "site": "it"})
    kpis = BLOCK.compute(_input(frame, roles))
    assert set(kpis["guards"]) == {"droop.q_mvar", "ofo.n_batch_max"}
    texts = run_warnings(kpis)
    assert any("droop.q_mvar swings between its limits" in t for t in texts)
    assert any("ofo.n_batch_max sits at its floor (8)" in t for t in texts)
    assert BLOCK.compute(_input(frame[["calm.q_mvar"]].copy(), roles)) == {}


def test_only_setpoints_that_feed_another_entity_are_judged_and_sentinels_are_no_range():
    """A dual variable decaying to 0 (constraints met) is a diagnostic, not a knob at its floor; a
    facility limit that starts at the 1e6 MW "no limit" sentinel and then holds 148 MW is not saturated."""
    n = 100
    frame = pd.DataFrame({"ofo.lambda_per_pu": np.r_[5.0, np.zeros(n - 1)],
                          "ofo.n_batch_max": np.r_[128.0, np.full(n - 1, 8.0)],
                          "ffr.p_limit_mw": np.r_[np.full(10, 1e6), np.full(n - 10, 148.6)]})
    roles = RunRoles(entities={"ofo": "controller", "ffr": "controller"})
    inp = _input(frame, roles)
    everything = BLOCK.compute(inp)["guards"]
    assert set(everything) == {"ofo.lambda_per_pu", "ofo.n_batch_max"}  # the sentinel never counts as a range
    fed = KpiInput(ts=inp.ts, dt_h=inp.dt_h, step_s=1.0, roles=roles, links={},
                   params={FED_PARAM: ["ofo.n_batch_max", "ffr.p_limit_mw"]})
    assert set(BLOCK.compute(fed)["guards"]) == {"ofo.n_batch_max"}


@pytest.mark.parametrize(("dt_s", "low_steps", "fires"), [
    (60.0, 1, True),    # one quasi-static minute at a few percent: a collapse
    (1.0, 5, True),     # 5 s at 1 s steps
    (1.0, 4, False),    # 4 s: a long fault's dip, not a collapse
    (0.1, 30, False),   # three 100 ms faults ... and then some: 3 s in all
    (0.1, 60, True),    # 6 s at 0.1 s steps
])
def test_a_grid_below_half_voltage_for_seconds_is_a_collapse_a_faults_dip_is_not(dt_s, low_steps, fires):
    """OpenDSS serves a load below its vminpu as an impedance, so a step can converge at 0.015 pu (a
    review's overloaded feeder, 2026-12-05): ``converged`` and ``ok``, the power not delivered."""
    n = 100
    vm = np.r_[np.full(n - low_steps, 0.97), np.full(low_steps, 0.015)]
    frame = pd.DataFrame({"feeder.vm_min_pu": vm, "feeder.vm_max_pu": np.full(n, 1.0), "site.p_mw": np.ones(n)})
    frame.index = pd.date_range("2024-01-01", periods=n, freq=f"{int(dt_s * 1000)}ms", tz="UTC")
    roles = RunRoles(entities={"feeder": "grid", "site": "it"})
    kpis = BLOCK.compute(KpiInput(ts=frame, dt_h=dt_s / 3600, step_s=dt_s, roles=roles, links={}))
    found = kpis.get("guards", {})
    assert set(found) == ({"feeder.vm_min_pu"} if fires else set())
    if fires:
        assert found["feeder.vm_min_pu"]["collapse_s"] == pytest.approx(low_steps * dt_s)
        (text,) = run_warnings(kpis)
        assert "feeder.vm_min_pu was below 0.5 pu" in text and "collapsed" in text


TINY_FEEDER = """Clear
New Circuit.tiny basekv=12.47 pu=1.0 phases=3 bus1=src
New Line.l1 bus1=src bus2=mid phases=3 length=1 units=km r1=0.1 x1=0.2 normamps=400
New Line.l2 bus1=mid bus2=end phases=3 length=1 units=km r1=0.1 x1=0.2 normamps=400
Set VoltageBases=[12.47]
CalcVoltageBases
"""
COLLAPSE_SCENARIO = """[scenario]
name = "tiny_collapse"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60
engine = "direct"

[sims.grid]
adapter = "grid"
engine = "opendss"
network = "tiny.dss"

[entities.feeder]
sim = "grid"
model = "Grid"

[entities.site]
sim = "grid"
model = "Load"
bus = "end"
p_mw = {p_mw}
"""


@pytest.mark.parametrize(("p_mw", "fires"), [(2000.0, True), (1.0, False)])
def test_an_opendss_feeder_that_converges_collapsed_is_said_even_by_a_quiet_run(tmp_path, capsys, p_mw, fires):
    """2,000 MW on a 12.47 kV feeder: OpenDSS serves the load as an impedance below its vminpu and the
    solve converges at ~0.14 pu every step: the run was ``ok`` with nothing said. ``cosim run --quiet``
    now prints the after-run warning on stderr (and metadata.json keeps it)."""
    from cosim.cli import main

    (tmp_path / "tiny.dss").write_text(TINY_FEEDER)
    path = tmp_path / "s.toml"
    path.write_text(COLLAPSE_SCENARIO.format(p_mw=p_mw))
    assert main(["run", str(path), "--out", str(tmp_path / "runs"), "--quiet", "--no-report"]) == 0
    err = capsys.readouterr().err
    assert ("warning: after the run: feeder.vm_min_pu was below 0.5 pu for 600 s" in err) is fires, err


def test_unserved_energy_is_the_share_the_grid_did_not_serve():
    asked = np.array([2.0, 2.0, -1.0, 0.0, np.nan])
    assert unserved_frac(asked, np.array([2.0, 1.0, -0.5, 0.0, 1.0])) == pytest.approx(1.5 / 5.0)
    assert unserved_frac(asked, asked) == 0.0
    assert unserved_frac(np.zeros(3), np.zeros(3)) == 0.0


@pytest.mark.parametrize(("p_mw", "vmin_pu", "fires"), [(4.0, None, True), (4.0, 0.5, False), (1.0, None, False)])
def test_an_opendss_element_below_its_vmin_pu_is_said_to_be_underserved(tmp_path, p_mw, vmin_pu, fires):
    """4 MW at IEEE 13's bus 675: a phase there sags below OpenDSS's default vminpu (0.95), so that
    phase's share is served as an impedance and the element draws ~3.9 MW while its p_mw says 4 (the
    run said ``ok`` and nothing else; 6 MW at constant power no longer solves). With vmin_pu = 0.5 it
    is constant power and served whole; 1 MW stays in the constant-power range."""
    import cosim

    text = COLLAPSE_SCENARIO.format(p_mw=p_mw).replace('network = "tiny.dss"', 'network = "ieee13"').replace(
        'bus = "end"', 'bus = "675"')
    if vmin_pu is not None:
        text += f"vmin_pu = {vmin_pu}\n"
    path = tmp_path / "s.toml"
    path.write_text(text)
    result = cosim.run(path, out_dir=tmp_path / "runs")
    assert result.ok, result.reason
    ts = result.timeseries()
    if not fires:  # served whole (to the solver's tolerance; a phase above vmaxpu 1.05 draws a little more)
        np.testing.assert_allclose(ts["site.p_served_mw"], ts["site.p_mw"], rtol=0.01)
    warned = [w for w in result.metadata["warnings"] if "site was served" in w]
    assert bool(warned) is fires, result.metadata["warnings"]
    if fires:
        frac = result.kpis["guards"]["site.p_served_mw"]["unserved_frac"]
        assert frac == pytest.approx(1.0 - ts["site.p_served_mw"].mean() / p_mw, rel=1e-6)
        assert 0.01 < frac < 0.1
