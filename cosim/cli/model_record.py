"""``cosim model-record``: the PERC1 parameters of a scenario's campuses as a DYR record and a table.

Every entity with a ``perc1`` table (a ``ride_through`` RideThrough's co-simulated PERC1, an
``andes_grid`` Load's native one) or a ``perc1_dyr`` record gets one line in ``perc1.dyr``
(``IBUS 'PERC1' 'ID' p1 ... /``, the column order of :data:`cosim.adapters.andes_grid.perc1_record.PARAMS`:
cosim's own, listed in the file's opening ``@!`` comment lines)
and its rows in ``perc1_params.csv`` and ``perc1_params.md`` (name, scenario key, value, unit,
meaning). The bus is the entity's own ``bus``, or that of the entity it feeds (a RideThrough's
point of connection), as the grid adapter numbers it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cosim import registry
from cosim.adapters.andes_grid import perc1_record as record
from cosim.errors import Problem, ScenarioError
from cosim.scenario import load_scenario


def _params(scn, eid: str):
    spec = scn.entities[eid]
    cls = registry.adapter_class(scn.sims[spec.sim].adapter)
    params_cls = cls.ModelParams.get(spec.model)
    if params_cls is None:
        return cls, None
    return cls, params_cls.model_validate(scn.entity_params[eid], context={"base_dir": scn.base_dir})


def _bus(scn, eid: str) -> tuple[str, Any] | None:
    """``(entity, bus number)`` where ``eid`` connects: its own bus or the bus of the entity it feeds."""
    candidates = [eid] + [c.dst for c in scn.connect if c.src == eid]
    for name in candidates:
        if name in scn.entities and "bus" in scn.entity_params.get(name, {}):
            spec = scn.entities[name]
            cls = registry.adapter_class(scn.sims[spec.sim].adapter)
            bus = scn.entity_params[name]["bus"]
            number = getattr(cls, "bus_number", None)
            if number is not None:
                sim_params = cls.SimParams.model_validate(scn.sim_params[spec.sim], context={"base_dir": scn.base_dir})
                bus = number(sim_params, bus)
            return name, bus
    return None


def records(scenario: Path) -> list[tuple[str, Any, str, dict[str, float]]]:
    """``(entity, bus, id, perc1 values)`` of every PERC1 in the scenario.

    Raises:
        ScenarioError: none there, or one without a bus to put in its record.
    """
    scn = load_scenario(scenario)
    found = []
    for eid in scn.entities:
        raw = scn.entity_params.get(eid, {})
        if "perc1" not in raw and "perc1_dyr" not in raw:
            continue
        where = _bus(scn, eid)
        if where is None:
            raise ScenarioError(scenario, [Problem(f"entities.{eid}.perc1", "no bus to write in its record (neither the "
                                                   "entity nor one it feeds has a bus); connect it to a grid Load with a bus")])
        _name, bus = where
        _cls, params = _params(scn, eid)
        device_id = str(getattr(params, "perc1_id", "1"))
        perc1 = getattr(params, "perc1", None)
        if perc1 is None:
            values = record.find_record(params.perc1_dyr, bus, device_id)
        else:
            values = perc1.model_dump()
        found.append((eid, bus, device_id, values))
    if not found:
        raise ScenarioError(scenario, [Problem("entities", "no entity has a perc1 table or a perc1_dyr record; add "
                                               "perc1 = {...} to a RideThrough or an andes_grid Load")])
    return found


def write(scenario: Path, out: Path) -> list[Path]:
    """Write ``perc1.dyr``, ``perc1_params.csv`` and ``perc1_params.md`` into ``out``; their paths."""
    found = records(scenario)
    out.mkdir(parents=True, exist_ok=True)
    lines = [record.record_line(bus, device_id, values) for _e, bus, device_id, values in found]
    rows = [row for eid, bus, device_id, values in found for row in record.table_rows(bus, device_id, values, eid)]
    paths = [out / "perc1.dyr", out / "perc1_params.csv", out / "perc1_params.md"]
    paths[0].write_text("\n".join(record.header_lines() + lines) + "\n")
    paths[1].write_text(record.table_csv(rows))
    header = (f"# PERC1 parameters of {scenario.name}\n\nOne record per line in `perc1.dyr` "
              f"(`IBUS 'PERC1' 'ID' {' '.join(record.PARAMS)} /`; the order is cosim's own, not "
              "PowerWorld's: map the columns by name).\n\n")
    paths[2].write_text(header + record.table_md(rows))
    return paths


def cmd_model_record(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else Path(f"{args.scenario.stem}_model_record")
    try:
        paths = write(args.scenario, out)
    except ValueError as exc:  # a malformed perc1_dyr record (its message names the file)
        raise ScenarioError(args.scenario, [Problem("perc1_dyr", str(exc))]) from None
    for path in paths:
        print(path)
    return 0


def add_parsers(sub) -> None:
    """``model-record``."""
    p = sub.add_parser("model-record", help="write the scenario's PERC1 parameters as a DYR record and a table")
    p.add_argument("scenario", type=Path)
    p.add_argument("--out", type=Path, default=None, help="folder for perc1.dyr and perc1_params.csv/.md "
                                                          "[<scenario>_model_record]")
    p.set_defaults(func=cmd_model_record)
