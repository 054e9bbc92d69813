"""The reward terms of one decision in plain Python floats: the numbers of :mod:`cosim.gym.rewards`'
arrays, to the bit, without numpy's cost per call (a decision of rl_site has 3 rows).

Why the numbers are the same: every element-wise step is the same IEEE double operation in
the same order (``+``, ``-``, ``*``, ``/`` on Python floats and on float64 arrays round alike),
and each numpy function is replaced by what it does element by element:

* ``np.where(np.isnan(x), 0.0, x)``: NaN as ``0.0``; ``np.clip(x, 0.0, None)``: ``x`` when NaN or
  above 0, else ``0.0`` (-0.0 too); the ``_positive`` of :mod:`~cosim.gym.rewards`: ``x`` when
  NaN or ``x >= 0`` (-0.0 stays), else ``0.0``;
* ``np.sum``/``np.nansum`` of fewer than 8 elements: numpy adds them one after the other from
  ``0.0`` (its pairwise summation only splits blocks of 8 or more: hence :data:`MAX_ROWS`);
  ``nansum`` adds 0.0 for a NaN, which changes no partial sum (one started at +0.0 is never
  -0.0), so skipping it is the same;
* ``np.max(x, initial=0.0)``: ``0.0``, then each element replaces the running value unless the
  running value is larger (so -0.0 after 0.0 replaces it, as numpy's ``maximum`` does), NaN
  when any element is NaN;
* Python's ``sum`` over grids and IT entities and ``float`` of the results as there.

``tests/gym/test_scalar_terms.py`` compares both paths bit for bit on random rows with NaN,
±0, ±inf and values of every magnitude.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from cosim.kpis.grid import V_HIGH_PU, V_LOW_PU

#: decisions with fewer rows than this are computed here (numpy sums 8 or more pairwise)
MAX_ROWS = 8
#: the loading above which a step counts as overloaded (``line_overload_s``'s default) [%]
OVERLOAD_PCT = 100.0


def _nan_as_0(xs) -> list[float]:
    """``np.where(np.isnan(x), 0.0, x)``."""
    return [0.0 if x != x else x for x in xs]


def _positive(xs) -> list[float]:
    """The ``_positive`` of :mod:`~cosim.gym.rewards`: ``x`` when NaN or ``x >= 0`` (-0.0 stays), else ``0.0``."""
    return [x if x != x or x >= 0.0 else 0.0 for x in xs]


def _clip0(x: float) -> float:
    """``np.clip(x, 0.0, None)``: ``x`` when NaN or above 0, else ``0.0`` (-0.0 too)."""
    return x if x != x or x > 0.0 else 0.0


def _nansum(xs) -> float:
    total = 0.0
    for x in xs:
        if x == x:
            total += x
    return total


def plain_sum(xs) -> float:
    """The floats ``xs`` added left to right from 0.0, one rounding per addition: what Python 3.11's ``sum``
    does, on every Python (from 3.12 ``sum`` of floats is compensated, other last bits)."""
    total = 0.0
    for x in xs:
        total += x
    return total


_sum = plain_sum


def _max0(xs) -> float:
    peak = 0.0
    for x in xs:
        if x != x:
            return math.nan
        if not peak > x:
            peak = x
    return peak


class Plan:
    """Where each term's columns sit in a row, and the functions of the terms to compute, made once.

    Args:
        cols: the scenario's term columns (:class:`cosim.gym.rewards.TermColumns`).
        where: each column's position in a row.
        names: the terms to compute, in order (default: every term).
    """

    def __init__(self, cols: Any, where: dict[str, int], names: list[str] | None = None):
        site = cols.site
        self.groups = [[where[c] for c in site[k]] for k in ("loads", "storage", "clean_generation",
                                                              "other_generation")]
        self.storage = [where[c] for c in site["storage"]]
        self.price = where[site["price"]] if site["price"] else None
        self.export_price = where[site["export_price"]] if site["export_price"] else None
        self.ci = where[site["ci"]] if site["ci"] else None
        self.voltage = [(where[f"{g}.vm_min_pu"], where[f"{g}.vm_max_pu"]) for g in cols.grids
                        if cols.has(f"{g}.vm_min_pu") and cols.has(f"{g}.vm_max_pu")]
        self.loading = [where[f"{g}.max_loading_pct"] for g in cols.grids if cols.has(f"{g}.max_loading_pct")]
        it = {attr: [f"{e}.{attr}" for e in cols.it if cols.has(f"{e}.{attr}")]
              for attr in ("slo_attainment_frac", "tokens_per_s", "delay_gpu_h")}
        self.slo = [where[c] for c in it["slo_attainment_frac"]]
        self.tokens = [where[c] for c in it["tokens_per_s"]]
        self.delay = [(c, where[c]) for c in it["delay_gpu_h"]]
        self.cooling = [where[c] for c in cols.cooling]
        self.names = list(TERMS) if names is None else list(names)
        self.terms = [(name, TERMS[name]) for name in self.names]
        #: the site's import and export are computed once a decision, when a term reads them
        self.needs_flows = any(name in FLOW_TERMS for name in self.names)
        self.zeros: list[float] = []  # a 0.0 per row (of the last decision's number of rows)


def _flows(plan: Plan, columns: list[tuple[float, ...]]) -> tuple[list[float], list[float]]:
    """The site's import and export per row, as ``Rows.site_flows_mw``. [MW]"""
    sums = []
    for group in plan.groups:
        total = plan.zeros
        for j in group:
            total = [t + x for t, x in zip(total, _nan_as_0(columns[j]))]
        sums.append(total)
    loads, storage, clean, other = sums
    net = [((a + b) - c) - d for a, b, c, d in zip(loads, storage, clean, other)]
    return _positive(net), _positive([-x for x in net])


def compute(plan: Plan, rows: list[list[float]], dt_h: float, state: dict[str, Any]) -> dict[str, float]:
    """``{term: value}`` of the plan's terms over one decision's ``rows`` (fewer than
    :data:`MAX_ROWS`, laid out as ``plan`` says), with ``state`` (the running peak, the last
    cumulative values) carried on as ``RewardTerms.compute`` carries it. [term units]

    (Sums over grids and IT entities are :func:`plain_sum`, as in :mod:`.rewards`.)"""
    columns = list(zip(*rows))
    if len(rows) != len(plan.zeros):
        plan.zeros = [0.0] * len(rows)
    flows = _flows(plan, columns) if plan.needs_flows else None
    out = {}
    for name, term in plan.terms:
        out[name] = float(term(plan, columns, dt_h, state, flows))
    return out


def _energy_cost(plan, columns, dt_h, state, flows) -> float:
    imp, exp = flows
    export_price = columns[plan.export_price] if plan.export_price is not None else plan.zeros
    cost = _nansum(map(operator.mul, imp, columns[plan.price])) * dt_h
    cost -= _nansum(map(operator.mul, exp, export_price)) * dt_h
    return cost


def _carbon(plan, columns, dt_h, state, flows) -> float:
    return _nansum([_clip0(p) * ci for p, ci in zip(flows[0], columns[plan.ci])]) * dt_h / 1000.0


def _import_peak(plan, columns, dt_h, state, flows) -> float:
    before = state.get("import_peak_mw", 0.0)
    state["import_peak_mw"] = max(before, _max0(flows[0]))
    return state["import_peak_mw"] - before


def _battery_throughput(plan, columns, dt_h, state, flows) -> float:
    total = 0.0
    for j in plan.storage:
        p = _nan_as_0(columns[j])
        total += _sum(_positive(p)) * dt_h + _sum(_positive([-x for x in p])) * dt_h
    return total


def _voltage(plan, columns, dt_h, state, flows) -> float:
    dt_s = dt_h * 3600.0
    total = 0.0
    for i, j in plan.voltage:
        total += _nansum([_clip0(V_LOW_PU - lo) + _clip0(hi - V_HIGH_PU) for lo, hi in zip(columns[i], columns[j])]) \
            * dt_s
    return total


def _overload(plan, columns, dt_h, state, flows) -> float:
    dt_s = dt_h * 3600.0
    total = 0.0
    for j in plan.loading:
        total += len([x for x in columns[j] if x > OVERLOAD_PCT]) * dt_s
    return total


def _slo_loss(plan, columns, dt_h, state, flows) -> float:
    total = 0.0
    for j in plan.slo:
        total += _nansum([1.0 - x for x in columns[j]]) * dt_h
    return total


def _tokens(plan, columns, dt_h, state, flows) -> float:
    total = 0.0
    for j in plan.tokens:
        total += _nansum(columns[j]) * dt_h * 3600.0
    return total


def _delay(plan, columns, dt_h, state, flows) -> float:
    rise = 0.0
    for name, j in plan.delay:
        present = [x for x in columns[j] if x == x]
        if present:
            rise += present[-1] - state.get(name, 0.0)
            state[name] = present[-1]
    return rise


def _unmet_cooling(plan, columns, dt_h, state, flows) -> float:
    total = 0.0
    for j in plan.cooling:
        total += _nansum(columns[j]) * dt_h
    return total


#: every term of :data:`cosim.gym.rewards.TERMS`, in plain floats (a test checks that none is missing)
TERMS = {"energy_cost_usd": _energy_cost, "carbon_t": _carbon, "import_peak_mw": _import_peak,
         "battery_throughput_mwh": _battery_throughput, "voltage_violation_pu_s": _voltage,
         "line_overload_s": _overload, "slo_loss_h": _slo_loss, "n_tokens": _tokens, "delay_gpu_h": _delay,
         "unmet_cooling_mwh": _unmet_cooling}
#: the terms that read the site's import and export
FLOW_TERMS = frozenset({"energy_cost_usd", "carbon_t", "import_peak_mw"})
