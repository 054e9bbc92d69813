"""Extending cosim is one file each (docs/development.md): a simulator with power, a KPI (with and
without parameters), a controller and a grid model, each
written into a temporary folder that is only put on the package's search path, are found,
run, accounted, reported and plotted with no other edit; a column role makes a PV trace
read through the signals adapter count as clean generation.
"""

from __future__ import annotations

import json
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


#: the fuel cell again, as an adapter that outgrew one file: a package of the documented shape
STACK = {
    "__init__.py": '''"""A fuel-cell stack (a test adapter in several modules)."""
from cosim.adapters.fuel_stack.params import FuelStackParams
from cosim.adapters.fuel_stack.physics import FuelStack
from cosim.adapters.fuel_stack.sim import FuelStackSim

__all__ = ["FuelStack", "FuelStackParams", "FuelStackSim"]
''',
    "params.py": '''"""What a scenario may say about a stack."""
from pydantic import Field

from cosim.sdk import Params


class FuelStackParams(Params):
    p_max_mw: float = Field(gt=0)
    ramp_mw_per_min: float = Field(default=0.05, gt=0)
''',
    "physics.py": '''"""The stack's output: a ramp up to its rating (plain Python, no mosaik)."""


class FuelStack:
    def __init__(self, params):
        self.p, self.p_mw = params, 0.0

    def step(self, dt_s):
        self.p_mw = min(self.p.p_max_mw, self.p_mw + self.p.ramp_mw_per_min * dt_s / 60.0)
        return self.p_mw
''',
    "sim.py": '''"""A fuel-cell stack: a firm generator ramping to its rating (a test adapter in several modules)."""
from cosim.adapters.fuel_stack.params import FuelStackParams
from cosim.adapters.fuel_stack.physics import FuelStack
from cosim.sdk import SingleModelSim


class FuelStackSim(SingleModelSim):
    MODEL, PARAMS, ROLE, PHYSICS = "FuelStack", FuelStackParams, "fossil_gen", FuelStack
    OUTPUTS = ("p_mw",)

    def advance(self, stack, time_s, inputs):
        return {"p_mw": stack.step(self.step_s)}
''',
}


def test_a_simulator_with_several_modules_is_one_package(site, monkeypatch):
    """An adapter written as a package (params, physics, sim; the face only re-exports) is found by
    its folder's name, has the shape tests/test_layout.py checks, runs, and counts as generation."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_layout import shape_problems

    folder = site / "my_adapters" / "fuel_stack"
    folder.mkdir(parents=True)
    for name, text in STACK.items():
        (folder / name).write_text(text)
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(folder.parent)])
    registry.refresh()
    try:
        assert registry.target("fuel_stack") == "cosim.adapters.fuel_stack:FuelStackSim"
        assert shape_problems(folder, "cosim.adapters.fuel_stack") == []
        (site / "stack.toml").write_text(STACKED)
        result = cosim.run(site / "stack.toml", out_dir=site / "runs")
        assert result.ok, result.reason
        ts = result.timeseries()
        np.testing.assert_allclose(ts["stack.p_mw"], [0.25, 0.4, 0.4, 0.4])  # 0.05 MW/min for 5 min, then its rating
        assert result.kpis["entities"]["stack"]["role"] == "fossil_gen"
    finally:
        for name in [m for m in sys.modules if m.startswith("cosim.adapters.fuel_stack")]:
            sys.modules.pop(name)
        sys.path.remove(str(Path(__file__).resolve().parent))
        monkeypatch.undo()
        registry.refresh()


STACKED = """
[scenario]
name = "stack"
start = 2024-07-15T00:00:00Z
duration_s = 1200
step_s = 300

[sims]
gen = { adapter = "fuel_stack" }

[entities]
stack = { sim = "gen", model = "FuelStack", p_max_mw = 0.4 }
"""


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


PARAM_KPI = '''"""Hours each load ran above a threshold (a test KPI block with parameters)."""
from pydantic import Field

from cosim.errors import Problem
from cosim.kpis._block import Block, KpiParams


class Params(KpiParams):
    """[kpis.load_above]: the threshold and the window it is counted over."""

    threshold_mw: float = Field(default=1.0, gt=0)
    window_h: float = Field(default=1.0, gt=0)


def check(params, ctx):
    """What the model alone cannot see: the window against the run's length."""
    if ctx.duration_s is not None and params.window_h * 3600 > ctx.duration_s:
        return params, [Problem(f"{ctx.where}.window_h", f"longer than the run ({ctx.duration_s / 3600:g} h); "
                                f"give {ctx.duration_s / 3600:g} or less", params.window_h)]
    return params, []


def _columns(columns, roles):
    return roles.power_columns("load", columns)


def _compute(inp):
    params = inp.params["load_above"]
    out = {}
    for column in inp.roles.power_columns("load", list(inp.ts.columns)):
        above = inp.ts[column] > params["threshold_mw"]
        out[column] = {"above_h": float(above.sum() * inp.dt_h), "threshold_mw": params["threshold_mw"]}
    return {"load_above": out} if out else {}


BLOCK = Block("load_above", "Hours above a threshold", 91, _columns, _compute, params=Params, check=check)
'''

PARAM_SCENARIO = """
[scenario]
name = "threshold"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 300

[sims]
site = { adapter = "signals", file = "site.csv", columns = { p_load_mw = "load" } }

[entities]
trace = { sim = "site", model = "Series", roles = { p_load_mw = "load" } }

[kpis.load_above]
threshold_mw = 1.2
"""


@pytest.fixture
def site(tmp_path):
    """A folder with a load trace: 0.5, 1.5, 2.0, 0.8 MW over four half hours."""
    index = pd.date_range("2024-07-15T00:00Z", periods=4, freq="30min")
    pd.DataFrame({"time_utc": [t.isoformat() for t in index],
                  "load": [0.5, 1.5, 2.0, 0.8]}).to_csv(tmp_path / "site.csv", index=False)
    return tmp_path


@pytest.fixture
def param_kpi(site, monkeypatch):
    """A KPI block with a parameter: one file in a folder of its own on the KPI search path."""
    kpi_dir = site / "my_kpis"
    kpi_dir.mkdir()
    (kpi_dir / "load_above.py").write_text(PARAM_KPI)
    monkeypatch.setattr(kpis, "__path__", [*kpis.__path__, str(kpi_dir)])
    kpis.refresh()
    yield site
    sys.modules.pop("cosim.kpis.load_above", None)
    monkeypatch.undo()
    kpis.refresh()


def test_a_new_kpi_with_a_parameter_is_one_file(param_kpi):
    """The scenario's [kpis.load_above] reaches the new block (validated by the block's own model),
    and the run's kpis.json holds the value counted against it."""
    (param_kpi / "threshold.toml").write_text(PARAM_SCENARIO)
    scn = cosim.load_scenario(param_kpi / "threshold.toml")
    assert scn.kpis.load_above.threshold_mw == 1.2 and scn.kpis.load_above.window_h == 1.0
    result = cosim.run(param_kpi / "threshold.toml", out_dir=param_kpi / "runs")
    assert result.ok, result.reason
    ts = result.timeseries()
    load = ts["trace.p_load_mw"]
    expected_h = float((load > 1.2).sum() * 300 / 3600)
    assert 0 < expected_h < 2  # the trace is above 1.2 MW part of the time, not all of it
    written = json.loads((result.run_dir / "kpis.json").read_text())
    entry = written["load_above"]["trace.p_load_mw"]
    assert entry == {"above_h": pytest.approx(expected_h), "threshold_mw": 1.2}
    assert result.metadata["kpi_params"]["load_above"] == {"threshold_mw": 1.2, "window_h": 1.0}


@pytest.mark.parametrize("table, message", [
    ("threshold_mw = -1.0", "kpis.load_above.threshold_mw = -1.0: "),
    ('threshold_mw = "1.2"', "kpis.load_above.threshold_mw = '1.2': "),
    ("threshold = 1.2", "kpis.load_above.threshold: unknown key; allowed: threshold_mw, window_h"),
    ("window_h = 5.0", "kpis.load_above.window_h = 5.0: longer than the run (2 h); give 2 or less"),
])
def test_a_bad_parameter_of_the_new_kpi_is_one_message(param_kpi, table, message):
    """Each mistake in the block's table is one line naming the key, the value and the fix."""
    (param_kpi / "threshold.toml").write_text(PARAM_SCENARIO.replace("threshold_mw = 1.2", table))
    with pytest.raises(cosim.ScenarioError) as err:
        cosim.load_scenario(param_kpi / "threshold.toml")
    lines = str(err.value).splitlines()
    assert len(lines) == 2 and "1 problem" in lines[0], lines
    assert message in lines[1], lines[1]


CONTROLLER = '''"""Peak cap: discharge a battery by whatever the load draws above a cap (a test controller)."""
from pydantic import Field

from cosim.sdk import Params, SingleModelSim


class PeakCapParams(Params):
    cap_mw: float = Field(gt=0)


class PeakCap:
    def __init__(self, params):
        self.cap_mw = params.cap_mw


class PeakCapSim(SingleModelSim):
    MODEL, PARAMS, ROLE, PHYSICS = "PeakCap", PeakCapParams, "controller", PeakCap
    INPUTS, OUTPUTS = ("p_load_mw",), ("p_set_mw",)
    EXAMPLE = {"models": {"PeakCap": {"cap_mw": 1.0}}}

    def advance(self, cap, time_s, inputs):
        load = inputs.get("p_load_mw")
        return {"p_set_mw": 0.0 if load is None else -max(float(load) - cap.cap_mw, 0.0)}
'''

CONTROLLED = """
[scenario]
name = "capped"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 300

[sims]
site = { adapter = "signals", file = "site.csv", columns = { p_load_mw = "load" } }
ctl = { adapter = "peak_cap" }
store = { adapter = "battery" }

[entities]
trace = { sim = "site", model = "Series", roles = { p_load_mw = "load" } }
cap = { sim = "ctl", model = "PeakCap", cap_mw = 1.2 }
bess = { sim = "store", model = "Battery", e_capacity_mwh = 4.0, p_charge_max_mw = 2.0, p_discharge_max_mw = 2.0 }

[[connect]]
src = "trace"
dst = "cap"
attrs = ["p_load_mw"]

[[connect]]
src = "cap"
dst = "bess"
attrs = ["p_set_mw"]
"""


def test_a_new_controller_is_one_file(site, monkeypatch):
    """A controller written into a folder on the controllers' search path is found by name, runs
    between a measurement and a battery, and the battery follows its setpoints."""
    from cosim.adapters import controllers

    folder = site / "my_controllers"
    folder.mkdir()
    (folder / "peak_cap.py").write_text(CONTROLLER)
    monkeypatch.setattr(controllers, "__path__", [*controllers.__path__, str(folder)])
    registry.refresh()
    try:
        assert "peak_cap" in registry.available()
        (site / "capped.toml").write_text(CONTROLLED)
        result = cosim.run(site / "capped.toml", out_dir=site / "runs")
        assert result.ok, result.reason
        ts = result.timeseries()
        over = (ts["trace.p_load_mw"] - 1.2).clip(lower=0)
        assert over.max() > 0  # the trace does exceed the cap
        np.testing.assert_allclose(ts["cap.p_set_mw"], -over, atol=1e-9)
        np.testing.assert_allclose(ts["bess.p_mw"], ts["cap.p_set_mw"], atol=1e-9)  # well within its limits
        assert result.folder.roles().of("cap") == "controller"
    finally:
        sys.modules.pop("cosim.adapters.controllers.peak_cap", None)
        registry.refresh()


GRID_MODEL = '''"""A two-bus feeder: a 20 kV source and 5 km of cable to one load bus (a test grid model)."""
import pandapower as pp


def build():
    net = pp.create_empty_network()
    source = pp.create_bus(net, vn_kv=20.0, name="source")
    load = pp.create_bus(net, vn_kv=20.0, name="b2")
    pp.create_ext_grid(net, source, vm_pu=1.0)
    pp.create_line(net, source, load, length_km=5.0, std_type="NA2XS2Y 1x240 RM/25 12/20 kV", name="cable")
    return net
'''

ON_THE_GRID = """
[scenario]
name = "feeder"
start = 2024-07-15T00:00:00Z
duration_s = 7200
step_s = 300

[sims]
site = { adapter = "signals", file = "site.csv", columns = { p_load_mw = "load" } }
grid = { adapter = "grid", network = "two_bus" }

[entities]
trace = { sim = "site", model = "Series" }
pcc = { sim = "grid", model = "Load", bus = "b2" }
feeder = { sim = "grid", model = "Grid" }

[[connect]]
src = "trace"
dst = "pcc"
attrs = [["p_load_mw", "p_mw"]]
"""


def test_a_new_grid_model_is_one_file(site, monkeypatch):
    """A network written into a folder on the grid models' search path is found by name and solved
    each step: the slack imports the load plus the line's losses (energy balance)."""
    from cosim import grid_models

    folder = site / "my_grids"
    folder.mkdir()
    (folder / "two_bus.py").write_text(GRID_MODEL)
    monkeypatch.setattr(grid_models, "__path__", [*grid_models.__path__, str(folder)])
    grid_models.catalogue.cache_clear()
    try:
        assert grid_models.catalogue()["two_bus"].startswith("A two-bus feeder")
        (site / "feeder.toml").write_text(ON_THE_GRID)
        result = cosim.run(site / "feeder.toml", out_dir=site / "runs")
        assert result.ok, result.reason
        ts = result.timeseries()
        assert (ts["feeder.losses_mw"] > 0).all()
        np.testing.assert_allclose(ts["feeder.p_import_mw"], ts["trace.p_load_mw"] + ts["feeder.losses_mw"],
                                   rtol=1e-6)
        assert (ts["pcc.vm_pu"] < 1.0).all()  # the cable drops the voltage towards the load
        assert result.kpis["feeder"]["import_mwh"] == pytest.approx(ts["feeder.p_import_mw"].sum() * 300 / 3600)
    finally:
        sys.modules.pop("cosim.grid_models.two_bus", None)
        grid_models.catalogue.cache_clear()
