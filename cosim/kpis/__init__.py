"""KPIs: pure functions of a run's time series and roles, in blocks found by scanning.

Each module of this package (every folder on ``cosim.kpis.__path__``; names starting with
``_`` skipped) that defines ``BLOCK = Block(...)`` is one block of ``kpis.json``: it says
which recorded columns it reads and computes its entries. Adding a KPI is one new file; no
list is edited. :func:`needed_columns` is the union of what the blocks read (a year of
per-bus voltages is hundreds of MB that no KPI needs, so the rest stays on disk).

The blocks (formulas in their modules): ``energy`` (per entity with ``p_mw``), ``grid`` (per
grid entity: import, losses, voltage band and violations, loadings), ``carbon`` (the
feeder's import carbon), ``datacenter`` (per IT entity with servers), ``facility`` (PUE,
WUE, unmet cooling, inlet excursions), ``dr`` (per DR responder), ``accounting`` (the site
behind its meter: import/export, cost, carbon, 24/7 CFE, curtailment, storage).
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import pandas as pd

from cosim.folder import json_safe
from cosim.kpis._block import Block, KpiInput, KpiParams, ParamsContext, step_hours
from cosim.kpis.grid import BAND_PARAM, V_HIGH_PU, V_LOW_PU
from cosim.roles import RunRoles

__all__ = ["BAND_PARAM", "Block", "KpiInput", "KpiParams", "ParamsContext", "V_HIGH_PU", "V_LOW_PU", "blocks", "block_columns", "compute", "compute_indexed", "compute_reading", "needed_columns",
           "default_params", "refresh"]

_FOUND: list[Block] | None = None


def blocks() -> list[Block]:
    """Every KPI block, in ``kpis.json`` order."""
    global _FOUND
    if _FOUND is None:
        found = []
        for info in pkgutil.iter_modules(__path__, __name__ + "."):
            if info.name.rsplit(".", 1)[-1].startswith("_"):
                continue
            block = getattr(importlib.import_module(info.name), "BLOCK", None)
            if isinstance(block, Block):
                found.append(block)
        _FOUND = sorted(found, key=lambda b: (b.order, b.name))
    return _FOUND


def refresh() -> None:
    """Scan the block folders again on the next use (after adding one while a process runs)."""
    global _FOUND
    _FOUND = None


def default_params() -> dict[str, dict[str, Any]]:
    """Every block that takes parameters -> its defaults (JSON-ready)."""
    return {b.name: b.params().model_dump(mode="json") for b in blocks() if b.params is not None}


def block_columns(columns: list[str], roles: RunRoles) -> tuple[tuple[Block, tuple[str, ...]], ...]:
    """Every block with the columns it reads of ``columns``, in block order and each block's own order.

    Remembers its last answer (the recorded names and roles it was for, compared by value): loading
    a scenario asks it for the default selection and again for the record warning, and on a large
    feeder each asking scans tens of thousands of names per block.
    """
    global _LAST_COLUMNS
    found = blocks()
    if _LAST_COLUMNS is not None:
        was_found, was_columns, was_roles, answer = _LAST_COLUMNS
        if was_found is found and was_columns == columns and was_roles == roles:
            return answer
    answer = tuple((block, tuple(block.columns(columns, roles))) for block in found)
    _LAST_COLUMNS = (found, list(columns), copy.deepcopy(roles), answer)
    return answer


#: :func:`block_columns`'s last question (blocks, names, roles) and answer.
_LAST_COLUMNS: tuple[list[Block], list[str], RunRoles, tuple[tuple[Block, tuple[str, ...]], ...]] | None = None


def needed_columns(columns: list[str], roles: RunRoles) -> list[str]:
    """The recorded columns the blocks read, in recorded order."""
    keep: set[str] = set()
    for _block, read in block_columns(columns, roles):
        keep.update(read)
    return [c for c in columns if c in keep]


def compute(ts: pd.DataFrame, step_s: float, roles: RunRoles,
            links: dict[str, set[str]] | None = None, params: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """All KPIs that the recorded columns allow (strict JSON: NaN and inf become null).

    Args:
        ts: the run's time series (at least :func:`needed_columns`), UTC index.
        step_s: the recording step, used when the series has a single row. [s]
        roles: the run's roles.
        links: entity id -> the entities it feeds (the scenario's connections).
        params: block name -> its parameters (``[kpis.<block>]``; a block's defaults when absent).
    """
    return compute_indexed(ts, step_s, roles, links, params)[0]


def compute_indexed(ts: pd.DataFrame, step_s: float, roles: RunRoles, links: dict[str, set[str]] | None = None,
                    params: dict[str, dict[str, Any]] | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """:func:`compute` and, per block that wrote something, its title, the top-level keys it
    wrote and its headline keys (``metadata.json``'s ``kpi_blocks``, read by the report)."""
    inp = KpiInput(ts, step_hours(ts.index, step_s), float(step_s), roles, links or {}, params or {})
    kpis: dict[str, Any] = {}
    index: dict[str, dict[str, Any]] = {}
    for block in blocks():
        _add(block, block.compute(inp), kpis, index)
    return json_safe(kpis), index


def compute_reading(read: Callable[[list[str]], pd.DataFrame], names: list[str], step_s: float, roles: RunRoles,
                    links: dict[str, set[str]] | None = None, params: dict[str, dict[str, Any]] | None = None
                    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """:func:`compute_indexed` of a series on disk, each block on a frame of only the columns it
    reads: a block's columns are read before it and let go after it, so the KPIs of a long run hold
    one block's columns at a time (a year at 1 min: ~11 columns of 4 MiB, not the ~50 of the union).

    Args:
        read: ``columns -> frame`` of those recorded columns (in that order), UTC index; called with
            ``[]`` once for the index (blocks that read no column get that frame).
        names: the recorded column names, in recorded order (each block's frame keeps that order).
        step_s, roles, links, params: as :func:`compute_indexed`.
    """
    times = read([])
    dt_h = step_hours(times.index, step_s)
    kpis: dict[str, Any] = {}
    index: dict[str, dict[str, Any]] = {}
    for block, reads in block_columns(names, roles):
        wanted = set(reads)
        ts = read([c for c in names if c in wanted]) if wanted else times
        _add(block, block.compute(KpiInput(ts, dt_h, float(step_s), roles, links or {}, params or {})), kpis, index)
        del ts  # let this block's columns go before the next block's are read
    return json_safe(kpis), index


def _add(block: Block, entries: dict[str, Any], kpis: dict[str, Any], index: dict[str, dict[str, Any]]) -> None:
    if entries:
        kpis.update(entries)
        index[block.name] = {"title": block.title, "keys": list(entries), "headline": list(block.headline)}
