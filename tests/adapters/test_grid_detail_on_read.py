"""The Grid's per-element outputs are written when read: whoever reads them gets the last step's values.

Two sims step through the same inputs; one is read whole after every step (every output written at
once), the other is asked only for its summary on most steps (its per-bus, per-line and per-phase
outputs held as arrays) and whole on others. Both must give the same values, to the bit, on both engines;
a step that does not solve after an unread one gives NaN, not the unread step's values.
"""

from __future__ import annotations

import math

import pytest

from cosim.adapters.grid import GridSim

START = "2024-07-15T12:00:00Z"
CASES = {"opendss": ("ieee13", "671"), "pandapower": ("ieee33", "18")}


def make(engine: str, **params) -> GridSim:
    network, bus = CASES[engine]
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=1, duration_s=3600, seed=1, network=network, engine=engine,
             **params)
    sim.create(1, "Grid", eid="grid")
    sim.create(1, "Load", eid="pcc", bus=bus, p_mw=0.2)
    return sim


def same(a: dict, b: dict) -> bool:
    """Equal to the bit, NaN equal to NaN, and in the same key order."""
    return list(a) == list(b) and all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
                                      for x, y in zip(a.values(), b.values()))


@pytest.mark.parametrize("engine", sorted(CASES))
def test_outputs_read_late_or_partly_equal_outputs_read_whole(engine):
    whole, partly = make(engine), make(engine)
    every = list(whole.get_data({"grid": list(whole.out["grid"])})["grid"])
    detail = [a for a in every if a.startswith(("bus_", "line_", "trafo_"))]
    summary = [a for a in every if a not in detail]
    assert len(detail) > 30 and "vm_min_pu" in summary
    for t, p_mw in enumerate([0.2, 0.9, 0.4, 1.3, 0.6]):
        inputs = {"pcc": {"p_mw": {"campus.p_mw": p_mw}}}
        whole.step(t, inputs, 10**9)
        partly.step(t, inputs, 10**9)
        expected = whole.get_data({"grid": every})["grid"]
        if t % 2:  # read whole (the per-element outputs written now) ...
            assert same(partly.get_data({"grid": every})["grid"], expected)
        else:  # ... or the summary only, and then one per-element output, then ``out`` itself
            got = partly.get_data({"grid": summary})["grid"]
            assert same(got, {a: expected[a] for a in summary})
            assert partly.get_data({"grid": [detail[-1]]})["grid"][detail[-1]] == expected[detail[-1]]
        assert same(partly.out["grid"], whole.out["grid"])


@pytest.mark.parametrize("engine", sorted(CASES))
def test_an_unsolved_step_after_an_unread_one_reads_nan(engine):
    sim = make(engine, on_nonconvergence="continue_nan")
    sim.step(0, {}, 10**9)
    bus = next(a for a in sim.out["grid"] if a.startswith("bus_"))
    sim.step(1, {}, 10**9)
    assert math.isfinite(sim.get_data({"grid": ["vm_min_pu"]})["grid"]["vm_min_pu"])  # bus voltages not written
    sim.step(2, {"pcc": {"p_mw": {"campus.p_mw": 1e5}}}, 10**9)  # far past what the feeder carries
    got = sim.get_data({"grid": ["converged", bus]})["grid"]
    assert got["converged"] is False and math.isnan(got[bus])


@pytest.mark.parametrize("engine", sorted(CASES))
def test_outputs_handed_out_keep_the_values_of_their_step(engine):
    """What get_data hands out (the element's dict, the Grid's) is never changed by a later step, solved
    or not: an engine's cache and a time-shifted reader hold it as it was at its step."""
    import copy

    sim = make(engine, on_nonconvergence="continue_nan")
    request = {eid: list(values) for eid, values in sim.out.items()}
    handed, kept = [], []
    for t, p_mw in enumerate([0.2, 0.9, 1e5, 0.4]):  # 1e5 MW: a step that does not solve
        sim.step(t, {"pcc": {"p_mw": {"campus.p_mw": p_mw}}}, 10**9)
        data = sim.get_data(request)
        handed.append(data)
        kept.append(copy.deepcopy(data))
    assert handed[1]["pcc"]["p_mw"] == 0.9 and handed[2]["pcc"]["p_mw"] == 1e5  # the steps differ ...
    assert handed[0]["grid"]["vm_min_pu"] != handed[1]["grid"]["vm_min_pu"]
    assert math.isnan(handed[2]["pcc"]["vm_pu"]) and handed[2]["grid"]["converged"] is False
    for got, then in zip(handed, kept):  # ... and each step's outputs are still that step's
        assert got.keys() == then.keys() and all(same(got[eid], then[eid]) for eid in got)
