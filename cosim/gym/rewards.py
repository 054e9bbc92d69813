"""Reward terms: what one decision cost or delivered, by the formulas and columns of the KPIs.

Each term is computed from the rows the recorder would write during the decision (every
recording step, not only the decision points), from the recorded columns and the run's
roles, with the functions of :mod:`cosim.kpis`; so the sum of a term over an episode equals
the KPI named beside it in the recorded run folder. ``reward = Σ weight · term``: costs take
negative weights.

==========================  ==========================================================  ======================================================
term                        per decision                                                its episode sum equals
==========================  ==========================================================  ======================================================
``energy_cost_usd``         Σ import·price·Δt − Σ export·export_price·Δt of the site    ``accounting.cost.energy_usd``
``carbon_t``                Σ import·ci·Δt / 1000 of the site                           ``accounting.carbon.grid_t``
``import_peak_mw``          rise of the site's running import peak                      ``accounting.site.import_peak_mw``
``voltage_violation_pu_s``  Σ [max(0.95 − vm_min) + max(vm_max − 1.05)]·Δt per grid     Σ over grids of ``<grid>.voltage_violation_pu_s``
``line_overload_s``         Δt · #steps with the most loaded branch above 100 %         Σ over grids of ``<grid>.line_overload_s``
``slo_loss_h``              Σ (1 − slo_attainment_frac)·Δt per IT entity                Σ (1 − ``slo_attainment_mean_frac``) · hours with a value
``n_tokens``                Σ tokens_per_s·Δt per IT entity                             Σ over IT of ``datacenter.<id>.n_tokens``
``delay_gpu_h``             rise of the cumulative ``delay_gpu_h`` per IT entity        Σ over IT of ``datacenter.<id>.delay_gpu_h``
``battery_throughput_mwh``  Σ |p_mw|·Δt of the site's storage                           Σ ``charged_mwh + discharged_mwh`` of ``accounting.storage``
``unmet_cooling_mwh``       Σ q_unmet_mw·Δt of the cooling entities                     ``facility.unmet_cooling_mwh``
==========================  ==========================================================  ======================================================

(Δt is the recording step in hours, or seconds for the ``_s`` terms.) A term is available
when its columns are recorded (``[record]``); a missing value counts as the KPIs count it
(0 in sums, skipped by the peak and the last value). A throughput loss is a positive weight
on ``n_tokens`` (the tokens lost against any fixed baseline differ from it by a constant).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cosim.gym import scalar_terms
from cosim.kpis import accounting
from cosim.kpis._block import carbon_t, energy_mwh
from cosim.kpis.grid import line_overload_s, voltage_violation_pu_s
from cosim.roles import RunRoles
from cosim.run.graph import recorded_columns
from cosim.scenario import Scenario


@dataclass(frozen=True)
class TermColumns:
    """Which recorded columns each family of terms reads (from the run's roles)."""

    site: dict[str, Any]
    grids: list[str]
    it: list[str]
    cooling: list[str]
    recorded: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, columns: list[str], roles: RunRoles) -> "TermColumns":
        have = set(columns)
        site = accounting.site_roles(pd.DataFrame(columns=columns), roles)
        grids = [g for g in roles.entities_with("grid") if f"{g}.p_import_mw" in have]  # as the grid block
        it = [e for e in roles.entities_with("it") if f"{e}.p_it_mw" in have]  # as the datacenter block
        cooling = [f"{e}.q_unmet_mw" for e in roles.entities_with("cooling") if f"{e}.q_unmet_mw" in have]
        return cls(site, grids, it, cooling if it else [], frozenset(have))

    def site_power(self) -> list[str]:
        s = self.site
        return [*s["loads"], *s["storage"], *s["clean_generation"], *s["other_generation"]]

    def has(self, column: str) -> bool:
        return column in self.recorded


class Rows:
    """The recorded rows of one decision: one column per term column, NaN where a value is missing.

    Plain numpy arrays throughout (no pandas per decision).

    Args:
        values: ``(steps, columns)`` array, in the order of ``columns``.
        columns: the column names (or their ``{name: index}`` map, computed once by the caller).
        dt_h: the recording step. [h]
    """

    def __init__(self, values: np.ndarray, columns: list[str] | dict[str, int], dt_h: float):
        self.values = values
        self.where = columns if isinstance(columns, dict) else {c: j for j, c in enumerate(columns)}
        self.dt_h = dt_h
        self._flows: tuple[np.ndarray, np.ndarray] | None = None

    def col(self, name: str) -> np.ndarray:
        return self.values[:, self.where[name]]

    def summed(self, columns: list[str]) -> np.ndarray:
        """Columns added up as the accounting adds them (in order, a missing value as 0). [MW]"""
        total = np.zeros(len(self.values))
        for name in columns:
            column = self.col(name)
            total = total + np.where(np.isnan(column), 0.0, column)
        return total

    def site_flows_mw(self, cols: "TermColumns") -> tuple[np.ndarray, np.ndarray]:
        """The site's import and export, both >= 0, split as :func:`cosim.kpis.accounting.compute`
        splits the net draw ``loads + storage - generation``. [MW]"""
        if self._flows is None:
            s = cols.site
            net = (self.summed(s["loads"]) + self.summed(s["storage"]) - self.summed(s["clean_generation"])
                   - self.summed(s["other_generation"]))
            self._flows = _positive(net), _positive(-net)
        return self._flows


def _positive(x: np.ndarray) -> np.ndarray:
    """``x`` below 0 as 0, as ``pandas.Series.clip(lower=0.0)`` (what
    :func:`cosim.kpis.accounting.import_export_mw` calls) gives it: NaN stays NaN, -0.0 stays -0.0."""
    return np.where(np.isnan(x) | (x >= 0.0), x, 0.0)


@dataclass(frozen=True)
class Term:
    """One reward term: why it may be missing, and its value over one decision's rows."""

    name: str
    kpi: str
    missing: Callable[[TermColumns], str | None]
    compute: Callable[[Rows, TermColumns, dict[str, Any]], float]


TERMS: dict[str, Term] = {}


def term(name: str, kpi: str, missing: Callable[[TermColumns], str | None]):
    """Register ``compute(rows, columns, state)`` as the term ``name``."""
    def register(compute):
        TERMS[name] = Term(name, kpi, missing, compute)
        return compute
    return register


# -- the site (accounting) ------------------------------------------------------------------
def _no_site(cols: TermColumns) -> str | None:
    return None if cols.site_power() else "no site loads, generation or storage recorded (roles)"


def _needs_site_signal(key: str, what: str) -> Callable[[TermColumns], str | None]:
    def missing(cols: TermColumns) -> str | None:
        return _no_site(cols) or (None if cols.site[key] else f"no {what} recorded")
    return missing


@term("energy_cost_usd", "accounting.cost.energy_usd", _needs_site_signal("price", "'<entity>.price_usd_mwh'"))
def _energy_cost(rows, cols, state) -> float:
    imp, exp = rows.site_flows_mw(cols)
    export_price = rows.col(cols.site["export_price"]) if cols.site["export_price"] else 0.0
    return accounting.energy_cost_usd(imp, rows.col(cols.site["price"]), rows.dt_h, exp, export_price)


@term("carbon_t", "accounting.carbon.grid_t", _needs_site_signal("ci", "'<entity>.ci_g_kwh'"))
def _carbon(rows, cols, state) -> float:
    imp, _ = rows.site_flows_mw(cols)
    return carbon_t(imp, rows.col(cols.site["ci"]), rows.dt_h)


@term("import_peak_mw", "accounting.site.import_peak_mw", _no_site)
def _import_peak(rows, cols, state) -> float:
    imp, _ = rows.site_flows_mw(cols)
    before = state.get("import_peak_mw", 0.0)
    state["import_peak_mw"] = max(before, float(np.max(imp, initial=0.0)))
    return state["import_peak_mw"] - before


@term("battery_throughput_mwh", "accounting.storage.<id>.charged_mwh + discharged_mwh",
      lambda cols: None if cols.site["storage"] else "no storage recorded")
def _battery_throughput(rows, cols, state) -> float:
    total = 0.0
    for column in cols.site["storage"]:
        p = rows.col(column)
        p = np.where(np.isnan(p), 0.0, p)  # a missing value as 0 (the accounting's fillna)
        total += _positive(p).sum() * rows.dt_h + _positive(-p).sum() * rows.dt_h
    return float(total)


# -- the grid ----------------------------------------------------------------------------------
def _grid_with(attrs: tuple[str, ...]) -> Callable[[TermColumns], str | None]:
    def missing(cols: TermColumns) -> str | None:
        ok = [g for g in cols.grids if all(cols.has(f"{g}.{a}") for a in attrs)]
        return None if ok else f"no grid entity with {' and '.join(attrs)} recorded"
    return missing


@term("voltage_violation_pu_s", "<grid>.voltage_violation_pu_s", _grid_with(("vm_min_pu", "vm_max_pu")))
def _voltage(rows, cols, state) -> float:
    grids = [g for g in cols.grids if cols.has(f"{g}.vm_min_pu") and cols.has(f"{g}.vm_max_pu")]
    return scalar_terms.plain_sum(voltage_violation_pu_s(rows.col(f"{g}.vm_min_pu"), rows.col(f"{g}.vm_max_pu"),
                                                         rows.dt_h * 3600.0) for g in grids)


@term("line_overload_s", "<grid>.line_overload_s", _grid_with(("max_loading_pct",)))
def _overload(rows, cols, state) -> float:
    grids = [g for g in cols.grids if cols.has(f"{g}.max_loading_pct")]
    return scalar_terms.plain_sum(line_overload_s(rows.col(f"{g}.max_loading_pct"), rows.dt_h * 3600.0) for g in grids)


# -- the datacenter ------------------------------------------------------------------------------
def _it_with(attr: str) -> Callable[[TermColumns], str | None]:
    def missing(cols: TermColumns) -> str | None:
        return None if any(cols.has(f"{e}.{attr}") for e in cols.it) else f"no IT entity with {attr} recorded"
    return missing


def _it_columns(cols: TermColumns, attr: str) -> list[str]:
    return [f"{e}.{attr}" for e in cols.it if cols.has(f"{e}.{attr}")]


@term("slo_loss_h", "(1 - datacenter.<id>.slo_attainment_mean_frac) * hours with a value",
      _it_with("slo_attainment_frac"))
def _slo_loss(rows, cols, state) -> float:
    return scalar_terms.plain_sum(float(np.nansum(1.0 - rows.col(c))) * rows.dt_h
                                  for c in _it_columns(cols, "slo_attainment_frac"))


@term("n_tokens", "datacenter.<id>.n_tokens", _it_with("tokens_per_s"))
def _tokens(rows, cols, state) -> float:
    return scalar_terms.plain_sum(float(np.nansum(rows.col(c))) * rows.dt_h * 3600.0
                                  for c in _it_columns(cols, "tokens_per_s"))


@term("delay_gpu_h", "datacenter.<id>.delay_gpu_h", _it_with("delay_gpu_h"))
def _delay(rows, cols, state) -> float:
    rise = 0.0
    for column in _it_columns(cols, "delay_gpu_h"):
        present = rows.col(column)[~np.isnan(rows.col(column))]
        if len(present):
            last = float(present[-1])
            rise += last - state.get(column, 0.0)
            state[column] = last
    return rise


# -- cooling ---------------------------------------------------------------------------------------
@term("unmet_cooling_mwh", "facility.unmet_cooling_mwh",
      lambda cols: None if cols.cooling else "no cooling entity with q_unmet_mw (and no IT p_it_mw) recorded")
def _unmet_cooling(rows, cols, state) -> float:
    return scalar_terms.plain_sum(energy_mwh(rows.col(c), rows.dt_h) for c in cols.cooling)


# -- using them ----------------------------------------------------------------------------------------
def term_columns(scn: Scenario) -> TermColumns:
    """The columns of a scenario's terms: its recorded columns and its roles."""
    return TermColumns.of(recorded_columns(scn), scn.roles())


def term_reads(cols: TermColumns) -> dict[str, list[str]]:
    """The recorded columns each term reads (what a change of the term must come through)."""
    s = cols.site
    site = cols.site_power()
    grid = {a: [f"{g}.{a}" for g in cols.grids if cols.has(f"{g}.{a}")]
            for a in ("vm_min_pu", "vm_max_pu", "max_loading_pct")}
    signals = {k: [s[k]] if s[k] else [] for k in ("price", "export_price", "ci")}
    return {"energy_cost_usd": [*site, *signals["price"], *signals["export_price"]],
            "carbon_t": [*site, *signals["ci"]], "import_peak_mw": site,
            "battery_throughput_mwh": list(s["storage"]),
            "voltage_violation_pu_s": grid["vm_min_pu"] + grid["vm_max_pu"],
            "line_overload_s": grid["max_loading_pct"],
            "slo_loss_h": _it_columns(cols, "slo_attainment_frac"), "n_tokens": _it_columns(cols, "tokens_per_s"),
            "delay_gpu_h": _it_columns(cols, "delay_gpu_h"), "unmet_cooling_mwh": list(cols.cooling)}


def available_terms(scn: Scenario) -> dict[str, str | None]:
    """Every term: None when the scenario records what it needs, else why it cannot."""
    cols = term_columns(scn)
    return {name: t.missing(cols) for name, t in TERMS.items()}


class RewardTerms:
    """The available terms of one scenario, decision by decision (with the state a peak or a
    cumulative counter needs across decisions).

    Args:
        scn: the scenario (its recorded columns and roles).
    """

    def __init__(self, scn: Scenario):
        self.cols = term_columns(scn)
        self.names = [name for name, t in TERMS.items() if t.missing(self.cols) is None]
        self.dt_h = scn.record_step_s / 3600.0
        self.columns = self._needed()
        self._where: dict[str, int] = {c: j for j, c in enumerate(self.columns)}
        self.state: dict[str, Any] = {}
        self._scalar_plan: scalar_terms.Plan | None = None  # built on first use

    def _needed(self) -> list[str]:
        s = self.cols.site
        wanted = [*self.cols.site_power(), *(s[k] for k in ("price", "export_price", "ci") if s[k])]
        for g in self.cols.grids:
            wanted += [f"{g}.{a}" for a in ("vm_min_pu", "vm_max_pu", "max_loading_pct") if self.cols.has(f"{g}.{a}")]
        for attr in ("slo_attainment_frac", "tokens_per_s", "delay_gpu_h"):
            wanted += _it_columns(self.cols, attr)
        columns = list(dict.fromkeys([*wanted, *self.cols.cooling]))
        entities = list(dict.fromkeys(c.split(".", 1)[0] for c in columns))
        return sorted(columns, key=lambda c: entities.index(c.split(".", 1)[0]))  # an entity's read together

    def reset(self) -> None:
        self.state = {}

    def compute(self, values: np.ndarray, columns: list[str]) -> dict[str, float]:
        """``{term: value}`` over the rows of one decision (``(steps, columns)`` values of :attr:`columns`)."""
        rows = Rows(values, self._where if columns == self.columns else columns, self.dt_h)
        return {name: float(TERMS[name].compute(rows, self.cols, self.state)) for name in self.names}

    def compute_rows(self, rows: list[list[float]]) -> dict[str, float]:
        """:meth:`compute` of rows given as lists of floats in the order of :attr:`columns`: by
        :mod:`cosim.gym.scalar_terms` when a decision has fewer than
        :data:`~cosim.gym.scalar_terms.MAX_ROWS` rows (the same numbers, without numpy's cost per
        call on arrays of a few elements), else by the arrays."""
        if 0 < len(rows) < scalar_terms.MAX_ROWS:
            if self._scalar_plan is None:
                self._scalar_plan = scalar_terms.Plan(self.cols, self._where, self.names)
            return scalar_terms.compute(self._scalar_plan, rows, self.dt_h, self.state)
        return self.compute(np.array(rows, dtype=float).reshape(len(rows), len(self.columns)), self.columns)
