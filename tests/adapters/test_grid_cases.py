"""The grid adapter's solver on every pandapower.networks case up to 3,000 buses: where
pandapower's own ``runpp`` converges, the adapter converges too, to the same bus voltages
within 1e-6 pu (pandapower's reference results are what it checks its own solvers against).

Before the fix, 8 of these (case39, case145, case300, case1354pegase, case1888rte,
case2848rte, case2869pegase, iceland) never converged in the adapter: its first Newton start
came from a DC power flow of the net with its loads zeroed ("all generation, no load").
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandapower as pp
import pandapower.networks as pn
import pytest

from cosim.adapters.grid.pandapower_flow import _KERNELS, PowerFlow

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_grid_kernels import kernels_agree  # noqa: E402

CASES = sorted([n for n in dir(pn) if n.startswith("case")] + ["GBnetwork", "GBreducednetwork", "iceland"])
MAX_BUSES = 3000
# Known to be larger than MAX_BUSES (loading them costs ~40 s, so they are named, not measured,
# at collection). Any case pandapower adds later lands in SMALL and is checked for its size.
LARGE = {"case3120sp", "case6470rte", "case6495rte", "case6515rte", "case9241pegase"}
SMALL = [n for n in CASES if n not in LARGE]


def _net(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(pn, name)()


def test_the_case_list_is_the_one_the_issue_counted():
    assert len(SMALL) >= 21 and "case39" in SMALL and "case2869pegase" in SMALL


@pytest.mark.parametrize("name", SMALL)
def test_the_adapter_converges_where_runpp_does(name):
    net = _net(name)
    assert len(net.bus) <= MAX_BUSES, f"{name} has {len(net.bus)} buses: add it to LARGE"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pp.runpp(net, numba=False)
    except Exception:  # pandapower itself does not converge (case11_iwamoto, ill-conditioned): nothing to compare
        pytest.skip(f"{name}: pp.runpp does not converge either")
    flow = PowerFlow(_net(name))
    assert flow.solve(flow.p0, flow.q0), f"{name}: the adapter did not converge where runpp does"
    np.testing.assert_allclose(flow.vm_pu, net.res_bus.vm_pu.to_numpy(float), atol=1e-6, equal_nan=True)
    assert flow.p_import_mw == pytest.approx(float(net.res_ext_grid.p_mw.sum()), abs=1e-3)
    if _KERNELS is not None:  # the C forms of the per-step arithmetic: numpy's numbers (test_grid_kernels.py)
        assert kernels_agree(flow, steps=2, seed=len(name), where=name) >= 1, f"{name}: nothing compared"


def _isolated_example():
    """example_multivoltage with a line opened so a bus is cut off (isolated-bus handling)."""
    net = pn.example_multivoltage()
    line = net.line.index[net.line.to_bus == net.line.to_bus.max()][0]
    net.line.loc[line, "in_service"] = False
    return net


def test_the_builder_gives_the_same_model_without_numba_helpers(monkeypatch):
    """The model is built with pandapower's plain-Python forms of its three jitted helpers (no
    numba start-up, ~0.7 s per process): with the jitted ones the matrices, lookups and the solved
    voltages must be the same, bit for bit, on nets with transformers, switches, out-of-service and
    cut-off elements (example_multivoltage has 2- and 3-winding transformers, switches, gens,
    shunts; one line opened cuts a bus off); and the helpers are pandapower's own again afterwards."""
    import contextlib

    import pandapower.auxiliary as aux
    import pandapower.build_branch as build_branch

    from cosim.adapters.grid import pandapower_flow

    originals = (aux.set_elements_oos, aux.set_isolated_buses_oos, build_branch.get_values)
    with pandapower_flow._python_helpers():  # the swap takes effect (a renamed helper would silently keep numba)
        assert (aux.set_elements_oos, aux.set_isolated_buses_oos, build_branch.get_values) == (
            aux._python_set_elements_oos, aux._python_set_isolated_buses_oos, aux._get_values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = PowerFlow(_isolated_example())
        ok_plain = plain.solve(plain.p0, plain.q0)
        assert (aux.set_elements_oos, aux.set_isolated_buses_oos, build_branch.get_values) == originals
        monkeypatch.setattr(pandapower_flow, "_python_helpers", contextlib.nullcontext)
        jitted = PowerFlow(_isolated_example())
        ok_jitted = jitted.solve(jitted.p0, jitted.q0)
    assert ok_plain and ok_jitted
    for attr in ("_inj_bus", "_inj_factor", "_bus_map", "_ref", "_pv", "_pq", "_s_const", "_f", "_t"):
        assert np.array_equal(getattr(plain, attr), getattr(jitted, attr)), attr
    assert (plain._ybus != jitted._ybus).nnz == 0
    assert np.array_equal(plain.vm_pu, jitted.vm_pu, equal_nan=True)
    assert np.array_equal(plain.line_loading_pct, jitted.line_loading_pct, equal_nan=True)
