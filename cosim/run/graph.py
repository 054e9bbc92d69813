"""The scenario as a data-flow graph: what every engine connects, records and orders by.

Pure (no mosaik): the edges between entities with their kind (``direct``, ``time_shifted``,
``weak``), what the recorder takes from each entity, the groups of sims joined by weak
edges, and an order of the sims in which every direct edge points forward.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from cosim import kpis
from cosim.scenario import Scenario, record


@dataclass(frozen=True)
class Edge:
    """One ``[[connect]]``: attribute pairs from ``src`` to ``dst``."""

    src: str
    dst: str
    pairs: tuple[tuple[str, str], ...]
    kind: str = "direct"  # or "time_shifted", "weak"
    initial_data: dict[str, Any] = field(default_factory=dict)

    @property
    def delayed(self) -> bool:
        return self.kind != "direct"


@dataclass
class Graph:
    """The scenario's connections, recorded outputs and sim order."""

    edges: list[Edge]
    #: entity -> its recorded attributes, in column order
    recorded: dict[str, list[str]]
    #: sims joined by weak edges (mosaik starts each such set in one group)
    weak_groups: list[set[str]]
    #: sims in an order where every direct edge goes from an earlier sim to a later one
    sim_order: list[str]

    @property
    def columns(self) -> list[str]:
        return [f"{e}.{a}" for e, attrs in self.recorded.items() for a in attrs]


def recorded_columns(scn: Scenario) -> list[str]:
    """``<entity>.<attr>`` of every output the run records: ``[record]``'s patterns, or the default
    selection (``cosim/scenario/record.py``) with the detail outputs a KPI block reads."""
    return record.recorded_columns(scn, keep=lambda names: kpis.needed_columns(names, scn.roles()))


def record_warning(scn: Scenario) -> str | None:
    """One warning naming each KPI block that reads a column the run does not record, its first such
    column and the fix; None when every column a KPI reads is recorded. A warning, not a problem: a
    narrow ``[record]`` is often deliberate (the KPI is then absent or computed from what is there)."""
    names = record.all_outputs(scn)
    recorded = set(recorded_columns(scn))
    roles = scn.roles()
    parts, first = [], None
    for block, read in kpis.block_columns(names, roles):
        missing = [c for c in read if c not in recorded]
        if missing:
            first = first or missing[0]
            more = f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
            parts.append(f"the {block.name} KPI reads {missing[0]}{more}")
    if not parts:
        return None
    excluded = [p for p in scn.record.exclude if fnmatch.fnmatchcase(first, p)]
    fix = (f"drop {excluded[0]!r} from record.exclude" if excluded else
           f"add them to record.include (\"{first}\", ...), or leave include out for the default selection")
    return f"record: {'; '.join(parts)}, which the run does not record; {fix}"


def check_record(scn: Scenario) -> Scenario:
    """Add :func:`record_warning` to the scenario's warnings (once); the scenario."""
    text = record_warning(scn)
    if text is not None and text not in scn.warnings:
        scn.warnings.append(text)
    return scn


def build(scn: Scenario) -> Graph:
    """The graph of a validated scenario."""
    edges = []
    for conn in scn.connect:
        kind = "time_shifted" if conn.time_shifted else "weak" if conn.weak else "direct"
        edges.append(Edge(conn.src, conn.dst, tuple(conn.pairs()), kind, dict(conn.initial_data)))
    recorded: dict[str, list[str]] = {}
    for column in recorded_columns(scn):
        eid, attr = column.split(".", 1)
        recorded.setdefault(eid, []).append(attr)
    return Graph(edges, recorded, weak_groups(scn, edges), sim_order(scn, edges))


def weak_groups(scn: Scenario, edges: list[Edge]) -> list[set[str]]:
    """Sims joined by weak connections (union-find over the weak edges)."""
    parent: dict[str, str] = {}

    def root(sid: str) -> str:
        while parent.setdefault(sid, sid) != sid:
            sid = parent[sid]
        return sid

    for edge in edges:
        if edge.kind == "weak":
            a, b = scn.entities[edge.src].sim, scn.entities[edge.dst].sim
            parent[root(a)] = root(b)
    groups: dict[str, set[str]] = {}
    for sid in parent:
        groups.setdefault(root(sid), set()).add(sid)
    return [g for g in groups.values() if len(g) > 1]


def sim_order(scn: Scenario, edges: list[Edge]) -> list[str]:
    """The sims in declaration order, moved so that every direct edge points forward
    (Kahn's algorithm, ties broken by declaration order; validation refused direct cycles)."""
    sims = list(scn.sims)
    after: dict[str, set[str]] = {s: set() for s in sims}
    for edge in edges:
        if edge.kind == "direct":
            a, b = scn.entities[edge.src].sim, scn.entities[edge.dst].sim
            if a != b:
                after[a].add(b)
    indegree = {s: 0 for s in sims}
    for targets in after.values():
        for t in targets:
            indegree[t] += 1
    order, ready = [], [s for s in sims if indegree[s] == 0]
    while ready:
        s = ready.pop(0)
        order.append(s)
        for t in sorted(after[s], key=sims.index):
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
                ready.sort(key=sims.index)
    if len(order) != len(sims):
        raise ValueError("the direct connections form a loop; validation should have refused it")
    return order
