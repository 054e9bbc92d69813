"""A grid that does not converge with ``on_nonconvergence = "fail"`` raises the typed
:class:`cosim.errors.PowerFlowNotConverged` on every grid engine (what hosting capacity reacts to),
naming the sim and the time."""

from __future__ import annotations

import pytest

from cosim.adapters.grid import GridSim
from cosim.errors import PowerFlowNotConverged
from cosim.sdk import PowerFlowNotConverged as FromSdk

START = "2024-07-15T12:00:00+00:00"

#: engine, network, bus, and a load far beyond what the feeder can carry [MW]
CASES = [("pandapower", "ieee33", "18", 500.0), ("opendss", "ieee13", "675", 500.0)]


@pytest.mark.parametrize(("engine", "network", "bus", "p_mw"), CASES)
def test_a_diverging_grid_raises_the_typed_failure(engine, network, bus, p_mw):
    sim = GridSim()
    sim.init("grid", 1.0, start_utc=START, step_s=60, duration_s=3600, seed=1, network=network, engine=engine,
             on_nonconvergence="fail")
    sim.create(1, "Grid", eid="feeder")
    sim.create(1, "Load", eid="site", bus=bus, p_mw=p_mw)
    with pytest.raises(PowerFlowNotConverged, match=r"grid sim grid: power flow did not converge at 2024-07-15T12:00"):
        sim.step(0, {}, 10**9)
    assert FromSdk is PowerFlowNotConverged and issubclass(PowerFlowNotConverged, RuntimeError)


@pytest.mark.parametrize("given, read", [("continue_nan", "continue_nan"), ("hold", "continue_nan"),
                                         ("fail", "fail")])
def test_on_nonconvergence_names(given, read):
    """``"continue_nan"`` says what an unsolved step does (NaN results, the run goes on); ``"hold"``,
    its older name, is accepted and read as it; anything else is refused naming the choices."""
    from cosim.adapters.grid import SimParams

    assert SimParams(network="ieee33", on_nonconvergence=given).on_nonconvergence == read
    assert SimParams(network="ieee33").on_nonconvergence == "continue_nan"
    with pytest.raises(ValueError, match="continue_nan"):
        SimParams(network="ieee33", on_nonconvergence="ignore")
