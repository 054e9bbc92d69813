"""Releasing an input held from outside (``Session.set(eid, attr, None)``) gives the entity back
exactly what it would have had without the hold, from the next step on.

A released run is compared bit for bit with a run that never set the input: for an entity
without memory every output after the release equals the never-set run's; for one with state
(a battery's SOC, an FMU's temperatures) the input the model reads after the release does.
"""

from __future__ import annotations

import math

import pytest

from cosim.run.session import Session

GRID_EXISTING_LOAD = """
[scenario]
name = "existing_load"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60

[sims.grid]
adapter = "grid"
network = "ieee33"

[entities.l18]                    # the network's own load at bus 18 (90 kW), no p_mw of its own
sim = "grid"
model = "Load"
element = "load_18"

[entities.feeder]
sim = "grid"
model = "Grid"
"""


def _same(a: float, b: float) -> bool:
    """Bit for bit (NaN equals NaN)."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_released_existing_grid_element_goes_back_to_its_table(tmp_path):
    """An existing load with no profile and no ``p_mw`` of its own kept the last value set after its
    release: the per-step injection buffers keep whatever was last written to them."""
    path = tmp_path / "existing_load.toml"
    path.write_text(GRID_EXISTING_LOAD)
    with Session(path, record=False) as s, Session(path, record=False) as never:
        s.set("l18", "p_mw", 0.5)
        s.set("l18", "q_mvar", 0.2)
        s.step(), never.step()
        assert s.get("l18.p_mw") == 0.5
        s.set("l18", "p_mw", None)
        s.set("l18", "q_mvar", None)
        s.step(), never.step()
        assert s.get("l18.p_mw") == never.get("l18.p_mw") == pytest.approx(0.09)
        assert s.get("l18.q_mvar") == never.get("l18.q_mvar")
        # the same solve warm-started from other voltages: equal within the Newton tolerance
        assert s.get("feeder.p_import_mw") == pytest.approx(never.get("feeder.p_import_mw"), abs=1e-6)
