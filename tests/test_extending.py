"""Extending cosim is one file each (README "Extending"): a simulator with power and a KPI, each
written into a temporary folder that is only put on the package's search path, are found,
run, accounted, reported and plotted with no other edit; a column role makes a PV trace
read through the signals adapter count as clean generation.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cosim
from cosim import adapters, kpis, registry
from cosim.report import power_parts, render

GENERATOR = '''"""A fuel cell: a firm generator at a fixed output with a start-up ramp (a test adapter)."""
from cosim.sdk import Params, SingleModelSim


class FuelCellParams(Params):
    p_max_mw: float
    ramp_mw_per_min: float = 0.1


class FuelCell:
    def __init__(self, params):
        self.p, self.p_mw = params, 0.0

    def step(self, dt_s):
        self.p_mw = min(self.p.p_max_mw, self.p_mw + self.p.ramp_mw_per_min * dt_s / 60.0)
        return self.p_mw


class FuelCellSim(SingleModelSim):
    MODEL, PARAMS, ROLE, PHYSICS = "FuelCell", FuelCellParams, "fossil_gen", FuelCell
    OUTPUTS = ("p_mw",)
    EXAMPLE = {"models": {"FuelCell": {"p_max_mw": 1.0}}}

    def advance(self, cell, time_s, inputs):
        return {"p_mw": cell.step(self.step_s)}
'''

KPI = '''"""Hours each fossil generator ran above 10 % of its peak (a test KPI block)."""
from cosim.kpis._block import Block


def _columns(columns, roles):
    return roles.power_columns("fossil_gen", columns)


def _compute(inp):
    out = {}
    for column in roles_columns(inp):
        p = inp.ts[column]
        out[column.partition(".")[0]] = {"running_h": float((p > 0.1 * p.max()).sum() * inp.dt_h)}
    return {"fossil_running": out} if out else {}


def roles_columns(inp):
    return inp.roles.power_columns("fossil_gen", list(inp.ts.columns))


BLOCK = Block("fossil_running", "Fossil running hours", 90, _columns, _compute, headline=("running_h",))
'''

SCENARIO = """
[scenario]
name = "microgrid"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 300

[sims]
site = { adapter = "signals", file = "site.csv", columns = { p_load_mw = "load", p_pv_mw = "pv" } }
cell = { adapter = "fuel_cell" }
store = { adapter = "battery" }

[entities]
trace = { sim = "site", model = "Series", roles = { p_load_mw = "load", p_pv_mw = "clean_gen" } }
fc = { sim = "cell", model = "FuelCell", p_max_mw = 0.5 }

[entities.bess]
sim = "store"
model = "Battery"
e_capacity_mwh = 1.0
p_charge_max_mw = 0.4
p_discharge_max_mw = 0.4
mode = "net_load_target"

[[connect]]
src = "trace"
dst = "bess"
attrs = ["p_load_mw", ["p_pv_mw", "p_gen_mw"]]
"""


@pytest.fixture
def extended(tmp_path, monkeypatch):
    """The generator and the KPI, each one file in a folder of its own on the search path."""
    adapter_dir, kpi_dir = tmp_path / "my_adapters", tmp_path / "my_kpis"
    adapter_dir.mkdir()
    kpi_dir.mkdir()
    (adapter_dir / "fuel_cell.py").write_text(GENERATOR)
    (kpi_dir / "fossil_running.py").write_text(KPI)
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(adapter_dir)])
    monkeypatch.setattr(kpis, "__path__", [*kpis.__path__, str(kpi_dir)])
    registry.refresh()
    kpis.refresh()
    yield tmp_path
    for name in ("cosim.adapters.fuel_cell", "cosim.kpis.fossil_running"):
        sys.modules.pop(name, None)
    monkeypatch.undo()
    registry.refresh()
    kpis.refresh()


def _site(folder: Path) -> None:
    """Load 1.0 MW; PV 0, 0.3, 0.9, 1.2 MW over four half hours (the battery stores the surplus)."""
    index = pd.date_range("2024-07-15T00:00Z", periods=4, freq="30min")
    pd.DataFrame({"time_utc": [t.isoformat() for t in index], "load": [1.0] * 4,
                  "pv": [0.0, 0.3, 0.9, 1.2]}).to_csv(folder / "site.csv", index=False)


def test_a_new_generator_and_a_new_kpi_are_counted_everywhere(extended):
    _site(extended)
    (extended / "microgrid.toml").write_text(SCENARIO)
    assert "fuel_cell" in registry.available()
    result = cosim.run(extended / "microgrid.toml", out_dir=extended / "runs")
    assert result.ok, result.reason
    ts = result.timeseries()
    dt_h = 300 / 3600
    # roles of the run: the new model's own, and the trace's columns
    roles = result.folder.roles()
    assert roles.of("fc") == "fossil_gen" and roles.columns == {"trace.p_load_mw": "load",
                                                                "trace.p_pv_mw": "clean_gen"}
    # accounting: site = load + storage - clean - other, step by step (hand check)
    net = ts["trace.p_load_mw"] + ts["bess.p_mw"] - ts["trace.p_pv_mw"] - ts["fc.p_mw"]
    site = result.kpis["accounting"]["site"]
    assert site["other_generation_mwh"] == pytest.approx(ts["fc.p_mw"].sum() * dt_h)
    assert site["clean_generation_mwh"] == pytest.approx(ts["trace.p_pv_mw"].sum() * dt_h)
    assert site["import_mwh"] == pytest.approx(net.clip(lower=0).sum() * dt_h)
    assert site["export_mwh"] == pytest.approx((-net).clip(lower=0).sum() * dt_h)
    assert site["export_mwh"] > 0  # the PV surplus beyond the battery is exported, not lost
    # the energy block lists it with its role; the new KPI block ran and is indexed
    assert result.kpis["entities"]["fc"]["role"] == "fossil_gen"
    assert result.kpis["fossil_running"]["fc"]["running_h"] == pytest.approx(
        ((ts["fc.p_mw"] > 0.05).sum()) * dt_h)
    assert result.metadata["kpi_blocks"]["fossil_running"]["keys"] == ["fossil_running"]
    # the power stack draws the generator, the PV column and the load column
    parts = power_parts(ts, roles)
    assert "fc fossil_gen" in parts["supply"] and "trace clean_gen" in parts["supply"]
    assert "trace load" in parts["demand"] and "bess charging" in parts["demand"]
    page = render(result.run_dir)
    assert "data-figure='power'" in page and "Fossil running hours" in page


def test_without_the_column_roles_the_trace_is_only_a_signal(extended):
    """The same microgrid with the roles removed: nothing of the trace is counted (the bug the
    roles fix: a PV + battery microgrid once reported import 118 kWh, export 0)."""
    _site(extended)
    (extended / "microgrid.toml").write_text(SCENARIO.replace(
        ', roles = { p_load_mw = "load", p_pv_mw = "clean_gen" }', ""))
    result = cosim.run(extended / "microgrid.toml", out_dir=extended / "runs")
    assert result.ok, result.reason
    site = result.kpis["accounting"]["site"]
    assert site["clean_generation_mwh"] == 0 and site["load_mwh"] == 0
    assert site["columns"]["loads"] == [] and site["columns"]["clean_generation"] == []


def test_a_column_role_on_a_non_power_column_is_refused(extended):
    _site(extended)
    (extended / "microgrid.toml").write_text(SCENARIO.replace('p_pv_mw = "clean_gen"', 'p_pv_mw = "sunshine"')
                                             .replace('p_load_mw = "load" }', 'p_load_mw = "load", x_c = "load" }'))
    with pytest.raises(cosim.ScenarioError) as err:
        cosim.load_scenario(extended / "microgrid.toml")
    text = str(err.value)
    assert "entities.trace.roles" in text and "unknown role" in text


def test_an_entity_role_needs_that_roles_power(extended):
    _site(extended)
    (extended / "microgrid.toml").write_text(SCENARIO.replace(
        'trace = { sim = "site", model = "Series", roles = { p_load_mw = "load", p_pv_mw = "clean_gen" } }',
        'trace = { sim = "site", model = "Series", role = "storage" }'))
    with pytest.raises(cosim.ScenarioError, match=r"entities.trace.role = 'storage': a storage entity reports "
                                                  r"p_mw; trace \(Series\) does not"):
        cosim.load_scenario(extended / "microgrid.toml")


def test_kpi_block_order_and_discovery():
    """Every shipped block is found by scanning, in kpis.json order; none is listed by hand."""
    names = [b.name for b in kpis.blocks()]
    assert names[:8] == ["energy", "grid", "points_of_connection", "carbon", "datacenter", "facility", "dr",
                         "accounting"]
    assert len(set(names)) == len(names)
    assert np.all(np.diff([b.order for b in kpis.blocks()]) >= 0)
