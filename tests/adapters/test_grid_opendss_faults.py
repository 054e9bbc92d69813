"""Faults solved in an OpenDSS feeder (adapters/grid/opendss_faults.py): every kind at a named bus,
the per-phase and positive-sequence voltages an element sees, the fault's window, and the
validation of a fault at an unknown bus or cleared faster than the step."""

from __future__ import annotations

import cmath
import math

import pytest

from cosim.adapters.grid.opendss_faults import A_OP, OpenDssFault, fault_command, phase_outputs
from cosim.adapters.grid import GridSim, SimParams
from cosim.sdk import ScenarioContext, parse_utc

START = "2024-07-15T12:00:00Z"


def make_sim(faults, bus="671", phases="abc", **params) -> GridSim:
    """IEEE 13 on the OpenDSS engine at 0.1 s steps, a 1 MW campus at ``bus``."""
    sim = GridSim()
    sim.init("grid", 0.1, start_utc=START, step_s=0.1, duration_s=60, seed=1, network="ieee13", engine="opendss",
             faults=faults, **params)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="campus", bus=bus, p_mw=1.0, phases=phases)
    return sim


def run(sim: GridSim, n: int) -> list[dict]:
    rows = []
    for k in range(n):
        sim.step(k, {}, 10**9)
        rows.append({**sim.out["campus"], "converged": sim.out["grid"]["converged"],
                     **{a: v for a, v in sim.out["grid"].items() if a.endswith("_tap_count")}})
    return rows


FAULTED = {"slg": "a", "ll": "ab", "llg": "ab", "3ph": "abc"}


@pytest.mark.parametrize("control_mode", ["static", "time"])
@pytest.mark.parametrize("kind", sorted(FAULTED))
def test_every_fault_kind_at_its_bus(kind, control_mode):
    """A bolted fault (0.001 ohm) at bus 671 seen by a campus at 671, steps 0.1 s, fault from 0.2 s for 0.2 s.

    Checks (Anderson, *Analysis of Faulted Power Systems*, 1973, ch. 3, the sequence networks at
    the fault point): a phase faulted to ground is near 0 V (< 3 % of nominal); in a line-to-line
    fault the two faulted phases are equal in magnitude and the positive-sequence voltage is
    half its pre-fault value (V1 = V2 = E/2 at the fault point, Z1 = Z2) within 10 % (loads
    carry current through the source impedance); every solve converges; after the clearing the
    voltages return to their pre-fault values (within OpenDSS's power-flow tolerance, 1e-4 pu)
    and the regulators have not moved.
    """
    sim = make_sim([{"bus": "671", "kind": kind, "r_ohm": 0.001, "t_s": 0.2, "clearing_s": 0.2}],
                   control_mode=control_mode)
    rows = run(sim, 6)
    before, during, after = rows[1], rows[2:4], rows[4:]
    assert all(r["converged"] for r in rows)
    for r in during:
        mags = {p: r[f"v{p}_pu"] for p in "abc"}
        if kind != "ll":
            assert all(mags[p] < 0.03 for p in FAULTED[kind])
        else:
            assert mags["a"] == pytest.approx(mags["b"], rel=0.05)
            assert r["v1_pu"] == pytest.approx(before["v1_pu"] / 2, rel=0.10)
        assert r["v_worst_pu"] == pytest.approx(min(mags.values()), abs=1e-12)
        assert r["v_worst_pu"] <= r["v1_pu"] + 1e-12
    for r in after:
        for key in ("va_pu", "vb_pu", "vc_pu", "v1_pu"):
            assert r[key] == pytest.approx(before[key], abs=1e-4)  # OpenDSS convergence tolerance
        assert {k: v for k, v in r.items() if k.endswith("_tap_count")} == \
            {k: v for k, v in before.items() if k.endswith("_tap_count")}


@pytest.mark.parametrize("t_s, clearing_s, faulted_steps", [(0.2, 0.1, [2]), (0.2, 0.3, [2, 3, 4]),
                                                           (0.0, 0.1, [0]), (0.25, 0.1, [3])])
def test_fault_holds_the_steps_that_start_inside_it(t_s, clearing_s, faulted_steps):
    """A step at t is faulted when t_s <= t < t_s + clearing_s (the step's start, as the recorder samples)."""
    sim = make_sim([{"bus": "671", "kind": "3ph", "t_s": t_s, "clearing_s": clearing_s}])
    rows = run(sim, 6)
    assert [k for k, r in enumerate(rows) if r["v1_pu"] < 0.5] == faulted_steps


def test_slg_fault_separates_the_two_voltage_definitions():
    """SLG on phase a at 671, campus at 675: phase a near 0 while the positive sequence stays above
    0.7 pu (the healthy phases swell): worst phase and positive sequence tell different stories."""
    sim = make_sim([{"bus": "671", "kind": "slg", "phases": "a", "r_ohm": 0.01, "t_s": 0.1, "clearing_s": 0.1}],
                   bus="675")
    faulted = run(sim, 3)[1]
    assert faulted["va_pu"] < 0.05 and faulted["vb_pu"] > 1.1 and faulted["vc_pu"] > 1.1
    assert 0.7 < faulted["v1_pu"] < 0.9


def test_a_single_phase_element_judges_its_own_phase():
    """A load on phase a of 671 during an SLG fault on phase b: the bus's phase b collapses, but the
    element's worst phase is its own (a), and its v1 is the bus's positive sequence."""
    sim = make_sim([{"bus": "671", "kind": "slg", "phases": "b", "r_ohm": 0.001, "t_s": 0.1, "clearing_s": 0.1}],
                   phases="a")
    faulted = run(sim, 2)[1]
    assert faulted["vb_pu"] < 0.03 and faulted["v_worst_pu"] == faulted["va_pu"] > 0.5
    assert faulted["vm_phase_min_pu"] == pytest.approx(faulted["va_pu"])


def test_symmetrical_components_of_known_phasor_sets():
    """v1 of a balanced set is its magnitude; with phase a at 0 it is 2/3 of it (Fortescue:
    V1 = (Va + a Vb + a² Vc) / 3); the worst phase is the one farthest from 1 pu."""
    balanced = {"a": 1.0, "b": cmath.exp(-2j * math.pi / 3), "c": cmath.exp(2j * math.pi / 3)}
    out = phase_outputs({p: 0.97 * v for p, v in balanced.items()}, "abc")
    assert out["v1_pu"] == pytest.approx(0.97) and out["v_worst_pu"] == pytest.approx(0.97)
    out = phase_outputs({**balanced, "a": 0j}, "abc")
    assert out["v1_pu"] == pytest.approx(2 / 3) and out["v_worst_pu"] == 0.0
    assert out["vb_pu"] == pytest.approx(1.0)
    swell = phase_outputs({"a": 1.02 + 0j, "b": 1.2 * balanced["b"], "c": balanced["c"]}, "abc")
    assert swell["v_worst_pu"] == pytest.approx(1.2)
    single = phase_outputs({"c": 0.95 * A_OP}, "c")
    assert math.isnan(single["va_pu"]) and single["v1_pu"] == pytest.approx(0.95)


@pytest.mark.parametrize("kind, phases, expected", [
    ("slg", "b", "phases=1 bus1=671.2 bus2=671.0"),
    ("ll", "bc", "phases=1 bus1=671.2 bus2=671.3"),
    ("llg", "ca", "phases=2 bus1=671.1.3 bus2=671.0.0"),
    ("3ph", None, "phases=3 bus1=671.1.2.3 bus2=671.0.0.0"),
])
def test_fault_commands(kind, phases, expected):
    fault = OpenDssFault(bus="671", kind=kind, phases=phases, r_ohm=0.5, t_s=1.0, clearing_s=0.1)
    assert expected in fault_command(fault, "f", "671") and "r=0.5 enabled=no" in fault_command(fault, "f", "671")


def _check(step_s=0.1, **fault):
    params = SimParams.model_validate({"network": "ieee13", "engine": "opendss",
                                       "faults": [{"bus": "671", "t_s": 1.0, "clearing_s": 0.1, **fault}]})
    return GridSim.check(params, ScenarioContext(parse_utc(START), 60, step_s, 1, 0.1))


def test_fault_at_an_unknown_bus_names_the_nearest_buses():
    problems = _check(bus="6711")
    assert len(problems) == 1
    assert "faults[0].bus = '6711'" in problems[0] and "nearest" in problems[0] and "671" in problems[0]


def test_clearing_time_shorter_than_the_step_is_one_problem():
    problems = _check(step_s=0.1, clearing_s=0.05)
    assert len(problems) == 1 and "clearing_s = 0.05" in problems[0] and "0.1 s" in problems[0]
    assert _check(step_s=0.05, clearing_s=0.05) == []


def test_two_mistakes_in_one_fault_are_two_problems():
    problems = _check(bus="6711", clearing_s=0.05)
    assert len(problems) == 2 and "faults[0].bus" in problems[0] and "faults[0].clearing_s" in problems[1]


def test_fault_on_a_phase_the_bus_lacks():
    problems = _check(bus="611", kind="slg", phases="a")  # 611 carries phase c only
    assert len(problems) == 1 and "has phases c" in problems[0]


@pytest.mark.parametrize("fault, message", [
    ({"kind": "ll", "phases": "a"}, "takes 2 distinct phases"),
    ({"kind": "slg", "phases": "ab"}, "takes 1 distinct phase"),
    ({"kind": "slg", "phases": "x"}, "takes 1 distinct phase"),
    ({"clearing_s": 0}, "greater than 0"),
    ({"r_ohm": 0}, "greater than or equal to 0.0001"),
])
def test_bad_fault_params_are_refused(fault, message):
    with pytest.raises(ValueError, match=message):
        OpenDssFault.model_validate({"bus": "671", "t_s": 1.0, "clearing_s": 0.1, **fault})


def test_faults_need_the_opendss_engine():
    with pytest.raises(ValueError, match='faults apply to engine = "opendss"'):
        SimParams.model_validate({"network": "ieee33", "faults": [{"bus": "5", "t_s": 1.0, "clearing_s": 0.1}]})
