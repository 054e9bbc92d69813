"""Site energy accounting behind the meter: pure functions over a run's time series and roles.

The site is what sits behind the campus meter: its loads, on-site generators and storage.
Its net draw (consumer sign) is ``Σ loads + Σ storage p_mw − Σ generation − Σ backup``; import is
its positive part, export its negative part. ``backup`` is a ride-through's UPS and standby
generator (``adapters/ride_through.py``, ``p_backup_mw``: the demand they carried minus the
grid's recharge of the UPS), so while a facility rides on backup its demand is not grid import:
the import is what the grid served. Each value holds over its step, as in
:mod:`cosim.kpis` (an energy is ``Σ p_mw · Δt``).

What :func:`compute` reports (each block only when its columns exist):

* ``site``: load, generation, import, export energy [MWh], peak import [MW]; with backup
  columns also ``backup_mwh`` (Σ p_backup_mw·Δt: the demand the grid did not serve — carried by
  the UPS and generator, or unserved when they ran out — less the recharge; the ride-through's
  ``load_loss`` KPIs split it).
* ``cost``: energy cost ``Σ import·price·Δt − Σ export·export_price·Δt`` [USD] from a
  ``price_usd_mwh`` column (tariff adapter or a price CSV through ``signals``), and demand
  charges from ``dc_<name>_usd_mw`` columns (the tariff adapter's rate of demand charge
  ``<name>`` in each step, per MW per billing month, 0 where it does not apply): per
  calendar month, the highest ``demand_interval_s`` average import among the intervals
  where the rate applies, times the rate. A run shorter than a month still pays the
  month's demand charge (as a bill would); ``demand_month_frac`` says how much of each
  billed month the run covers.
* ``carbon``: location-based emissions of the imports, ``Σ import·ci·Δt`` [t CO2e]
  (1 MWh × 1 g/kWh = 1 kg), plus on-site combustion ``Σ co2_kg_s·Δt`` [t]; with a
  ``ci_marginal_g_kwh`` column also the imports priced at the marginal intensity
  (``grid_marginal_t``, not added to the total).
* ``cfe``: the hourly 24/7 carbon-free-energy score (the hourly matching of Google, "24/7
  Carbon-Free Energy: Methodologies and Metrics", 2021): per clock hour
  h, the site's consumption ``C_h = max(load_h + storage_h, 0)`` is matched by on-site
  clean generation not exported plus the clean share of the imports,
  ``M_h = min(C_h, max(G_clean,h − X_h, 0) + I_h · cfe_frac_h)``; the score is
  ``Σ M_h / Σ C_h``. A battery's charging is consumption in the hour it charges and its
  discharging lowers consumption in the hour it discharges, so stored clean energy moves
  its matching to the later hour.
* ``curtailment``: ``Σ p_curtailed_mw·Δt`` of generators and inverter clipping
  ``Σ p_clip_mw·Δt`` [MWh], in total and per entity.
* ``storage``: per battery, energy charged and discharged [MWh], equivalent full cycles.

What counts as what comes from the run's roles (:mod:`cosim.roles`): the site's loads are
the power columns of the ``it``, ``load``, ``cooling`` and ``air_handler`` roles, its clean
and other generation those of ``clean_gen`` and ``fossil_gen``, its storage those of
``storage`` — an entity's own power attribute, or any column a scenario gives one of those
roles (a PV trace read by the signals adapter: ``roles = { p_mw = "clean_gen" }``). The
signals are the first recorded ``ci_g_kwh``, ``cfe_frac``, ``price_usd_mwh`` and
``export_price_usd_mwh`` columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cosim.kpis._block import Block, KpiInput, carbon_t, finite, step_hours
from cosim.roles import DEMAND_ROLES, GENERATION_ROLES, RunRoles

DEMAND_INTERVAL_S = 900  # most US demand charges bill the highest 15-minute average demand
SCOPE = "the site behind its meter: its loads, on-site generation and storage (not the feeder's other loads)"

#: Signal columns the accounting reads, by ending.
SIGNAL_SUFFIXES = ("_g_kwh", ".cfe_frac", "price_usd_mwh", "_usd_mw", ".co2_kg_s", ".p_curtailed_mw",
                   ".p_clip_mw", ".n_cycles", ".soc_frac")


def needed_columns(columns: list[str], roles: RunRoles) -> list[str]:
    """The recorded columns :func:`compute` may use: the roles' power columns and the signals."""
    power = set(roles.power_columns((*DEMAND_ROLES, *GENERATION_ROLES, "storage", "backup"), columns))
    return [c for c in columns if c in power or c.endswith(SIGNAL_SUFFIXES)]


# -- small pure helpers -----------------------------------------------------------------------
def _sum_columns(ts: pd.DataFrame, columns: list[str]) -> pd.Series:
    if not columns:
        return pd.Series(0.0, index=ts.index)
    return ts[columns].astype(float).fillna(0.0).sum(axis=1)


def import_export_mw(net_mw: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Split a net draw (consumer sign) into import and export, both ≥ 0. [MW]"""
    return net_mw.clip(lower=0.0), (-net_mw).clip(lower=0.0)


def energy_cost_usd(import_mw: pd.Series | np.ndarray, price_usd_mwh: pd.Series | np.ndarray, dt_h: float,
                    export_mw: pd.Series | np.ndarray | None = None,
                    export_price_usd_mwh: pd.Series | np.ndarray | float = 0.0) -> float:
    """Energy charge of the imports minus the credit of the exports (Series or arrays). [USD]"""
    cost = float(np.nansum(np.asarray(import_mw, float) * np.asarray(price_usd_mwh, float)) * dt_h)
    if export_mw is not None:
        cost -= float(np.nansum(np.asarray(export_mw, float) * np.asarray(export_price_usd_mwh, float)) * dt_h)
    return cost


def demand_charge_usd(import_mw: pd.Series, rate_usd_mw: pd.Series,
                      demand_interval_s: float = DEMAND_INTERVAL_S) -> dict[str, dict[str, float]]:
    """Demand charge per calendar month (UTC): peak interval-average import where the rate applies × rate.

    Args:
        import_mw: site import, indexed by UTC time. [MW]
        rate_usd_mw: the demand rate in each step, 0 where it does not apply. [USD/MW per month]
        demand_interval_s: averaging interval of the billed demand. [s]

    Returns:
        ``{"YYYY-MM": {"peak_mw", "rate_usd_mw", "charge_usd"}}``.
    """
    frame = pd.DataFrame({"p": import_mw.astype(float), "rate": rate_usd_mw.astype(float)})
    interval = pd.Timedelta(seconds=demand_interval_s)
    # An interval counts when the rate applies at its start (periods align to whole intervals).
    averaged = frame.resample(interval, origin="epoch").agg({"p": "mean", "rate": "first"}).dropna()
    bills: dict[str, dict[str, float]] = {}
    for month, rows in averaged.groupby(averaged.index.strftime("%Y-%m")):
        rows = rows[rows["rate"] > 0]
        if rows.empty:
            continue
        peak = float(rows["p"].max())
        rate = float(rows["rate"].max())
        bills[month] = {"peak_mw": peak, "rate_usd_mw": rate, "charge_usd": peak * rate}
    return bills


def month_coverage_frac(index: pd.DatetimeIndex, dt_h: float) -> dict[str, float]:
    """How much of each calendar month (UTC) the run covers. [-]"""
    out: dict[str, float] = {}
    for month, count in pd.Series(1, index=index).groupby(index.strftime("%Y-%m")).sum().items():
        days = pd.Period(month, "M").days_in_month
        out[month] = count * dt_h / (days * 24.0)
    return out


def hourly_cfe(load_mw: pd.Series, storage_mw: pd.Series, clean_gen_mw: pd.Series, import_mw: pd.Series,
               export_mw: pd.Series, cfe_frac: pd.Series, dt_h: float) -> pd.DataFrame:
    """Hour-by-hour consumption and its carbon-free match (see the module docstring). [MWh]

    Returns:
        per clock hour: ``consumption_mwh``, ``matched_mwh``, ``cfe_frac``.
    """
    # one float block filled in place (missing -> 0, then × Δt): a year's six columns once, not four times
    columns = (load_mw, storage_mw, clean_gen_mw, import_mw, export_mw)
    block = np.empty((len(import_mw), len(columns) + 1), float, order="F")
    for i, series in enumerate(columns):
        block[:, i] = np.asarray(series, dtype=float)
    np.multiply(block[:, 3], np.asarray(cfe_frac, dtype=float), out=block[:, -1])
    np.copyto(block, 0.0, where=np.isnan(block))
    block *= dt_h
    frame = pd.DataFrame(block, index=import_mw.index, columns=["load", "storage", "clean", "imp", "exp", "grid_clean"],
                         copy=False)
    hours = frame.resample("1h").sum()
    consumption = (hours["load"] + hours["storage"]).clip(lower=0.0)
    supply = (hours["clean"] - hours["exp"]).clip(lower=0.0) + hours["grid_clean"]
    matched = np.minimum(consumption, supply)
    share = (matched / consumption).where(consumption > 0)
    return pd.DataFrame({"consumption_mwh": consumption, "matched_mwh": matched, "cfe_frac": share})


def cfe_score_frac(hourly: pd.DataFrame) -> float:
    """Σ matched / Σ consumption over the hours of :func:`hourly_cfe`. [-]"""
    total = float(hourly["consumption_mwh"].sum())
    return float(hourly["matched_mwh"].sum()) / total if total > 0 else float("nan")


# -- roles ---------------------------------------------------------------------------------
def site_roles(ts: pd.DataFrame, roles: RunRoles) -> dict[str, Any]:
    """Which recorded columns are the site's loads, generators and storage, and its signals."""
    columns = list(ts.columns)

    def first(suffix: str, exclude: str | None = None) -> str | None:
        hits = [c for c in columns if c.endswith(suffix) and not (exclude and c.endswith(exclude))]
        return hits[0] if hits else None

    return {
        "loads": roles.power_columns(DEMAND_ROLES, columns),
        "clean_generation": roles.power_columns("clean_gen", columns),
        "other_generation": roles.power_columns("fossil_gen", columns),
        "storage": roles.power_columns("storage", columns),
        "backup": roles.power_columns("backup", columns),
        "ci": first(".ci_g_kwh"),
        "cfe": first(".cfe_frac"),
        "price": first(".price_usd_mwh", exclude=".export_price_usd_mwh"),
        "export_price": first(".export_price_usd_mwh"),
    }


# -- the entry point -------------------------------------------------------------------------
def compute(ts: pd.DataFrame, run_roles: RunRoles, step_s: float = 60.0,
            demand_interval_s: float = DEMAND_INTERVAL_S) -> dict[str, Any]:
    """Site accounting KPIs for a run.

    Args:
        ts: the run's time series, columns ``<entity>.<attr>``, UTC ``DatetimeIndex``.
        run_roles: the run's roles (which columns are loads, generation, storage).
        step_s: the recording step, used when the series has one row. [s]
        demand_interval_s: averaging interval of billed demand. [s]

    Returns:
        nested dict of KPIs (empty when the run has no site loads, generators or storage).
    """
    if ts.empty:
        return {}
    dt_h = step_hours(ts.index, float(step_s))
    roles = site_roles(ts, run_roles)
    out: dict[str, Any] = {"scope": SCOPE}
    if not any(roles[k] for k in ("loads", "clean_generation", "other_generation", "storage")):
        return {}
    load = _sum_columns(ts, roles["loads"])
    storage = _sum_columns(ts, roles["storage"])
    clean = _sum_columns(ts, roles["clean_generation"])
    # net = load + storage - clean - other - backup, left to right (the same bits), each part let go once counted
    net = load + storage - clean
    other = _sum_columns(ts, roles["other_generation"])
    other_mwh = finite(other.sum() * dt_h)
    net -= other
    del other
    backup = _sum_columns(ts, roles["backup"])
    backup_mwh = finite(backup.sum() * dt_h)
    net -= backup
    del backup
    imp, exp = import_export_mw(net)
    del net
    out["site"] = {
        "load_mwh": finite(load.sum() * dt_h), "clean_generation_mwh": finite(clean.sum() * dt_h),
        "other_generation_mwh": other_mwh, "import_mwh": finite(imp.sum() * dt_h),
        "export_mwh": finite(exp.sum() * dt_h), "import_peak_mw": finite(imp.max()),
        "columns": {k: roles[k] for k in ("loads", "clean_generation", "other_generation", "storage")},
    }
    if roles["backup"]:
        out["site"]["backup_mwh"] = backup_mwh
        out["site"]["columns"]["backup"] = roles["backup"]
    cost = _cost(ts, roles, imp, exp, dt_h, float(demand_interval_s))
    if cost:
        out["cost"] = cost
    out["carbon"] = _carbon(ts, roles, imp, dt_h)
    if roles["cfe"]:
        hourly = hourly_cfe(load, storage, clean, imp, exp, ts[roles["cfe"]], dt_h)
        out["cfe"] = {"signal": roles["cfe"], "score_frac": finite(cfe_score_frac(hourly)),
                      "n_hours": int(hourly["consumption_mwh"].gt(0).sum()),
                      "min_hour_frac": finite(hourly["cfe_frac"].min())}
    curtailment = _curtailment(ts, dt_h)
    if curtailment:
        out["curtailment"] = curtailment
    storage_kpis = _storage(ts, roles["storage"], dt_h)
    if storage_kpis:
        out["storage"] = storage_kpis
    return out


def _cost(ts, roles, imp, exp, dt_h, demand_interval_s) -> dict[str, Any]:
    cost: dict[str, Any] = {}
    if roles["price"]:
        export_price = ts[roles["export_price"]] if roles["export_price"] else 0.0
        cost["price_signal"] = roles["price"]
        cost["energy_usd"] = finite(energy_cost_usd(imp, ts[roles["price"]], dt_h, exp, export_price))
    rates = [c for c in ts.columns if c.split(".", 1)[-1].startswith("dc_") and c.endswith("_usd_mw")]
    if rates:
        demand: dict[str, Any] = {}
        for column in rates:
            for month, bill in demand_charge_usd(imp, ts[column].fillna(0.0), demand_interval_s).items():
                demand[f"{column}@{month}"] = {k: finite(v) for k, v in bill.items()}
        cost["demand"] = demand
        cost["demand_usd"] = finite(sum(b["charge_usd"] for b in demand.values()))
        cost["demand_month_frac"] = {m: finite(f) for m, f in month_coverage_frac(ts.index, dt_h).items()}
    if cost:
        cost["total_usd"] = finite((cost.get("energy_usd") or 0.0) + (cost.get("demand_usd") or 0.0))
    return cost


def _carbon(ts, roles, imp, dt_h) -> dict[str, Any]:
    carbon: dict[str, Any] = {}
    if roles["ci"]:
        carbon["signal"] = roles["ci"]
        carbon["grid_t"] = finite(carbon_t(imp, ts[roles["ci"]], dt_h))
    marginal = [c for c in ts.columns if c.endswith(".ci_marginal_g_kwh")]
    if marginal:
        carbon["marginal_signal"] = marginal[0]
        carbon["grid_marginal_t"] = finite(carbon_t(imp, ts[marginal[0]], dt_h))
    co2 = [c for c in ts.columns if c.endswith(".co2_kg_s")]
    if co2:
        carbon["onsite_t"] = finite(ts[co2].astype(float).fillna(0.0).to_numpy().sum() * dt_h * 3600.0 / 1000.0)
    if carbon:
        carbon["total_t"] = finite((carbon.get("grid_t") or 0.0) + (carbon.get("onsite_t") or 0.0))
    return carbon


def _curtailment(ts, dt_h) -> dict[str, Any]:
    entities: dict[str, Any] = {}
    for column in ts.columns:
        entity, _, attr = column.partition(".")
        if attr in ("p_curtailed_mw", "p_clip_mw"):
            name = {"p_curtailed_mw": "curtailed_mwh", "p_clip_mw": "clipped_mwh"}[attr]
            entities.setdefault(entity, {})[name] = finite(ts[column].astype(float).fillna(0.0).sum() * dt_h)
    if not entities:
        return {}
    return {"curtailed_mwh": finite(sum(v.get("curtailed_mwh", 0.0) for v in entities.values())),
            "clipped_mwh": finite(sum(v.get("clipped_mwh", 0.0) for v in entities.values())),
            "entities": entities}


def _storage(ts, columns, dt_h) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for column in columns:
        entity = column.partition(".")[0]
        p = ts[column].astype(float).fillna(0.0)
        kpis = {"charged_mwh": finite(p.clip(lower=0).sum() * dt_h),
                "discharged_mwh": finite((-p).clip(lower=0).sum() * dt_h)}
        cycles = ts.get(f"{entity}.n_cycles")
        if cycles is not None and cycles.notna().any():
            kpis["n_cycles"] = finite(cycles.dropna().iloc[-1])  # cumulative since the start
        if f"{entity}.soc_frac" in ts:
            kpis["soc_min_frac"] = finite(ts[f"{entity}.soc_frac"].min())
            kpis["soc_max_frac"] = finite(ts[f"{entity}.soc_frac"].max())
        out[entity] = kpis
    return out


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    return needed_columns(columns, roles)


def _compute(inp: KpiInput) -> dict[str, Any]:
    site = compute(inp.ts, inp.roles, inp.step_s)
    return {"accounting": site} if site else {}


BLOCK = Block("accounting", "Site accounting (behind the meter)", 70, _columns, _compute,
              headline=("import_mwh", "export_mwh", "import_peak_mw", "total_usd", "total_t", "score_frac"))
