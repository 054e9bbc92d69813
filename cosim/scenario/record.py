"""Which outputs a run records: the scenario's ``[record]`` patterns, or the default selection.

The default (no ``include``): every output of every entity (the datacenter, its cooling, every
source and store, every controller and every point of connection) except the outputs its
adapter marks as detail (``model_meta(detail=...)``: one per bus, line, transformer, phase or
device of a network: 18,000 columns on the IEEE 8500-node feeder), and of the detail outputs
those the caller keeps (the run keeps the ones a KPI block reads: ``cosim/run/graph.py``). A
grid's summary outputs (import, losses, voltage extremes, all-bus band, loading maximum,
convergence) are not detail, so they are recorded. ``exclude`` applies on top of either.
``include = ["*"]`` records everything.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cosim.scenario.schema import Scenario


def all_outputs(scn: Scenario) -> list[str]:
    """``<entity>.<attr>`` of every output of every entity, in entity and META order."""
    return [f"{eid}.{attr}" for eid in scn.entities for attr in scn.outputs(eid)]


def detail_outputs(scn: Scenario) -> set[str]:
    """The outputs recorded only on request (their adapters' ``detail``)."""
    return {f"{eid}.{attr}" for eid in scn.entities for attr in scn.model_meta(eid).get("detail", ())}


def recorded_columns(scn: Scenario, keep: Callable[[list[str]], list[str]] = lambda names: []) -> list[str]:
    """``<entity>.<attr>`` of every output the run records, in output order.

    Args:
        scn: a validated scenario.
        keep: the outputs -> those of them the default selection keeps although they are detail.
    """
    names = all_outputs(scn)
    include = scn.record.include
    if include is None:
        detail = detail_outputs(scn)
        kept = set(keep(names)) if detail else set()
        chosen = [n for n in names if n not in detail or n in kept]
    else:
        matches = matcher(include)
        chosen = [n for n in names if matches(n)]
    exclude = scn.record.exclude
    if not exclude:
        return chosen
    excluded = matcher(exclude)
    return [n for n in chosen if not excluded(n)]


def matcher(patterns: list[str]) -> Callable[[str], bool]:
    """``name -> True when any of the glob patterns matches it`` (:func:`fnmatch.fnmatchcase`'s
    rule), the patterns compiled into one expression."""
    if not patterns:
        return lambda name: False
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
    return lambda name: regex.match(name) is not None
