"""The pandapower engine's per-step arithmetic in C (``adapters/grid/_kernels.c``, built by ``make
build``) gives the numpy forms' numbers bit for bit: the bus injections, V from the solver's
magnitudes and angles, bus voltages, line and trafo loadings, losses and the slack's import.

Checked on every pandapower.networks case up to 3,000 buses (in test_grid_cases.py, on the flow
it builds there: :func:`kernels_agree`), the catalogue's pandapower networks (ieee33, cigre_mv), a
net with an isolated bus and one with a line switched out mid-run (the model rebuilt), over solves
with injections moved at random between them. Where the library is not built the numpy forms run
alone and the comparison is skipped (it fails under COSIM_REQUIRE_C_PARTS: make test builds it).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pandapower.networks as pn
import pytest
from c_part_marks import needs_c_part

from cosim import grid_models
from cosim.adapters.grid import pandapower_flow as G
from cosim.sdk import CPartWarning

pytestmark = needs_c_part(G._KERNELS is not None, "adapters/grid/_kernels.so")
RESULTS = ("vm_pu", "line_loading_pct", "trafo_loading_pct", "_V", "_sbus")
TOTALS = ("losses_mw", "p_import_mw", "q_import_mvar")


def _results(flow) -> dict:
    return {**{a: getattr(flow, a).copy() for a in RESULTS}, **{a: getattr(flow, a) for a in TOTALS}}


def _both(flow, p, q, where: str) -> bool:
    """Solve from the same start twice, through the C forms and through numpy; assert the same bits."""
    if flow._stale:
        flow._build()  # (the kernels are made with the model)
    start = flow._V.copy()
    assert flow._kernels is not None and flow.use_kernels, where
    ok = flow.solve(p, q)
    fast = _results(flow) if ok else None
    flow._V, flow.use_kernels = start, False
    try:
        assert flow.solve({k: v.copy() for k, v in p.items()}, {k: v.copy() for k, v in q.items()}) == ok, where
    finally:
        flow.use_kernels = True
    if ok:
        plain = _results(flow)
        for attr in RESULTS:
            a, b = fast[attr], plain[attr]
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), f"{where}: {attr} differs"
        for attr in TOTALS:
            a, b = fast[attr], plain[attr]
            assert a == b or (a != a and b != b), f"{where}: {attr} {a!r} != {b!r}"
    return ok


def kernels_agree(flow, steps: int, seed: int, where: str) -> int:
    """Solve ``steps`` random injections both ways; the number that converged."""
    rng = np.random.default_rng(seed)
    converged = 0
    for k in range(steps):
        scale = 1.0 + 0.2 * rng.standard_normal()
        p = {kind: flow.p0[kind] * scale * (1 + 0.05 * rng.standard_normal(len(flow.p0[kind]))) for kind in G.KINDS}
        q = {kind: flow.q0[kind] * scale for kind in G.KINDS}
        converged += _both(flow, p, q, f"{where}, solve {k}")
    return converged


@pytest.mark.parametrize("name", ["ieee33", "cigre_mv"])
def test_the_catalogue_networks(name):
    assert kernels_agree(G.PowerFlow(grid_models.load_network(name)), steps=20, seed=3, where=name) >= 18


def test_an_isolated_bus_and_a_line_switched_out_mid_run():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_grid_cases import _isolated_example

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nets = [_isolated_example(), pn.example_multivoltage()]
    assert kernels_agree(G.PowerFlow(nets[0]), steps=3, seed=5, where="isolated") == 3
    flow = G.PowerFlow(nets[1])
    kernels_agree(flow, steps=2, seed=6, where="multivoltage")
    before = flow._kernels
    flow.set_line_in_service(0, False)  # the model is rebuilt at the next solve, its kernels too
    assert kernels_agree(flow, steps=3, seed=7, where="a line out") == 3 and flow._kernels is not before
    before = flow._kernels
    flow.attach("load", flow.net.bus.index[3], 0.2, 0.05, name="late")  # more elements: kernels rebuilt for them
    assert kernels_agree(flow, steps=3, seed=8, where="an element attached") == 3 and flow._kernels is not before
    assert len(flow._kernels.p_all) == sum(len(v) for v in flow.p0.values())


def test_a_library_of_another_source_or_broken_is_not_used(tmp_path):
    """An edited C source is not trusted until ``make build`` rebuilt it (whatever the files' times), and a
    file that is no library is not loaded (no error): the numpy forms are then in charge."""
    lib, source = tmp_path / "_kernels.so", tmp_path / "_kernels.c"
    shutil.copy(Path(G.__file__).with_name("_kernels.so"), lib)
    shutil.copy(Path(G.__file__).with_name("_kernels.c"), source)
    assert G._load_kernels(lib) is not None
    source.write_text(source.read_text() + "/* edited */\n")
    os.utime(lib, (source.stat().st_mtime + 10, source.stat().st_mtime + 10))  # the library newer: not enough
    assert G._load_kernels(lib) is None
    broken = tmp_path / "broken" / "_kernels.so"  # (a loaded library's file must not be overwritten)
    broken.parent.mkdir()
    broken.write_bytes(b"not a shared library")
    with pytest.warns(CPartWarning, match="not a library"):  # (once per file and process, naming make build)
        assert G._load_kernels(broken) is None


def _same(a, b) -> bool:
    """Bit for bit: equal numbers of one type, NaN with NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return (a == b and np.signbit(a) == np.signbit(b)) or (a != a and b != b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("network, bus, params", [
    ("ieee33", "18", {"exclude_buses": ["1", "2"], "v_low_pu": 0.93, "v_high_pu": 0.999}),
    ("cigre_mv", "Bus 11", {"line_trips": [[120, 120, "Line 10-11"]]}),
])
def test_the_adapter_outputs_are_numpys_with_the_kernels(network, bus, params):
    """The Grid's summary (extremes, all-bus band statistics, counts of dead buses), its per-element
    values and each element's outputs, computed in C with the solve, are the numpy forms' to the bit:
    two adapters, one with the kernels and one without, stepped through the same inputs, among them
    an unsolvable load, a line opened (buses cut off: NaN voltages) and closed again."""
    from cosim.adapters.grid import GridSim

    sims = []
    for kernels in (True, False):
        sim = GridSim()
        sim.init("grid", 1.0, start_utc="2024-07-15T12:00:00Z", step_s=60, duration_s=3600, seed=1, network=network,
                 **params)
        sim.create(1, "Grid", eid="grid")
        sim.create(1, "Load", eid="pcc", bus=bus, p_mw=1.0, q_mvar=0.1)
        sim.create(1, "Sgen", eid="pv", bus=bus, p_mw=0.2)
        sim.flow.use_kernels = kernels
        sims.append(sim)
    rng = np.random.default_rng(11)
    line = f"line_{sims[0].flow.ids['line'][1]}_in_service"  # feeds the element's bus
    for k in range(12):
        inputs = {"pcc": {"p_mw": {"x": 0.5 + rng.random()}, "q_mvar": {"x": 0.1 * rng.random()}},
                  "pv": {"p_mw": {"x": 0.3 * rng.random()}}}
        if k == 4:
            inputs["pcc"]["p_mw"] = {"x": 80.0}  # no solution
        if k in (6, 9):
            inputs["grid"] = {line: {"x": 0.0 if k == 6 else 1.0}}
        data = []
        for sim in sims:
            sim.step(k * 60, inputs, 10**9)
            data.append(sim.get_data({eid: list(values) for eid, values in sim.out.items()}))
        fast, plain = data
        assert fast.keys() == plain.keys()
        for eid in fast:
            assert fast[eid].keys() == plain[eid].keys(), eid
            differ = [a for a in fast[eid] if not _same(fast[eid][a], plain[eid][a])]
            assert not differ, f"step {k}, {eid}: {differ[:5]}"
    assert sims[0].flow._kernels is not None and sims[0].flow.summary is not None
    assert sims[0].out["grid"]["n_nonconverged"] == 1
