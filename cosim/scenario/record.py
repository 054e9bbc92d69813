"""Which outputs a run records: the scenario's ``[record]`` patterns, or the default selection.

The default (no ``include``): every output of every entity (the datacenter, its cooling, every
source and store, every controller and every point of connection) except the outputs its
adapter marks as detail (``model_meta(detail=...)``: one per bus, line, transformer, phase or
device of a network: 18,000 columns on the IEEE 8500-node feeder), and of the detail outputs
those a KPI block reads. A grid's summary outputs (import, losses, voltage extremes, all-bus
band, loading maximum, convergence) are not detail, so they are recorded. ``exclude`` applies
on top of either. ``include = ["*"]`` records everything.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cosim.scenario.schema import Scenario


def all_outputs(scn: Scenario) -> list[str]:
    """``<entity>.<attr>`` of every output of every entity, in entity and META order."""
    return [f"{eid}.{attr}" for eid in scn.entities for attr in scn.outputs(eid)]


def detail_outputs(scn: Scenario) -> set[str]:
    """The outputs recorded only on request (their adapters' ``detail``)."""
    return {f"{eid}.{attr}" for eid in scn.entities for attr in scn.model_meta(eid).get("detail", ())}


def default_columns(scn: Scenario, names: list[str] | None = None) -> list[str]:
    """The default selection (module docstring), in output order, before ``exclude``."""
    from cosim.kpis import needed_columns

    names = all_outputs(scn) if names is None else names
    detail = detail_outputs(scn)
    if not detail:
        return list(names)
    read = set(needed_columns(names, scn.roles()))
    return [n for n in names if n not in detail or n in read]


def recorded_columns(scn: Scenario) -> list[str]:
    """``<entity>.<attr>`` of every output the run records, in output order."""
    names = all_outputs(scn)
    include = scn.record.include
    chosen = default_columns(scn, names) if include is None else [
        n for n in names if any(fnmatch.fnmatchcase(n, p) for p in include)]
    exclude = scn.record.exclude
    return [n for n in chosen if not any(fnmatch.fnmatchcase(n, p) for p in exclude)]
