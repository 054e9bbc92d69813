"""A hosting-capacity study file: one ``[hosting]`` section naming the scenario, the load and the search.

``cosim hosting-capacity STUDY.toml`` reads it (the scenario file itself stays a plain scenario; one is shipped:
``scenarios/hosting/ieee8500_m1166366.toml``);
an option given on the command line wins over the file's::

    [hosting]
    scenario = "hc8500.toml"          # relative to this file
    load = "pcc"                      # the entity sized
    buses = ["m1166366"]              # where the load goes (default: every bus where it fits)
    voltage_buses = "primary"         # "all", "primary", a list of bus names, or { kv_min = 1.0, kv_max = 35.0 }
    v_low_pu = 0.92
    v_high_pu = 1.06
    loading_max_pct = 1000.0
    max_mw = 7.2                      # also min_mw, tol_mw, step_mw [MW]
    scan_above = true                 # default: where the grid's own controls act
    # param = "peak_mw"; bus_entity = "pcc"
    [hosting.set]                     # overrides for every run
    "scenario.duration_s" = 3600
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from cosim.errors import Problem, ScenarioError
from cosim.scenario import read_toml
from cosim.studies.hosting_buses import VoltageBuses

NUMBERS = ("v_low_pu", "v_high_pu", "loading_max_pct", "min_mw", "max_mw", "tol_mw", "step_mw")
TEXTS = ("load", "param", "bus_entity")
KEYS = ("scenario", *TEXTS, "buses", "voltage_buses", *NUMBERS, "scan_above", "set")


def is_hosting_file(path: Path) -> bool:
    """Whether ``path`` is a TOML file with a ``[hosting]`` section (False when unreadable: the
    scenario loader names the problem)."""
    try:
        return "hosting" in read_toml(path)
    except ScenarioError:
        return False


def load_hosting_file(path: str | Path) -> dict[str, Any]:
    """The study's settings, keyed as :func:`~cosim.studies.hosting.hosting_capacity`'s arguments
    (``scenario`` made absolute, ``set`` as ``overrides``, ``voltage_buses`` parsed).

    Raises:
        ScenarioError: every problem of the file at once.
    """
    path = Path(path)
    raw = read_toml(path)
    problems = [Problem(key, "unknown section; a hosting study file has one [hosting] section")
                for key in raw if key != "hosting"]
    body = raw.get("hosting")
    if not isinstance(body, dict):
        raise ScenarioError(path, problems + [Problem("hosting", "section [hosting] is missing")])
    problems += [Problem(f"hosting.{k}", f"unknown key; allowed: {', '.join(KEYS)}") for k in body if k not in KEYS]
    spec: dict[str, Any] = {}
    if not isinstance(body.get("scenario"), str):
        problems.append(Problem("hosting.scenario", "give the scenario file, relative to this file",
                                body.get("scenario")))
    else:
        spec["scenario"] = path.resolve().parent / body["scenario"]
    for key in TEXTS:
        if key in body and not (isinstance(body[key], str) and body[key]):
            problems.append(Problem(f"hosting.{key}", "give an entity or param name", body[key]))
        elif key in body:
            spec[key] = body[key]
    for key in NUMBERS:
        value = body.get(key)
        if key in body and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                            or value <= 0):
            problems.append(Problem(f"hosting.{key}", "give a positive number", value))
        elif key in body:
            spec[key] = float(value)
    if "buses" in body:
        buses = body["buses"]
        if not isinstance(buses, list) or not buses or not all(isinstance(b, (str, int)) and not isinstance(b, bool)
                                                                for b in buses):
            problems.append(Problem("hosting.buses", 'give a list of bus names, e.g. ["m1166366"]', buses))
        else:
            spec["buses"] = buses
    if "scan_above" in body:
        if not isinstance(body["scan_above"], bool):
            problems.append(Problem("hosting.scan_above", "give true or false", body["scan_above"]))
        else:
            spec["scan_above"] = body["scan_above"]
    if "voltage_buses" in body:
        try:
            spec["voltage_buses"] = VoltageBuses.parse(body["voltage_buses"], "hosting.voltage_buses")
        except ScenarioError as exc:
            problems += exc.problems
    overrides = body.get("set", {})
    if not isinstance(overrides, dict):
        problems.append(Problem("hosting.set", 'give a table of dotted keys, e.g. [hosting.set] '
                                               '"scenario.duration_s" = 3600', overrides))
    elif overrides:
        spec["overrides"] = dict(overrides)
    if problems:
        raise ScenarioError(path, problems)
    return spec
