"""Releasing an input held from outside (``Session.set(eid, attr, None)``) gives the entity back
exactly what it would have had without the hold, from the next step on.

A released run is compared bit for bit with a run that never set the input. An entity without
memory rejoins the never-set run: every output after the release is the same. An entity with
state (a battery's SOC, an FMU's temperatures, a datacenter's queues, a controller's integrator,
a power flow warm-started from the last voltages and its regulators' taps) keeps the effect of
the held steps, so there the input the model reads after the release is compared: what the
engine hands it, and what an adapter that keeps an input it is not sent holds (an FMU's input
variables, a grid's element powers, line, capacitor, regulator and shunt states, an ANDES load,
a gas turbine's or SMR's target).

Every kind of entity of the catalogue's scenarios (adapter, model, grid engine) is run on its
own (its sim with its entities, no connections: an input is then its params' or its adapter's
own value: ``tests/helpers/catalogue_kinds.py``), and every settable input of it (one per family of
per-element inputs) is set for two steps and released.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from cosim.run.runner import load_scenario
from cosim.run.session import Session, input_bounds, refused_inputs
from cosim.sdk import sum_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from catalogue_kinds import CASES, GRID_EXISTING_LOAD, NO_INPUTS, case_scenario, some_inputs  # noqa: E402

#: adapters whose entities remember (their outputs after a release keep the held steps' effect)
WITH_MEMORY = {"andes_grid", "battery", "carbon_capacity", "datacenter", "firm", "fmu", "frequency", "grid", "ofo",
               "rule_voltage", "smoothing", "voltage_aware"}

BEFORE, HELD, AFTER = 1, 2, 3  # steps before the set, held, after the release


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


# -- every kind of entity of the catalogue ----------------------------------------------------------

def _value(attr: str, low: float, high: float) -> float:
    """A value inside the adapter's bounds, away from the usual defaults."""
    if not (math.isfinite(low) and math.isfinite(high)):
        low, high = 0.0, 1.0
    value = low + 0.3 * (high - low) if low >= 0 else min(high, 0.1)
    if attr.endswith("_pu") and low <= 1.02 <= high:
        value = 1.02
    if attr.endswith(("_count", "_in_service", "_active")) or attr.startswith("n_"):
        value = float(round(value))
    return value


def _held_state(obj: Any, adapter: str, eids: list[str], inputs: dict[str, list[str]]) -> dict[str, Any]:
    """What an adapter that keeps an input it is not sent holds now (its model reads it next step)."""
    if adapter == "fmu":
        held = {}
        for eid in eids:
            inst = obj.entities[eid]
            for attr in inputs[eid]:
                port = obj.iface.ports[attr]
                held[f"{eid}.{attr}"] = list(getattr(inst.fmu, "get" + port.accessor)([port.vr]))
        return held
    if adapter == "andes_grid":
        return {eid: dict(obj.loads[eid]) for eid in eids if eid in obj.loads}
    if adapter == "firm":
        return {eid: obj.units[eid].target_mw for eid in eids}
    if adapter != "grid":
        return {}
    flow = obj.flow
    held = {"lines_out": flow.n_lines_out(), "p_mw": {e: obj.out[e]["p_mw"] for e in obj.attached},
            "q_mvar": {e: obj.out[e]["q_mvar"] for e in obj.attached}}
    if obj.params.engine == "pandapower":
        held["line_in_service"] = [bool(v) for v in flow.net.line["in_service"]]
        held["shunt_step"] = [int(v) for v in flow.net.shunt["step"]] if len(flow.net.shunt) else []
        return held
    dss = flow.dss
    for cap in flow.info.caps:
        dss.Capacitors.Name(cap)
        held[f"cap {cap}"] = list(dss.Capacitors.States())
    for kind, names in (("RegControls", flow.info.regs),
                        ("CapControls", dss.CapControls.AllNames() if dss.CapControls.Count() else [])):
        for name in names:
            getattr(dss, kind).Name(name)
            held[f"{kind} {name}"] = bool(dss.CktElement.Enabled())
    return held


def _run(path: Path, adapter: str, plan: list[list[tuple[str, str, float | None]]]) -> list[dict[str, Any]]:
    """Each step's outputs, inputs handed to the sim's entities and held state, ``plan[k]`` set before step k."""
    rows = []
    with Session(path, record=False) as s:
        eids = list(s.scn.entities)
        obj = s.engine.entity_sim[eids[0]].obj
        handed: dict[str, Any] = {}

        def collapsed(time, inputs, _step=obj.step_collapsed):
            handed["inputs"] = json.loads(json.dumps(inputs, default=repr))
            return _step(time, inputs)

        def mosaik_step(time, inputs, max_advance, _step=obj.step):
            handed["inputs"] = json.loads(json.dumps(sum_inputs(inputs), default=repr))
            return _step(time, inputs, max_advance)

        obj.step_collapsed, obj.step = collapsed, mosaik_step
        names = {eid: s.scn.inputs(eid) for eid in eids}
        for actions in plan:
            for eid, attr, value in actions:
                s.set(eid, attr, value)
            handed["inputs"] = {}
            s.step()
            rows.append({"outputs": s.outputs(), "handed": dict(handed),
                         "held": _held_state(obj, adapter, eids, names)})
    return rows


def _same(a: Any, b: Any) -> bool:
    """Bit for bit (NaN equals NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (math.isnan(a) and math.isnan(b))
    return a == b


def _differences(released: dict[str, Any], never: dict[str, Any]) -> list[str]:
    return [k for k in never if not _same(released.get(k), never[k])]


def test_the_kinds_without_inputs_are_kinds_of_the_catalogue():
    assert NO_INPUTS <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_a_released_input_rejoins_the_never_set_run(case, tmp_path):
    """Set each settable input for two steps, release it: from the next step on, an entity without
    memory gives every output of a run that never set it, an entity with memory reads the inputs
    that run's reads (the engine's and those its adapter holds)."""
    path, sim = case_scenario(case, tmp_path, BEFORE + HELD + AFTER)
    scn = load_scenario(path, {"scenario.engine": "direct"})
    adapter = scn.sims[sim].adapter
    steps = BEFORE + HELD + AFTER
    never = _run(path, adapter, [[] for _ in range(steps)])
    failures, tried = [], 0
    for eid in scn.entities:
        bounds, refused = input_bounds(scn, eid), refused_inputs(scn, eid)
        for attr in some_inputs(scn.inputs(eid)):
            if attr in refused:
                continue
            value = _value(attr, *bounds.get(attr, (-math.inf, math.inf)))
            plan: list[list] = [[] for _ in range(steps)]
            plan[BEFORE] = [(eid, attr, value)]
            plan[BEFORE + HELD] = [(eid, attr, None)]
            rows = _run(path, adapter, plan)
            tried += 1
            assert any(_differences(rows[k]["outputs"], never[k]["outputs"]) or rows[k]["held"] != never[k]["held"]
                       or rows[k]["handed"] != never[k]["handed"] for k in range(BEFORE, BEFORE + HELD)), \
                f"{eid}.{attr} = {value}: the held value was not handed to the sim"
            for k in range(BEFORE + HELD, steps):
                if adapter in WITH_MEMORY:
                    found = [f"handed {rows[k]['handed']} != {never[k]['handed']}"] \
                        if rows[k]["handed"] != never[k]["handed"] else []
                    found += [f"held {key}: {rows[k]['held'][key]} != {never[k]['held'][key]}"
                              for key in never[k]["held"] if rows[k]["held"].get(key) != never[k]["held"][key]]
                    if adapter == "grid" and scn.sim_models[sim].engine == "pandapower":
                        # no controls: only the Newton solve's warm start remembers (its tolerance)
                        found += [f"{key}: {rows[k]['outputs'][key]!r} != {never[k]['outputs'][key]!r}"
                                  for key in _differences(rows[k]["outputs"], never[k]["outputs"])
                                  if not rows[k]["outputs"][key] == pytest.approx(never[k]["outputs"][key], abs=1e-6)]
                else:
                    found = [f"{key}: {rows[k]['outputs'].get(key)!r} != {never[k]['outputs'][key]!r}"
                             for key in _differences(rows[k]["outputs"], never[k]["outputs"])]
                if found:
                    failures.append(f"{eid}.{attr} = {value:g} released, step {k}: {found[:4]}")
                    break
    assert not failures, "\n".join(failures)
    assert (tried == 0) == (case in NO_INPUTS), \
        f"{case}: {tried} settable inputs tried; NO_INPUTS says {'none' if case in NO_INPUTS else 'some'}"
