"""Online feedback optimisation (adapters/controllers/ofo/): the sensitivities against an
analytic two-bus feeder and against the grid engine's own solves, the primal-dual iteration's
invariants on a linear toy plant, and ``scenarios/ieee13_ofo.toml`` against no control.

Sources: the iteration is Dall'Anese & Simonetto, "Optimal power flow pursuit", IEEE Trans.
Smart Grid 9(2):942-952, 2018 (regularised primal-dual, projected duals); the voltage duals per
bus-phase are OpenG2G's (GPU-to-Grid, arXiv:2602.05116, Eqs. 5-6). The two-bus sensitivity is
the linearised branch flow (Baran & Wu, IEEE Trans. Power Delivery 4(2), 1989: LinDistFlow
v_2² = v_1² - 2 (r P + x Q), so ∂v_2/∂P = -r and ∂v_2/∂Q = -x in pu at v ≈ 1).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.ofo import FeederSensitivity, FleetControl, OFOController, OFOParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_grid_opendss import make_sim, step  # noqa: E402

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "ieee13_ofo.toml"
KV_LL = 12.47
R_OHM, X_OHM = 1.2, 2.5
TWO_BUS = f"""Clear
New Circuit.twobus basekv={KV_LL} pu=1.0 phases=3 bus1=src MVAsc3=1000000 MVAsc1=1000000
New Line.feeder bus1=src bus2=b2 phases=3 r1={R_OHM} x1={X_OHM} r0={R_OHM} x0={X_OHM} c1=0 c0=0 length=1 units=none
Set VoltageBases=[{KV_LL}]
CalcVoltageBases
"""


@pytest.fixture()
def two_bus(tmp_path) -> Path:
    path = tmp_path / "twobus.dss"
    path.write_text(TWO_BUS)
    return path


def test_two_bus_sensitivity_is_the_branch_impedance(two_bus):
    """On 1 MVA base Z_base = kV²/1 = 155.5 Ω: ∂v/∂P = -R/Z_base, ∂v/∂Q = -X/Z_base per MW/Mvar
    (LinDistFlow), to 2 % at a light 0.2 MW / 0.05 Mvar operating point (v ≈ 0.998)."""
    p = OFOParams(network=str(two_bus), dc_bus="b2", bat_bus="b2", p_bat_max_mw=0.1, s_bat_max_mva=0.1)
    model = FeederSensitivity(p)
    cols = model.compute(0.2, 0.05, 0.0, 0.0, {})
    names = model.flow.phase_attrs
    assert model.flow.monitored_phase_attrs() == ["bus_b2_a_vm_pu", "bus_b2_b_vm_pu", "bus_b2_c_vm_pu"]
    b2 = [names.index(f"bus_b2_{ph}_vm_pu") for ph in "abc"]
    z_base = KV_LL**2
    assert cols["bat_p"][b2] == pytest.approx(-R_OHM / z_base, rel=0.02)
    assert cols["bat_q"][b2] == pytest.approx(-X_OHM / z_base, rel=0.02)
    # the datacenter's column moves P and Q together at its measured power factor (tanφ = 0.25)
    assert cols["dc"][b2] == pytest.approx((-R_OHM - 0.25 * X_OHM) / z_base, rel=0.02)
    src = names.index("bus_src_a_vm_pu")
    assert abs(cols["dc"][src]) < 1e-6  # the stiff source does not move


def test_ieee13_sensitivity_predicts_the_engines_own_solves():
    """J from the controller's feeder copy predicts what the grid adapter (the engine) solves
    for 0.1 MW more at 671 (same taps, fixed), on every monitored bus-phase, to 5 % of the
    change: the model is the engine's, and the flow is nearly linear over 0.1 MW. The engine's
    load is constant power here (vmin_pu = 0.5), as the model's datacenter is."""
    taps = {"reg1a": 10, "reg1b": 8, "reg1c": 11}
    p_mw, q_mvar = 1.5, 0.5
    base = dict(step(make_sim(regulators="fixed", tap_positions=taps,
                              entities=[("dc", "Load", {"bus": "671", "p_mw": p_mw, "q_mvar": q_mvar,
                                                        "vmin_pu": 0.5})])))
    more = dict(step(make_sim(regulators="fixed", tap_positions=taps,
                              entities=[("dc", "Load", {"bus": "671", "p_mw": p_mw + 0.1,
                                                        "q_mvar": q_mvar + 0.1 * q_mvar / p_mw,
                                                        "vmin_pu": 0.5})])))
    model = FeederSensitivity(OFOParams(network="ieee13", dc_bus="671"))
    taps_pu = {reg: base[f"reg_{reg}_tap_pu"] for reg in taps}
    cols = model.compute(p_mw, q_mvar, 0.0, 0.0, taps_pu)
    names = model.flow.phase_attrs
    monitored = model.flow.monitored_phase_attrs()
    predicted = np.array([0.1 * cols["dc"][names.index(n)] for n in monitored])
    solved = np.array([more[n] - base[n] for n in monitored])
    assert np.all(solved < 0) and solved.min() < -0.002  # more load lowers every phase here
    np.testing.assert_allclose(predicted, solved, rtol=0.05, atol=2e-5)


def test_sensitivities_are_recomputed_after_a_tap_change():
    """The controller re-solves its feeder copy when a measured tap moves (a regulator step
    changes the operating point) and not otherwise; higher taps under the same load leave the
    feeder stiffer at 671c in the model (the regulator ratio scales the downstream voltages)."""
    params = OFOParams(network="ieee13", dc_bus="671")
    ctl = OFOController(params, FeederSensitivity(params))
    model = ctl.model
    measured = dict.fromkeys(model.flow.monitored_phase_attrs(), 0.97)
    site = {"p_dc_mw": 1.5, "q_dc_mvar": 0.5}
    taps = {"reg1a": 1.0625, "reg1b": 1.05, "reg1c": 1.06875}
    ctl.update(0, measured, site, taps)
    ctl.update(1, measured, site, taps)
    assert model.n_updates == 1
    first = ctl.jac.copy()
    ctl.update(2, measured, site, {**taps, "reg1c": 1.075})
    assert model.n_updates == 2 and not np.allclose(ctl.jac, first)
    assert ctl.rows == model.flow.monitored_phase_attrs()
    assert (ctl.jac[:, 0] < 0).all()  # more campus power lowers every monitored phase


def toy(params: OFOParams, v0: float, slope_pu: float, steps: int = 300) -> tuple[list[float], OFOController]:
    """One bus-phase whose voltage is ``v0 - slope_pu * u`` (u = allowance, measured each step);
    returns the violation below v_low per step and the controller."""
    ctl = OFOController(params)
    ctl.set_sensitivity(["bus_x_a_vm_pu"], np.array([[-slope_pu]]))
    below = []
    for t in range(steps):
        v = v0 - slope_pu * ctl.u
        below.append(max(params.v_low_pu - v, 0.0))
        ctl.update(t, {"bus_x_a_vm_pu": v})
        assert (ctl.lam >= 0).all() and (ctl.lam_bar >= 0).all()  # projected duals
        assert params.u_min_frac <= ctl.u <= 1.0
    return below, ctl


def test_duals_stay_non_negative_and_vanish_in_band():
    """In band the duals go to zero and the allowance back to 1; below band they rise."""
    params = OFOParams(dc_bus="x", margin_pu=0.0)
    below, ctl = toy(params, v0=1.00, slope_pu=0.01)  # v = 0.99 at u = 1: in band
    assert ctl.u == 1.0 and ctl.lam.sum() == 0 and sum(below) == 0
    below, ctl = toy(params, v0=0.955, slope_pu=0.02)  # 0.935 at u = 1: needs u <= 0.25
    assert below[0] > 0 and below[-1] == pytest.approx(0.0, abs=2e-4)
    assert 0.2 < ctl.u < 0.3 and ctl.lam[0] > 0


def test_more_authority_means_less_violation_and_bounded_duals():
    """Stronger control (a lower allowance floor u_min_frac: more of the load may be shed) gives
    strictly less violation when the floor binds; with too little authority the dual decay
    bounds the dual (λ <= gap / ε_d, the regularised dual's fixed point) instead of letting it grow."""
    totals = []
    for u_min in (0.9, 0.7, 0.5, 0.3, 0.0):  # u <= 0.25 meets the band
        params = OFOParams(dc_bus="x", u_min_frac=u_min, margin_pu=0.0)
        below, ctl = toy(params, v0=0.955, slope_pu=0.02)
        totals.append(sum(below))
        gap_pu = 0.95 - (0.955 - 0.02 * u_min)  # left below the band at the floor
        if gap_pu > 0:
            assert ctl.u == u_min and 0 < ctl.lam[0] <= gap_pu / params.dual_decay_pu
    assert all(a > b for a, b in zip(totals, totals[1:]))
    assert totals[-1] < 0.05 * totals[0]


def test_battery_stays_inside_its_inverter_circle_and_baseline_holds_rest():
    params = OFOParams(dc_bus="x", bat_bus="y", p_bat_max_mw=0.2, s_bat_max_mva=0.25, primal_step_frac=5.0)
    ctl = OFOController(params)
    ctl.set_sensitivity(["bus_x_a_vm_pu"], np.array([[-0.01, -0.05, -0.08]]))
    for t in range(50):
        ctl.update(t, {"bus_x_a_vm_pu": 0.90})
        out = ctl.outputs()
        assert math.hypot(out["p_bat_set_mw"], out["q_bat_mvar"]) <= 0.25 + 1e-12
        assert abs(out["p_bat_set_mw"]) <= 0.2 + 1e-12
    assert out["q_bat_mvar"] < 0 and out["p_bat_set_mw"] < 0  # injects Mvar and discharges to lift v
    off = OFOController(OFOParams(dc_bus="x", enabled=False))
    off.update(0, {"bus_x_a_vm_pu": 0.90})
    assert off.outputs()["allowance_frac"] == 1.0


def test_bad_params_are_refused():
    with pytest.raises(ValidationError, match="p_bat_max_mw"):
        OFOParams(dc_bus="671", bat_bus="675")
    with pytest.raises(ValidationError, match="s_bat_max_mva"):
        OFOParams(dc_bus="671", bat_bus="675", p_bat_max_mw=0.5, s_bat_max_mva=0.3)


@pytest.fixture(scope="module")
def scenario_runs(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("ieee13_ofo")
    variants = {"ofo": {}, "baseline": {"entities.ofo.enabled": False},
                "dc_only": {"entities.ofo.battery_control": False}}
    found = {}
    for name, overrides in variants.items():
        result = cosim.run(SCENARIO, out_dir=out, overrides={"scenario.duration_s": 300, **overrides})
        assert result.ok, (name, result.reason)
        found[name] = result
    return found


def test_ieee13_ofo_removes_the_all_bus_violation(scenario_runs):
    """First 5 min of the scenario, from kpis.json: without control some bus-phase is below
    0.95 pu every second; OFO (campus knobs + the phase-c inverter at 675) leaves at most the
    first seconds, before its setpoints act; the campus alone (balanced at 671) cannot, since
    lifting phase c of 611/675/684 pushes phase b of 671/675/692 over 1.05 pu, but it cuts the
    integral."""
    feeder = {n: r.kpis["feeder"] for n, r in scenario_runs.items()}
    assert feeder["baseline"]["allbus_violation_s"] == 300
    assert feeder["ofo"]["allbus_violation_s"] <= 5
    assert feeder["ofo"]["allbus_violation_pu_s"] < 0.1 * feeder["baseline"]["allbus_violation_pu_s"]
    assert feeder["dc_only"]["allbus_violation_pu_s"] < 0.7 * feeder["baseline"]["allbus_violation_pu_s"]
    ts = scenario_runs["ofo"].timeseries()
    assert (ts["ofo.lambda_under_sum_per_pu"] >= 0).all() and (ts["ofo.lambda_over_sum_per_pu"] >= 0).all()
    assert (ts["ofo.q_bat_mvar"].iloc[5:] < 0).all()  # the inverter injects reactive power on phase c
    assert ts["ofo.n_sensitivity_updates"].iloc[-1] >= 1


def test_unknown_feeder_is_a_validation_message():
    """A typo in ``network`` is refused when the params are read, naming the known feeders (it used to end
    in an internal error when the feeder copy was built)."""
    with pytest.raises(ValidationError, match=r"'ieee31' is not an OpenDSS feeder.*ieee13"):
        OFOParams.model_validate({"network": "ieee31", "dc_bus": "671"})


def test_battery_ratings_without_a_bus_are_refused():
    """Ratings with no ``bat_bus`` would be ignored (no battery to steer) and the run said ok."""
    with pytest.raises(ValidationError, match="bat_bus is not"):
        OFOParams.model_validate({"dc_bus": "671", "p_bat_max_mw": 0.5})


@pytest.mark.parametrize("key", ["dc_bus", "bat_bus"])
def test_an_unknown_bus_is_refused_at_validation_naming_the_key(key):
    """A typo in the datacenter's or the battery's bus is one validation message naming the key, the
    value and the feeder's buses (it used to pass validation and fail at the run's start), without
    the whole entity table as its value."""
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "ieee13_ofo.toml"
    with pytest.raises(cosim.ScenarioError) as err:
        cosim.load_scenario(scenario, {f"entities.ofo.{key}": "9999"})
    text = str(err.value)
    assert f"entities.ofo: {key} = '9999': unknown bus '9999' in ieee13" in text and "{'network'" not in text


@pytest.mark.parametrize("extra, fragment", [({"gpu": "A100-80GB-SXM"}, "no ML.ENERGY inference data"),
                                             ({"n_gpus_per_replica": 3}, "n_gpus_per_replica = 3")])
def test_a_fleet_without_measured_curves_is_refused_at_validation(extra, fragment):
    """A fleet on a GPU ML.ENERGY did not measure, or on a GPU count it did not measure, is a
    validation error naming the fleet (the first used to fail only when the controller was built)."""
    with pytest.raises(ValidationError, match=rf"fleet 'chat': .*{fragment}"):
        FleetControl(name="chat", model="llama-3.1-8b", n_replicas=4, itl_deadline_ms=80.0, **extra)
