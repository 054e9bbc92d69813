"""The grid adapter's validation reads one shared, read-only copy of a pandapower network (and finds its
missing source and unsupplied buses once) instead of a deep copy per entity: the problems found are
the ones a fresh copy per entity gives, and a run after validation solves to the same bits as one
before it (validation leaves the shared net as it was built)."""

from __future__ import annotations

import copy

import numpy as np
import pandapower as pp
import pytest
from pandapower.toolbox import nets_equal

from cosim import grid_models
from cosim.adapters.grid import GridSim, SimParams
from cosim.adapters.grid.params import ElementParams
from cosim.adapters.grid.pandapower_flow import MODEL_KIND, locate_in, slack_problems, unsupplied_bus_problem
from cosim.sdk import ScenarioContext, parse_utc

CTX = ScenarioContext(start_utc=parse_utc("2024-07-15T00:00:00Z"), duration_s=3600, step_s=60, seed=1)


def _reference(model: str, params: ElementParams, sim_params: SimParams) -> list[str]:
    """The entity check as it reads a fresh copy of the net for each entity (the per-entity form)."""
    net = grid_models.load_network(sim_params.network, **sim_params.network_params)
    table, ref = ("bus", params.bus) if params.bus is not None else (MODEL_KIND[model], params.element)
    try:
        pos = locate_in(net, table, ref)
    except ValueError as exc:
        return [str(exc)]
    if table != "bus":
        ref = net[table].bus.iloc[pos]
        pos = int(net.bus.index.get_loc(ref))
    if slack_problems(net, sim_params.network):
        return []
    problem = unsupplied_bus_problem(net, pos, params.bus if params.bus is not None else ref)
    return [problem] if problem else []


def _user_net(path, source: bool = True) -> str:
    """src - mid - end, an island bus and a load at end; with or without its ext_grid."""
    net = pp.create_empty_network()
    buses = [pp.create_bus(net, 20.0, name=name) for name in ("src", "mid", "end", "island")]
    if source:
        pp.create_ext_grid(net, buses[0])
    for a, b, name in ((0, 1, "l1"), (1, 2, "l2")):
        pp.create_line(net, buses[a], buses[b], 1.0, "NA2XS2Y 1x95 RM/25 12/20 kV", name=name)
    pp.create_load(net, buses[2], 0.5, name="house")
    pp.to_json(net, str(path))
    return str(path)


ENTITIES = [("Load", {"bus": b}) for b in ("src", "mid", "end", "island", "nowhere", "0", "2", "99")] + [
    ("Load", {"element": "house"}), ("Load", {"element": "shed"}), ("Sgen", {"bus": "island"}),
    ("Storage", {"bus": "mid"})]


@pytest.mark.parametrize("source", [True, False])
def test_entity_problems_on_a_user_net_are_the_per_entity_ones(tmp_path, source):
    sim_params = SimParams(network=_user_net(tmp_path / "net.json", source))
    found, expected = [], []
    for model, kw in ENTITIES:
        params = ElementParams(**kw)
        found.append(GridSim.check_entity(model, params, CTX, sim_params))
        expected.append(_reference(model, params, sim_params))
    assert found == expected
    messages = [m for ms in found for m in ms]
    assert any("unknown bus 'nowhere'" in m for m in messages) and any("unknown load 'shed'" in m for m in messages)
    assert any("bus 'island' has no path to a source" in m for m in messages) == source


def test_entity_problems_on_ieee33_are_the_per_entity_ones():
    sim_params = SimParams(network="ieee33", network_params={"max_i_ka": 0.4})
    refs = ["18", "3", "33", "bus 18", "330", "x18", "0"]
    found = [GridSim.check_entity("Load", ElementParams(bus=b), CTX, sim_params) for b in refs]
    assert found == [_reference("Load", ElementParams(bus=b), sim_params) for b in refs]
    assert sum(bool(f) for f in found) >= 2 and any("unknown bus '330'" in m for f in found for m in f)


def _day(entities) -> list[np.ndarray]:
    sim = GridSim()
    sim.init("grid", 1.0, start_utc="2024-07-15T12:00:00Z", step_s=60, duration_s=86_400, seed=1, network="ieee33")
    sim.create(1, "Grid", eid="grid")
    for eid, bus in entities:
        sim.create(1, "Load", eid=eid, bus=bus, p_mw=0.3)
    out = []
    for k in range(4):
        inputs = {eid: {"p_mw": {"src.x": 0.2 + 0.1 * k + 0.01 * i}} for i, (eid, _) in enumerate(entities)}
        sim.step(60 * k, inputs, 10**9)
        out.append(np.array([v for v in sim.out["grid"].values() if isinstance(v, float)]))
    return out


def test_a_run_after_validation_is_the_run_before_it_and_the_shared_net_is_untouched():
    entities = [(f"pcc{i}", str(2 + i)) for i in range(6)]
    before = _day(entities)
    key = grid_models.network_key("ieee33")
    grid_models.load_network("ieee33", copy=False)
    built = copy.deepcopy(grid_models._NETS[key])
    sim_params = SimParams(network="ieee33")
    assert GridSim.check(sim_params, CTX)  # the placeholder-rating warning
    GridSim.meta_for(sim_params)
    for _, bus in entities:
        assert GridSim.check_entity("Load", ElementParams(bus=bus), CTX, sim_params) == []
    after = _day(entities)
    for x, y in zip(before, after, strict=True):
        np.testing.assert_array_equal(x, y)
    shared = grid_models._NETS[key]
    assert shared is grid_models.load_network("ieee33", copy=False)
    assert grid_models.load_network("ieee33") is not shared  # a copy for callers that edit it
    assert nets_equal(shared, built)
    assert len(shared.load) == len(built.load)  # the run attached its loads to its own copy


def test_validating_an_opendss_scenario_does_not_import_pandapower():
    """The OpenDSS engine needs nothing of pandapower (1-3 s to import): validating such a scenario
    leaves it unloaded, while a pandapower scenario loads it (the check can fail both ways)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys, cosim; cosim.validate({!r}); "
            "print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'pandapower', 'lightsim2grid'}}))")
    loaded = {}
    for name in ("ieee13_llm_campus", "default"):
        out = subprocess.run([sys.executable, "-c", code.format(str(root / "scenarios" / f"{name}.toml"))],
                             capture_output=True, text=True, cwd=root, check=True)
        loaded[name] = out.stdout.strip().splitlines()[-1]
    assert loaded["ieee13_llm_campus"] == "[]"
    assert "pandapower" in loaded["default"]
