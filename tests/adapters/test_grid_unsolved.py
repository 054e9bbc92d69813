"""An unsolved step is never served as solved, and a de-energised bus never reads as a healthy one,
on every grid engine (pandapower with lightsim2grid and the C kernels, with numpy's forms, with
pandapower's own ``runpp``; OpenDSS; ANDES's failed integration).

Invariants, not published numbers: a power flow that did not converge has no voltages, flows,
losses or import (NaN), while what an element asked for is still known (its ``p_mw``); a bus with
no path to a source carries no current (Kirchhoff), so an element there is served 0 MW and has no
voltage, and the slack imports nothing for it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.adapters.grid import GridSim

START = "2024-07-15T12:00:00Z"
#: Grid outputs that are settings or counters, known whether or not a step solved.
KNOWN_UNSOLVED = ("converged", "n_nonconverged", "n_lines_out", "n_tap_changes")

#: engine id -> (sim params, element bus, the line whose opening cuts that bus from the source, a load
#: there without a power-flow solution [MW]: 5 MW at IEEE 33's far end on top of its 3.7 MW, 30 MW on
#: IEEE 13's 4.16 kV)
ENGINES = {
    "pandapower-kernels": ({"network": "ieee33", "profiles": False}, "18", "line_1_2_in_service", 5.0),
    "pandapower-numpy": ({"network": "ieee33", "profiles": False}, "18", "line_1_2_in_service", 5.0),
    "pandapower-runpp": ({"network": "ieee33", "profiles": False, "solver": "pandapower"}, "18", "line_1_2_in_service",
                         5.0),
    "opendss": ({"network": "ieee13", "engine": "opendss", "regulators": "fixed"}, "675", "line_671_692_in_service",
                30.0),
}


def make(engine: str) -> tuple[GridSim, str]:
    params, bus, line, _ = ENGINES[engine]
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=1, duration_s=3600, seed=1, **params)
    sim.create(1, "Grid", eid="grid")
    # OpenDSS: constant power down to 0.5 pu (not its 0.95 default), so it is served what it asks
    extra = {"vmin_pu": 0.5} if params.get("engine") == "opendss" else {}
    sim.create(1, "Load", eid="pcc", bus=bus, p_mw=1.0, q_mvar=0.1, **extra)
    if engine == "pandapower-numpy":
        sim.flow.use_kernels = False
    return sim, line


def step(sim: GridSim, time_s: int, inputs=None) -> tuple[dict, dict]:
    mosaik_inputs = {eid: {a: {"src.x": v} for a, v in attrs.items()} for eid, attrs in (inputs or {}).items()}
    sim.step(time_s, mosaik_inputs, 10**9)
    return dict(sim.out["grid"]), dict(sim.out["pcc"])


def _numbers(out: dict, skip=KNOWN_UNSOLVED) -> dict[str, float]:
    """The outputs that a solve computes (device settings such as taps and capacitor states left out)."""
    return {k: v for k, v in out.items() if k not in skip and not k.startswith(("reg_", "cap_"))
            or k.endswith("_q_mvar")}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_an_unsolved_step_is_nan_everywhere_but_the_asked_power(engine):
    """A load without a solution at the element: every voltage, loading, flow, loss and import is NaN
    (not the last solved value), the element's p_mw is what it asked for and p_served_mw is NaN; a
    solvable load afterwards solves again."""
    sim, _ = make(engine)
    fail_mw = ENGINES[engine][3]
    grid0, pcc0 = step(sim, 0)
    assert grid0["converged"] and math.isfinite(grid0["vm_min_pu"]) and pcc0["p_served_mw"] == pytest.approx(1.0, rel=0.02)
    grid, pcc = step(sim, 1, {"pcc": {"p_mw": fail_mw}})
    assert grid["converged"] is False and grid["n_nonconverged"] == 1
    stale = {k: v for k, v in _numbers(grid).items() if not (isinstance(v, float) and math.isnan(v))}
    assert not stale, f"served as solved after a failed solve: {sorted(stale)[:8]}"
    assert pcc["p_mw"] == fail_mw and pcc["q_mvar"] == pytest.approx(0.1)
    assert all(math.isnan(pcc[a]) for a in ("p_served_mw", "vm_pu", "vm_phase_min_pu", "vm_phase_max_pu",
                                            "vm_violation_pu"))
    grid2, pcc2 = step(sim, 2, {"pcc": {"p_mw": 1.0}})
    assert grid2["converged"] and grid2["vm_min_pu"] == pytest.approx(grid0["vm_min_pu"], abs=1e-6)
    assert pcc2["p_served_mw"] == pytest.approx(pcc0["p_served_mw"], rel=1e-4)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_deenergised_element_has_no_voltage_and_is_served_nothing(engine):
    """Opening the line that feeds the element's bus: the flow converges (the rest of the net is
    fine), the element's voltages are NaN and p_served_mw is exactly 0 while p_mw keeps what it
    asked; n_buses_unsupplied counts the dead buses; closing it restores all."""
    sim, line = make(engine)
    grid0, pcc0 = step(sim, 0)
    assert grid0["n_buses_unsupplied"] == 0 and pcc0["p_served_mw"] > 0.9
    grid, pcc = step(sim, 1, {"grid": {line: 0}})
    assert grid["converged"] and grid["n_buses_unsupplied"] >= 1
    assert pcc["p_mw"] == 1.0 and pcc["p_served_mw"] == 0.0
    assert math.isnan(pcc["vm_pu"]) and math.isnan(pcc["vm_phase_min_pu"])
    assert grid["p_import_mw"] < grid0["p_import_mw"] - 0.9  # the slack no longer carries the element
    grid2, pcc2 = step(sim, 2, {"grid": {line: 1}})
    # to the solver's tolerance: OpenDSS serves a constant-power load to within its convergence tolerance
    assert grid2["n_buses_unsupplied"] == 0 and pcc2["p_served_mw"] == pytest.approx(pcc0["p_served_mw"], rel=1e-4)


def test_buses_the_network_itself_leaves_dead_are_not_counted(tmp_path):
    """A pandapower net with one bus out of service in its file: n_buses_unsupplied counts what the
    run's switching cut off, not the network's own dead bus (it would read 1 from the first step)."""
    import pandapower as pp

    net = pp.create_empty_network()
    a, b, c = (pp.create_bus(net, 20.0, name=n) for n in "abc")
    pp.create_ext_grid(net, a)
    pp.create_bus(net, 20.0, name="spare", in_service=False)
    for f, t, name in ((a, b, "ab"), (b, c, "bc")):
        pp.create_line_from_parameters(net, f, t, 1.0, r_ohm_per_km=0.1, x_ohm_per_km=0.3, c_nf_per_km=0.0,
                                       max_i_ka=0.4, name=name)
    file = tmp_path / "net.json"
    pp.to_json(net, str(file))
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=1, duration_s=3600, seed=1, network=str(file), profiles=False)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="pcc", bus="c", p_mw=1.0)
    assert step(sim, 0)[0]["n_buses_unsupplied"] == 0
    assert step(sim, 1, {"grid": {"line_bc_in_service": 0}})[0]["n_buses_unsupplied"] == 1


def test_andes_a_failed_integration_leaves_nan_not_the_last_step():
    """ANDES (the transmission engine): an integration that fails raises (the run fails) and leaves
    every output of that step NaN but the load's asked power, so a Session or a live run reading
    after the failure never sees the last step's values as this one's. The failure is made by
    ANDES's own flag (``TDS.busted``), as its integrator sets it when Newton's iterations diverge."""
    from cosim.adapters.andes_grid import AndesGridSim

    sim = AndesGridSim()
    sim.init("tgrid", time_resolution=0.1, start_utc="2024-07-10T00:00:00Z", step_s=0.1, duration_s=60, seed=1)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="campus", bus=16, p_mw=300.0)
    sim.step(0, {"campus": {"p_mw": {"dc": 300.0}}}, None)
    assert math.isfinite(sim.out["grid"]["f_hz"]) and sim.out["campus"]["p_served_mw"] == pytest.approx(300.0, rel=1e-3)
    tds = sim.system.TDS

    def diverge(**_kwargs):
        tds.busted, tds.err_msg = True, "Newton iterations did not converge"

    tds.run = diverge
    with pytest.raises(RuntimeError, match="did not converge"):
        sim.step(1, {"campus": {"p_mw": {"dc": 310.0}}}, None)
    load, grid = sim.out["campus"], sim.out["grid"]
    assert load["p_mw"] == 310.0 and all(math.isnan(load[a]) for a in ("p_served_mw", "vm_pu", "f_hz"))
    values = np.array([v for v in grid.values()], dtype=float)
    assert len(values) > 10 and np.isnan(values).all()
