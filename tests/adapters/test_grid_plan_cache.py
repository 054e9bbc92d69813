"""get_data keeps a plan per request: two readers asking different things in turn (a recorder and a
gym's observation reader) do not rebuild a plan at every call, and each gets what a fresh sim gives."""

from __future__ import annotations

import math

from cosim.adapters.grid import GridSim
from cosim.adapters.grid import sim as grid_sim

START = "2024-07-15T12:00:00Z"


def make() -> GridSim:
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=1, duration_s=3600, seed=1, network="ieee33",
             engine="pandapower")
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="pcc", bus="18", p_mw=0.2)
    sim.create(1, "Load", eid="other", bus="5", p_mw=0.1)
    return sim


def same(a: dict, b: dict) -> bool:
    """Equal to the bit (NaN equal to NaN), in the same key order, nested."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def requests(sim: GridSim) -> list[dict[str, list[str]]]:
    every = list(sim.out["grid"])
    return [{"grid": every, "pcc": ["p_mw", "q_mvar"], "other": ["p_mw"]},  # a recorder's
            {"grid": ["vm_min_pu", "p_import_mw"], "pcc": ["p_mw"]},        # an observation's
            {"pcc": ["p_mw"], "grid": ["vm_min_pu", "p_import_mw"]},        # the same, entities swapped
            {"grid": ["p_import_mw", "vm_min_pu"], "pcc": ["p_mw"]}]        # ... attrs swapped


def test_alternating_requests_build_each_plan_once_and_answer_as_sims_asked_one_request(monkeypatch):
    built = []
    plan_for = grid_sim.GridSim._plan_for
    monkeypatch.setattr(grid_sim.GridSim, "_plan_for",
                        lambda self, outputs: built.append(self) or plan_for(self, outputs))
    sim = make()
    asked = requests(sim)
    alone = [make() for _ in asked]  # each asked only its own request
    for t, p_mw in enumerate([0.2, 0.9, 0.4, 1.3]):
        inputs = {"pcc": {"p_mw": {"campus.p_mw": p_mw}}}
        for s in [sim, *alone]:
            s.step(t, inputs, 10**9)
        for outputs, single in zip(asked, alone):
            got = sim.get_data(outputs)
            assert list(got) == list(outputs) and all(list(got[e]) == list(a) for e, a in outputs.items())
            assert same(got, single.get_data(outputs))
    assert built.count(sim) == len(asked)  # each request planned once, not at every turn


def test_plans_kept_are_bounded():
    sim = make()
    sim.step(0, {}, 10**9)
    for n in range(1, 3 * grid_sim.PLANS_KEPT):
        sim.get_data({"grid": list(sim.out["grid"])[:n]})
    assert len(sim._plans) == grid_sim.PLANS_KEPT
