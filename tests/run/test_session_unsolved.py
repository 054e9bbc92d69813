"""A grid driven from a ``cosim.Session`` past what it can solve, and cut from its source, on each
grid engine: what ``Session.get`` serves, what the parquet keeps, the KPIs and the run's status.

Scenario (a feeder with one element the test drives)::

    Session.set(pcc.p_mw) --> pcc (Load at a far bus) --> feeder (Grid) --> recorder
    Session.set(feeder.line_<id>_in_service) ----------------^

Steps (60 s each): 0-1 solved, 2 unsolved (a load without a solution), 3-4 solved, 5-6 the element's
line open (de-energised), 7-9 closed again.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from cosim.run.session import Session

SCENARIO = """
[scenario]
name = "feeder_{engine}"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60

[sims.grid]
adapter = "grid"
network = "{network}"
{sim_extra}

[entities.feeder]
sim = "grid"
model = "Grid"

[entities.pcc]
sim = "grid"
model = "Load"
bus = "{bus}"
p_mw = 1.0
{element_extra}
"""

#: engine -> scenario keys, the line feeding the element, a load there without a solution [MW]
ENGINES = {
    "pandapower": ({"network": "ieee33", "bus": "18", "sim_extra": "profiles = false", "element_extra": ""},
                   "line_1_2_in_service", 5.0),
    "opendss": ({"network": "ieee13", "bus": "675", "sim_extra": 'engine = "opendss"\nregulators = "fixed"',
                 "element_extra": "vmin_pu = 0.5"}, "line_671_692_in_service", 30.0),
}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_unsolved_and_deenergised_steps_are_served_and_recorded_as_unknown(engine, tmp_path):
    keys, line, fail_mw = ENGINES[engine]
    path = tmp_path / "feeder.toml"
    path.write_text(SCENARIO.format(engine=engine, **keys))
    with Session(path, out_dir=tmp_path / "runs") as s:
        s.run_until(120)
        solved_vm = s.get("feeder.vm_min_pu")
        s.set("pcc", "p_mw", fail_mw)
        s.step()
        assert s.get("feeder.converged") is False
        assert math.isnan(s.get("feeder.vm_min_pu")) and math.isnan(s.get("feeder.p_import_mw"))
        assert s.get("pcc.p_mw") == fail_mw and math.isnan(s.get("pcc.p_served_mw"))
        s.set("pcc", "p_mw", 1.0)  # back to its own value
        s.run_until(300)
        assert s.get("feeder.vm_min_pu") == pytest.approx(solved_vm, abs=1e-4)
        s.set("feeder", line, 0)
        s.run_until(420)
        assert s.get("feeder.converged") is True and s.get("feeder.n_buses_unsupplied") >= 1
        assert s.get("pcc.p_served_mw") == 0.0 and math.isnan(s.get("pcc.vm_pu")) and s.get("pcc.p_mw") == 1.0
        s.set("feeder", line, 1)
        s.run_until(600)
    result = s.close()
    ts = result.timeseries()
    assert len(ts) == 10
    vm, served = ts["feeder.vm_min_pu"].to_numpy(float), ts["pcc.p_served_mw"].to_numpy(float)
    assert np.isnan(vm[2]) and np.isfinite(np.delete(vm, 2)).all(), "only the unsolved step is unknown"
    assert ts["pcc.p_mw"].iloc[2] == fail_mw and np.isnan(served[2])
    assert (served[5:7] == 0.0).all() and ts["pcc.vm_pu"].iloc[5:7].isna().all()
    assert result.status == "degraded"
    assert "did not converge at 1 of 10 steps" in result.reason and "de-energised for 120 s" in result.reason
    grid = result.kpis["feeder"]
    assert grid["n_nonconverged_steps"] == 1 and grid["vm_min_pu"] is None and grid["import_mwh"] is None
    supply = result.kpis["supply"]["pcc"]
    assert supply["deenergised_s"] is None and supply["n_unsolved_steps"] == 1  # a total with a hole is not a total
    assert supply["over_solved_steps"]["deenergised_s"] == 120.0
    assert supply["over_solved_steps"]["unserved_mwh"] == pytest.approx(2 * 1.0 / 60, rel=1e-3)
    assert result.kpis["supply"]["feeder"]["deenergised_s"] == 120.0
    assert any("de-energised for 120 s" in w for w in result.metadata["warnings"])
