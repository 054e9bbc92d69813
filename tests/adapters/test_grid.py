"""Tests of the grid adapter: its fast power flow against pandapower's ``runpp``.

pandapower validates ``runpp`` against PowerFactory and MATPOWER reference results
(Thurner et al., "pandapower — an open-source Python tool for convenient modeling,
analysis, and optimization of electric power systems", IEEE Trans. Power Systems 33(6),
2018), so agreeing with ``runpp`` to 1e-6 pu is agreeing with those references.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandapower as pp
import pytest

from cosim import grid_models
from cosim.adapters.grid import GridSim, SimParams, element_ids, sanitise
from cosim.sdk import ScenarioContext, parse_utc
from cosim.units import has_unit_suffix

START = "2024-07-15T12:00:00Z"
SIMBENCH = "simbench:1-MV-rural--0-sw"
VM_TOL_PU = 1e-6


def make_sim(network: str, entities=(), **params) -> GridSim:
    """A GridSim driven directly (no mosaik), with a Grid entity ``grid`` and ``entities``."""
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=60, duration_s=86_400, seed=1, network=network, **params)
    sim.create(1, "Grid", eid="grid")
    for eid, model, model_params in entities:
        sim.create(1, model, eid=eid, **model_params)
    return sim


def step(sim: GridSim, time_s: int = 0, inputs=None) -> dict:
    """Step once; inputs as ``{eid: {attr: value}}`` (one source each)."""
    mosaik_inputs = {eid: {a: {"src.x": v} for a, v in attrs.items()} for eid, attrs in (inputs or {}).items()}
    assert sim.step(time_s, mosaik_inputs, 10**9) == time_s + 60
    return sim.out["grid"]


def grid_vector(sim: GridSim, table: str, out: dict) -> np.ndarray:
    suffix = {"bus": "vm_pu", "line": "loading_pct", "trafo": "loading_pct"}[table]
    return np.array([out[f"{table}_{i}_{suffix}"] for i in sim.flow.ids[table]], dtype=float)


def runpp(net) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pp.runpp(net)


def assert_matches_runpp(sim: GridSim, out: dict, net) -> None:
    """Voltages, loadings, slack import and losses of ``out`` equal ``runpp`` on ``net``."""
    runpp(net)
    np.testing.assert_allclose(grid_vector(sim, "bus", out), net.res_bus.vm_pu, atol=VM_TOL_PU, equal_nan=True)
    np.testing.assert_allclose(grid_vector(sim, "line", out), net.res_line.loading_percent.fillna(0.0),
                               atol=1e-4, equal_nan=True)
    if len(net.trafo):
        np.testing.assert_allclose(grid_vector(sim, "trafo", out), net.res_trafo.loading_percent, atol=1e-4)
    assert out["p_import_mw"] == pytest.approx(net.res_ext_grid.p_mw.sum(), rel=1e-6, abs=1e-6)
    assert out["q_import_mvar"] == pytest.approx(net.res_ext_grid.q_mvar.sum(), rel=1e-6, abs=1e-6)
    losses = net.res_line.pl_mw.sum() + net.res_trafo.pl_mw.sum()
    assert out["losses_mw"] == pytest.approx(losses, rel=1e-6, abs=1e-7)
    assert out["vm_min_pu"] == pytest.approx(net.res_bus.vm_pu.min(), abs=VM_TOL_PU)
    assert out["converged"] is True


FAR_BUS = {"ieee33": "18", "cigre_mv": "Bus 11", SIMBENCH: "MV1.101 Bus 40"}


@pytest.mark.parametrize("network", ["ieee33", "cigre_mv", SIMBENCH])
def test_base_case_matches_runpp(network):
    """Tabulated loads, no profiles: same state as ``pp.runpp`` (pandapower 3.x, NR, 1e-8 MVA)."""
    sim = make_sim(network, profiles=False)
    assert_matches_runpp(sim, step(sim), grid_models.load_network(network))


@pytest.mark.parametrize("network", ["ieee33", "cigre_mv", SIMBENCH])
@pytest.mark.parametrize("p_mw", [0.3, 1.0])
def test_attached_load_and_sgen_match_runpp(network, p_mw):
    """Two load levels at a far bus (plus a PV sgen elsewhere) through attached entities."""
    bus = FAR_BUS[network]
    sim = make_sim(network, profiles=False, entities=[
        ("dc", "Load", {"bus": bus, "p_mw": p_mw, "q_mvar": 0.1 * p_mw}),
        ("pv", "Sgen", {"bus": bus, "p_mw": 0.3}),
    ])
    step(sim)
    out = step(sim, 60, {"dc": {"p_mw": p_mw * 1.5}})  # an input replaces the initial value
    net = grid_models.load_network(network)
    at = sim.flow.net.bus.index[sim.flow.locate_bus(bus)]
    pp.create_load(net, at, p_mw=p_mw * 1.5, q_mvar=0.1 * p_mw)
    pp.create_sgen(net, at, p_mw=0.3)
    assert_matches_runpp(sim, out, net)
    assert sim.out["dc"]["p_mw"] == pytest.approx(1.5 * p_mw)
    assert sim.out["dc"]["vm_pu"] == pytest.approx(net.res_bus.vm_pu[at], abs=VM_TOL_PU)


def test_ieee33_reconfiguration_matches_runpp():
    """Close tie 21-8 and open line 7-8 (a Baran & Wu reconfiguration); then undo it."""
    sim = make_sim("ieee33")
    base = dict(step(sim))
    out = step(sim, 60, {"grid": {"line_21_8_in_service": 1, "line_7_8_in_service": 0}})
    net = grid_models.load_network("ieee33")
    net.line.loc[net.line.name == "21_8", "in_service"] = True
    net.line.loc[net.line.name == "7_8", "in_service"] = False
    assert_matches_runpp(sim, out, net)
    assert out["line_7_8_loading_pct"] == 0.0
    out = step(sim, 120, {"grid": {"line_21_8_in_service": 0, "line_7_8_in_service": 1}})
    assert out["vm_min_pu"] == pytest.approx(base["vm_min_pu"], abs=1e-9)


def test_cigre_islanding_line_out_matches_runpp():
    """CIGRE MV (open tie switches S1-S3 on lines): taking line 3-8 out islands buses 8-11."""
    sim = make_sim("cigre_mv")
    out = step(sim, 0, {"grid": {"line_line_3_8_in_service": 0}})
    net = grid_models.load_network("cigre_mv")
    net.line.loc[net.line.name == "Line 3-8", "in_service"] = False
    assert_matches_runpp(sim, out, net)
    assert np.isnan(out["bus_bus_9_vm_pu"])  # islanded: no voltage, as pandapower reports


@pytest.mark.parametrize("network", ["cigre_mv", SIMBENCH])
def test_switch_bearing_net_line_out_matches_runpp(network):
    """A meshed-by-switch net with one more line out: bus fusing and open switches as runpp."""
    sim = make_sim(network, profiles=False)
    line = sim.flow.ids["line"][1]
    out = step(sim, 0, {"grid": {f"line_{line}_in_service": False}})
    net = grid_models.load_network(network)
    net.line.loc[net.line.index[1], "in_service"] = False
    assert_matches_runpp(sim, out, net)


@pytest.mark.parametrize("when", ["2024-01-10T03:00:00Z", "2023-06-21T12:07:00Z"])
def test_simbench_profiles_match_runpp(when):
    """SimBench's year applied by day of year and time of day (the 15-min step containing it)."""
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=when, step_s=60, duration_s=3600, seed=1, network=SIMBENCH)
    sim.create(1, "Grid", eid="grid")
    out = step(sim)
    t = parse_utc(when)
    row = ((t.timetuple().tm_yday - 1) * 86_400 + t.hour * 3600 + t.minute * 60) // 900
    net = grid_models.load_network(SIMBENCH)
    for key, frame in grid_models.load_profiles(SIMBENCH).items():
        element, column = key.split(".")
        net[element].loc[frame.columns, column] = frame.iloc[row].to_numpy(float)
    assert_matches_runpp(sim, out, net)


def test_case33bw_published_minimum_voltage():
    """Baran & Wu (1989), IEEE Trans. Power Delivery 4(2): base case minimum 0.9131 pu at bus 18.

    pandapower's case33bw gives 0.913090 pu at bus 18 (index 17) with runpp.
    """
    out = step(make_sim("ieee33"))
    assert out["bus_18_vm_pu"] == pytest.approx(0.9131, abs=5e-5)
    assert out["vm_min_pu"] == out["bus_18_vm_pu"]
    assert out["p_import_mw"] == pytest.approx(3.715 + 0.2027, abs=1e-3)  # load + 202.7 kW losses


def test_nonconvergence_is_nan_counts_and_recovers():
    """An absurd load (500 MW on a 12.66 kV feeder) has no solution: NaN results (never the last
    solved ones), count, recover (every engine: tests/adapters/test_grid_unsolved.py)."""
    sim = make_sim("ieee33", entities=[("dc", "Load", {"bus": "18"})])
    good = dict(step(sim))
    for k, time_s in enumerate((60, 120), start=1):
        out = step(sim, time_s, {"dc": {"p_mw": 500.0}})
        assert out["converged"] is False and out["n_nonconverged"] == k
        assert math.isnan(out["vm_min_pu"]) and math.isnan(out["bus_18_vm_pu"]) and math.isfinite(good["vm_min_pu"])
    out = step(sim, 180, {"dc": {"p_mw": 0.0}})
    assert out["converged"] is True and out["n_nonconverged"] == 2
    assert out["vm_min_pu"] == pytest.approx(good["vm_min_pu"], abs=1e-9)


def test_nonconvergence_fail_policy_raises_with_time():
    sim = make_sim("ieee33", on_nonconvergence="fail", entities=[("dc", "Load", {"bus": "18", "p_mw": 500.0})])
    with pytest.raises(RuntimeError, match=r"grid.*2024-07-15T12:00:00\+00:00"):
        step(sim)


def test_sign_conventions_at_a_named_bus():
    """Load and Storage draw (consumer convention), Sgen produces (generator convention)."""
    base = step(make_sim("ieee33"))["p_import_mw"]
    load = step(make_sim("ieee33", entities=[("x", "Load", {"bus": "18", "p_mw": 1.0})]))
    storage = step(make_sim("ieee33", entities=[("x", "Storage", {"bus": "18", "p_mw": 1.0})]))
    sgen = step(make_sim("ieee33", entities=[("x", "Sgen", {"bus": "18", "p_mw": 1.0})]))
    assert load["p_import_mw"] > base + 1.0  # the load plus the extra losses it causes
    assert storage["p_import_mw"] == pytest.approx(load["p_import_mw"])
    assert base - 1.2 < sgen["p_import_mw"] < base - 1.0  # production plus the losses it saves
    assert load["bus_18_vm_pu"] < step(make_sim("ieee33"))["bus_18_vm_pu"] < sgen["bus_18_vm_pu"]


def test_existing_element_follows_table_until_input():
    """``element=`` drives an existing load: tabulated value first, the input afterwards."""
    sim = make_sim("ieee33", entities=[("l18", "Load", {"element": "load_18"})])
    base = dict(step(sim))
    assert sim.out["l18"]["p_mw"] == pytest.approx(0.09)  # Baran & Wu: 90 kW at bus 18
    out = step(sim, 60, {"l18": {"p_mw": 0.0, "q_mvar": 0.0}})
    assert out["p_import_mw"] < base["p_import_mw"] - 0.09
    out = step(sim, 120)  # no new input: the last one holds
    assert sim.out["l18"]["p_mw"] == 0.0


def test_several_sources_are_summed():
    """IT and cooling power into one point of connection add up (base-class summing)."""
    sim = make_sim("ieee33", entities=[("pcc", "Load", {"bus": "18"})])
    sim.step(0, {"pcc": {"p_mw": {"dc.p_it": 0.3, "plant.p_cool": 0.2}}}, 10**9)
    assert sim.out["pcc"]["p_mw"] == pytest.approx(0.5)


@pytest.mark.parametrize("params", [{"bus": "no such bus"}, {"element": "load_99"}, {}, {"bus": "1", "element": "load_2"}])
def test_bad_entity_params_raise_clear_errors(params):
    sim = make_sim("ieee33")
    with pytest.raises(ValueError, match="bus|load|exactly one"):
        sim.create(1, "Load", eid="x", **params)


def test_unknown_bus_error_lists_valid_names():
    sim = make_sim("cigre_mv")
    with pytest.raises(ValueError, match="Bus 0"):
        sim.create(1, "Load", eid="x", bus="Bus 99")


def test_meta_lists_every_element_with_unit_suffixes():
    """META from the network alone; every attribute carries a unit suffix (or is a flag)."""
    meta = GridSim.meta_for(SimParams(network="cigre_mv"))
    grid = meta["models"]["Grid"]
    assert "bus_bus_11_vm_pu" in grid["outputs"] and "trafo_trafo_0_1_loading_pct" in grid["outputs"]
    assert len([a for a in grid["outputs"] if a.startswith("line_")]) == 15
    assert "line_line_3_8_in_service" in grid["inputs"]
    for model in meta["models"].values():
        for attr in model["attrs"]:
            assert has_unit_suffix(attr), attr
    assert GridSim.meta_for(SimParams(network="cigre_mv")) is meta  # cached


def test_check_reports_unknown_network():
    ctx = ScenarioContext(parse_utc(START), 3600, 60, 1)
    problems = GridSim.check(SimParams(network="ieee34"), ctx)
    assert len(problems) == 1 and "ieee33" in problems[0]
    known = GridSim.check(SimParams(network="ieee33"), ctx)  # a known network: no problem, only the rating guard
    assert [p for p in known if not p.startswith("warning: ")] == []
    assert len(known) == 1 and "placeholder ratings" in known[0]
    assert GridSim.check(SimParams(network="cigre_mv"), ctx) == []  # real ratings: nothing to say


def test_element_ids_sanitise_and_fall_back_to_index():
    import pandas as pd

    table = pd.DataFrame({"name": ["Bus 1", "bus-1", None, "MV1.101 Bus 4", "7"]}, index=[3, 4, 5, 6, 7])
    assert element_ids(table) == ["3", "4", "5", "mv1_101_bus_4", "7"]
    assert sanitise("Line 3-8") == "line_3_8"


def test_pandapower_solver_gives_same_results():
    fast = step(make_sim("cigre_mv", entities=[("dc", "Load", {"bus": "Bus 11", "p_mw": 2.0})]))
    slow = step(make_sim("cigre_mv", solver="pandapower", entities=[("dc", "Load", {"bus": "Bus 11", "p_mw": 2.0})]))
    for attr in ("vm_min_pu", "p_import_mw", "losses_mw", "bus_bus_11_vm_pu"):
        assert fast[attr] == pytest.approx(slow[attr], abs=1e-6)


def test_runs_in_a_mosaik_world(monkeypatch):
    """A datacenter-like source feeds a Load at bus 18 through mosaik; import rises by > 1 MW."""
    import sys
    import types

    import mosaik
    import mosaik_api_v3

    class Source(mosaik_api_v3.Simulator):
        def __init__(self):
            super().__init__({"type": "time-based", "models": {"Src": {"public": True, "params": [], "attrs": ["p_mw"]}}})

        def create(self, num, model):
            return [{"eid": "src", "type": model}]

        def step(self, time, inputs, max_advance):
            return time + 60

        def get_data(self, outputs):
            return {"src": {"p_mw": 1.0}}

    class Sink(mosaik_api_v3.Simulator):
        seen: list = []

        def __init__(self):
            super().__init__({"type": "time-based", "models": {"Sink": {"public": True, "params": [], "attrs": ["p_import_mw"], "any_inputs": True}}})

        def create(self, num, model):
            return [{"eid": "sink", "type": model}]

        def step(self, time, inputs, max_advance):
            Sink.seen.append(next(iter(inputs["sink"]["p_import_mw"].values())))
            return time + 60

    module = types.ModuleType("grid_world_test_sims")
    module.Source, module.Sink = Source, Sink
    monkeypatch.setitem(sys.modules, "grid_world_test_sims", module)
    world = mosaik.World({
        "Grid": {"python": "cosim.adapters.grid:GridSim"},
        "Source": {"python": "grid_world_test_sims:Source"},
        "Sink": {"python": "grid_world_test_sims:Sink"},
    }, debug=False)
    grid_sim = world.start("Grid", start_utc=START, step_s=60, duration_s=180, seed=1, network="ieee33")
    grid = grid_sim.Grid()
    pcc = grid_sim.Load(bus="18")
    src = world.start("Source").Src()
    sink = world.start("Sink").Sink()
    world.connect(src, pcc, "p_mw")
    world.connect(grid, sink, "p_import_mw")
    world.run(until=180)
    assert len(Sink.seen) == 3 and all(p > 3.9177 + 1.0 for p in Sink.seen)


def test_branch_currents_product_is_scipys():
    """The pandapower engine's per-step ``Y @ V`` calls scipy's CSR loop directly: it must give
    the operator's numbers exactly (random complex matrices of feeder-like shapes and densities)."""
    from scipy import sparse

    from cosim.adapters.grid.pandapower_flow import _matvec

    rng = np.random.default_rng(3)
    for rows, cols, density in [(75, 33, 0.06), (240, 118, 0.02), (1, 5, 1.0), (9, 4, 0.0)]:
        m = sparse.random(rows, cols, density=density, random_state=rng, format="csr")
        m = (m + 1j * sparse.random(rows, cols, density=density, random_state=rng, format="csr")).tocsr()
        v = rng.normal(size=cols) + 1j * rng.normal(size=cols)
        assert np.array_equal(_matvec(m, v), m @ v)
        assert np.array_equal(_matvec(m.tocsc(), v), m @ v)  # another format: the operator, not the CSR loop


# -- a user's own pandapower JSON network: every mistake is one validation problem -----------------
USER_NET_SCENARIO = """
[scenario]
name = "user_net"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60

[sims.grid]
adapter = "grid"
network = "my.json"

[entities.site]
sim = "grid"
model = "Load"
bus = "{bus}"
p_mw = 1.0
"""


def _user_net():
    """A three-bus feeder src - mid - end with its source at src."""
    net = pp.create_empty_network()
    buses = [pp.create_bus(net, 20.0, name=name) for name in ("src", "mid", "end")]
    pp.create_ext_grid(net, buses[0])
    for a, b, name in ((0, 1, "l1"), (1, 2, "l2")):
        pp.create_line(net, buses[a], buses[b], 1.0, "NA2XS2Y 1x95 RM/25 12/20 kV", name=name)
    return net


def _no_ext_grid(net):
    net.ext_grid.drop(net.ext_grid.index, inplace=True)


def _isolated_bus(net):
    pp.create_bus(net, 20.0, name="island")


def _lines_out(net):
    net.line["in_service"] = False


def _bus_out(net):
    net.bus.loc[net.bus.name == "end", "in_service"] = False


@pytest.mark.parametrize("edit, bus, expected", [
    (lambda net: net.ext_grid.__setitem__("in_service", False), "mid", "no source to solve from"),
    (_no_ext_grid, "mid", "no source to solve from"),
    (_isolated_bus, "island", "bus 'island' has no path to a source"),
    (_lines_out, "end", "bus 'end' has no path to a source"),
    (_bus_out, "end", "bus 'end' is out of service"),
    (None, "nowhere", "unknown bus 'nowhere'"),
])
def test_a_user_net_that_cannot_serve_the_entity_is_one_problem(tmp_path, edit, bus, expected):
    """A net without a source, or an entity at a bus no in-service path reaches, fails validation
    with one problem (before the fix: validation said ok, and the run either failed in pandapower
    or silently left the entity's load unserved while it reported p_mw = 1)."""
    from cosim.errors import ScenarioError
    from cosim.scenario import load_scenario

    net = _user_net()
    if edit is not None:
        edit(net)
    pp.to_json(net, str(tmp_path / "my.json"))
    path = tmp_path / "scenario.toml"
    path.write_text(USER_NET_SCENARIO.format(bus=bus))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    problems = caught.value.problems
    assert len(problems) == 1, problems
    assert expected in problems[0].message
    assert problems[0].path in ("sims.grid", "entities.site")


def test_a_user_net_with_its_source_validates(tmp_path):
    from cosim.scenario import load_scenario

    pp.to_json(_user_net(), str(tmp_path / "my.json"))
    path = tmp_path / "scenario.toml"
    path.write_text(USER_NET_SCENARIO.format(bus="end"))
    assert load_scenario(path).scenario.name == "user_net"
