"""Every kind of entity of the catalogue's scenarios (adapter, model, grid engine), each as a scenario
of its own: its sim with its entities, no connections (an input is then its params' or its adapter's own
value); with two cases besides the catalogue and the adapters no catalogue scenario uses, from their
EXAMPLE. The cases of the tests that go over every entity kind (release, settable values)."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from cosim import registry

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "scenarios"

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


def _kinds() -> dict[str, tuple[Path, str]]:
    """One sim per kind of entity of the catalogue (adapter, model, grid engine): ``"<file>.<sim>"``
    -> (scenario file, sim), the first scenario that has the kind."""
    first: dict[tuple[str, str, str], tuple[Path, str]] = {}
    for path in sorted(CATALOGUE.glob("*.toml")):
        raw = tomllib.loads(path.read_text())
        for table in raw.get("entities", {}).values():
            sim = raw["sims"][table["sim"]]
            first.setdefault((sim["adapter"], table["model"], sim.get("engine", "")), (path, table["sim"]))
    return {f"{path.stem}.{sim}": (path, sim) for path, sim in first.values()}


KINDS = _kinds()
GRID_SHUNT = """
[scenario]
name = "shunt"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60

[sims.grid]
adapter = "grid"
network = "ieee33_shunt.json"

[entities.feeder]
sim = "grid"
model = "Grid"
"""

#: besides the catalogue: an existing element of a pandapower network without a power of its own,
#: and a network with a switched shunt (IEEE 33 with one at bus 18, 2 of 3 steps in)
EXTRA = {"existing_load.grid": GRID_EXISTING_LOAD, "shunt.grid": GRID_SHUNT}


#: adapters no catalogue scenario uses, run from their EXAMPLE (live_signal: no input; it asks a server)
EXAMPLES = ["cap_switch", "firm", "poc_events", "storage_droop", "tap_schedule", "wind"]


def _example(name: str, folder: Path, n_steps: int) -> Path:
    """Adapter ``name``'s EXAMPLE (``CosimSim.EXAMPLE``) as a scenario: one entity per model."""
    example = registry.adapter_class(name).EXAMPLE
    tables = {"scenario": {"name": name, "start": dt.datetime(2024, 7, 15, tzinfo=dt.timezone.utc),
                           "duration_s": 60 * n_steps, "step_s": 60},
              "sims.sim": {"adapter": name, **example.get("sim", {})}}
    tables.update({f"entities.{model.lower()}": {"sim": "sim", "model": model, **params}
                   for model, params in example["models"].items()})
    return _write(tables, folder / f"{name}.toml")


def _write(tables: dict[str, dict[str, Any]], path: Path) -> Path:
    lines = []
    for name, table in tables.items():
        lines += [f"[{name}]", *(f"{json.dumps(k)} = {_toml(v)}" for k, v in table.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _shunt_network(folder: Path) -> None:
    import pandapower as pp

    from cosim import grid_models

    net = grid_models.load_network("ieee33")
    pp.create_shunt(net, bus=net.load.bus.iat[-1], q_mvar=-0.1, step=2, max_step=3)
    pp.to_json(net, str(folder / "ieee33_shunt.json"))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def _alone(path: Path, sim: str, folder: Path, n_steps: int) -> Path:
    """Scenario ``path``'s sim ``sim`` with its entities, no connections, for the steps of one test."""
    raw = tomllib.loads(path.read_text())
    scenario = {**raw["scenario"], "duration_s": math.ceil(raw["scenario"]["step_s"] * n_steps)}
    tables = {"scenario": scenario, f"sims.{json.dumps(sim)}": raw["sims"][sim]}
    tables.update({f"entities.{json.dumps(eid)}": t for eid, t in raw["entities"].items() if t["sim"] == sim})
    if not (folder / "data").exists():  # the catalogue's data files, at the paths its scenarios give
        (folder / "data").symlink_to(CATALOGUE / "data")
    return _write(tables, folder / f"{path.stem}_{sim}.toml")


def some_inputs(inputs: list[str]) -> list[str]:
    """Every input, but of a family of per-element ones (a digit in the name: ``line_<id>_in_service``,
    ``bus_<id>_a_vm_pu``) only the first."""
    chosen, families = [], set()
    for attr in sorted(inputs):
        if re.search(r"\d", attr):
            parts = attr.split("_")
            if (family := (parts[0], *parts[-2:])) in families:
                continue
            families.add(family)
        chosen.append(attr)
    return chosen


#: the kinds whose entities take no input from outside (each is checked to have none: a kind that gains one must
#: leave this set and be tested)
NO_INPUTS = {"battery_peak_shaving.tariff", "campus_pv_battery.dr", "campus_pv_battery.facility",
             "campus_pv_battery.weather", "load_loss_event.faults", "openadr_month.adr", "example.tap_schedule"}
CASES = [*sorted(KINDS), *EXTRA, *(f"example.{name}" for name in EXAMPLES)]


def case_scenario(case: str, folder: Path, n_steps: int) -> tuple[Path, str]:
    """Case ``case`` (of :data:`CASES`) as a scenario file of ``n_steps`` steps in ``folder``, and its sim's id."""
    if case.startswith("example."):
        return _example(case.split(".", 1)[1], folder, n_steps), "sim"
    if case in EXTRA:
        _shunt_network(folder)
        path = folder / f"{case}.toml"
        path.write_text(EXTRA[case])
        return path, case.rsplit(".", 1)[1]
    return _alone(*KINDS[case], folder, n_steps), case.rsplit(".", 1)[1]
