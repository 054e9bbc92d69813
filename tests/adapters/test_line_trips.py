"""Line trips as grid-side events (``line_trips`` / ``line_trips_file`` of a grid sim).

Checks are invariants of the power flow, not published numbers: identical parallel lines share
a flow equally, so with k of n in service each carries 1/k of it (Kirchhoff; the loading rises
monotonically as lines trip); a radial spur's bus loses its only source when the spur trips
(an island: NaN voltage, its load not served), while a ring stays connected when one of its
lines trips. Both engines.
"""

from __future__ import annotations

import math

import pandapower as pp
import pytest

from cosim.adapters.grid import GridSim, SimParams
from cosim.sdk import ScenarioContext, parse_utc

START = "2024-07-15T12:00:00Z"
CTX = ScenarioContext(parse_utc(START), 3600, 1, 1)
LINE = {"r_ohm_per_km": 0.1, "x_ohm_per_km": 0.3, "c_nf_per_km": 0.0, "max_i_ka": 0.4}


def toy_net(path):
    """20 kV: slack bus a; three parallel lines a-b (p1, p2, p3), a ring b-c-d-b, a radial spur b-e.

    Loads 3 MW at b, 1 MW at c and d, 0.5 MW at e.
    """
    net = pp.create_empty_network()
    bus = {n: pp.create_bus(net, 20.0, name=n) for n in "abcde"}
    pp.create_ext_grid(net, bus["a"])
    for name, (f, t) in {"p1": "ab", "p2": "ab", "p3": "ab", "r1": "bc", "r2": "cd", "r3": "db",
                         "spur": "be"}.items():
        pp.create_line_from_parameters(net, bus[f], bus[t], 2.0, name=name, **LINE)
    for at, p in {"b": 3.0, "c": 1.0, "d": 1.0, "e": 0.5}.items():
        pp.create_load(net, bus[at], p_mw=p, q_mvar=0.2 * p)
    file = path / "toy.json"
    pp.to_json(net, str(file))
    return str(file)


def make_sim(network: str, **params) -> GridSim:
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=1, duration_s=3600, seed=1, network=network, **params)
    sim.create(1, "Grid", eid="grid")
    return sim


def step(sim: GridSim, time_s: int, inputs=None) -> dict:
    mosaik_inputs = {eid: {a: {"src.x": v} for a, v in attrs.items()} for eid, attrs in (inputs or {}).items()}
    sim.step(time_s, mosaik_inputs, 10**9)
    return dict(sim.out["grid"])


def test_parallel_lines_share_and_loading_rises_as_they_trip(tmp_path):
    """p1 trips at 2 s, p2 at 4 s (both back at 6 s): p3 carries 1/3, 1/2, then all of the flow."""
    sim = make_sim(toy_net(tmp_path), profiles=False, line_trips=[[2.0, 4.0, "p1"], [4.0, 2.0, "p2"]])
    runs = [step(sim, t) for t in range(8)]
    p3 = [r["line_p3_loading_pct"] for r in runs]
    assert all(r["converged"] for r in runs)
    assert p3[0] == p3[1] > 0 and [r["n_lines_out"] for r in runs] == [0, 0, 1, 1, 2, 2, 0, 0]
    assert p3[1] < p3[2] < p3[4]  # monotonic: fewer lines, more on the one left
    assert p3[2] == pytest.approx(1.5 * p3[0], rel=0.02) and p3[4] == pytest.approx(3.0 * p3[0], rel=0.03)
    assert runs[2]["line_p1_loading_pct"] == 0.0 and runs[2]["line_p2_loading_pct"] == pytest.approx(p3[2])
    assert runs[4]["losses_mw"] > runs[2]["losses_mw"] > runs[0]["losses_mw"]
    assert runs[4]["bus_b_vm_pu"] < runs[2]["bus_b_vm_pu"] < runs[0]["bus_b_vm_pu"]
    assert runs[6] == runs[0]  # back in service: the same solution


def test_radial_spur_trip_islands_its_bus_and_the_ring_does_not(tmp_path):
    """A ring line out: every bus still fed, the others carry more. The spur out: bus e islanded."""
    sim = make_sim(toy_net(tmp_path), profiles=False, line_trips=[[1.0, 1.0, "r1"], [3.0, 1.0, "spur"]])
    base, ring, _, spur, back = (step(sim, t) for t in range(5))
    assert ring["converged"] and ring["n_buses_islanded"] == 0 and ring["line_r3_loading_pct"] > base["line_r3_loading_pct"]
    assert spur["converged"] and spur["n_buses_islanded"] == 1 and math.isnan(spur["bus_e_vm_pu"])
    assert spur["p_import_mw"] == pytest.approx(base["p_import_mw"] - 0.5, abs=0.01)  # e's load not served
    assert math.isfinite(spur["vm_min_pu"]) and back["n_buses_islanded"] == 0 and back == base


def test_trips_from_a_csv_file_and_an_input_holding_the_line_open(tmp_path):
    """``line_trips_file`` as ``line_trips``; a line an input opened stays open after its trip ends."""
    csv = tmp_path / "trips.csv"
    csv.write_text("# line trips\nt_s,duration_s,line\n1,1,p1\n", encoding="utf-8")
    sim = make_sim(toy_net(tmp_path), profiles=False, line_trips_file=str(csv))
    assert step(sim, 0)["n_lines_out"] == 0 and step(sim, 1)["n_lines_out"] == 1
    assert step(sim, 2, {"grid": {"line_p2_in_service": 0}})["n_lines_out"] == 1  # p1 back, p2 held open
    sim2 = make_sim(toy_net(tmp_path), profiles=False, line_trips=[[1.0, 1.0, "p1"]])
    step(sim2, 0, {"grid": {"line_p1_in_service": 0}})
    assert step(sim2, 2)["n_lines_out"] == 1  # the input keeps it open after the trip


def test_opendss_trip_islands_downstream_buses():
    """IEEE 13 with 671-692 tripped from 1 s to 2 s: 692 and 675 without voltage, then restored."""
    sim = make_sim("ieee13", engine="opendss", regulators="fixed", line_trips=[[1.0, 1.0, "671_692"]])
    base, out, back = (step(sim, t) for t in range(3))
    assert out["n_lines_out"] == 1 and out["n_buses_islanded"] == 2 and math.isnan(out["bus_675_vm_pu"])
    assert out["p_import_mw"] < base["p_import_mw"] - 0.8 and back["n_buses_islanded"] == 0
    assert back["bus_675_vm_pu"] == pytest.approx(base["bus_675_vm_pu"], abs=1e-5)


def test_trip_outputs_only_with_trips_and_bad_trips_refused(tmp_path):
    net = toy_net(tmp_path)
    plain = GridSim.meta_for(SimParams(network=net))["models"]["Grid"]["attrs"]
    assert "n_lines_out" not in plain and "n_buses_islanded" not in plain
    with_trips = GridSim.meta_for(SimParams(network=net, line_trips=[[1.0, 1.0, "p1"]]))["models"]["Grid"]["attrs"]
    assert {"n_lines_out", "n_buses_islanded"} <= set(with_trips)
    problems = GridSim.check(SimParams(network=net, line_trips=[[1.0, 1.0, "nope"]]), CTX)
    assert problems and "line_trips" in problems[0] and "'nope'" in problems[0] and "p1" in problems[0]
    with pytest.raises(ValueError, match="duration_s > 0"):
        SimParams(network=net, line_trips=[[1.0, 0.0, "p1"]])


@pytest.mark.parametrize("row, said", [("nan,2,l1", "row 3"), ("5,inf,l1", "row 3"), ("x,2,l1", "row 3")])
def test_a_trip_file_row_that_is_not_a_finite_time_is_refused(tmp_path, row, said):
    """``nan`` and ``inf`` parse as floats: a trip at NaN never happens, so such a row is refused like text is,
    naming the file and the row (the header is row 1)."""
    from cosim.adapters.grid import read_line_trips

    path = tmp_path / "trips.csv"
    path.write_text(f"t_s,duration_s,line\n1,2,l0\n{row}\n")
    with pytest.raises(ValueError, match=rf"trips.csv: {said}: t_s and duration_s must be numbers"):
        read_line_trips(path)
