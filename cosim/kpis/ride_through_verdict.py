"""Ride-through verdicts: each disturbance at a point of connection, pass or fail per envelope, with margins.

A scenario names the envelopes (``cosim/scenario/envelopes.py``: shipped names or its own files)
that apply at each point of connection (an entity of the grid: its recorded voltage and frequency)::

    [kpis.ride_through_verdict]
    envelopes = { pcc = ["itic_lower", "semi_f47", "data/my_utility_lvrt.toml"] }

For every envelope and every voltage definition the record gives (``positive_sequence``: the
element's ``v1_pu``, else its ``vm_min_pu`` (``vm_max_pu`` for a ``below`` envelope), else
``vm_pu`` (balanced engines: the bus voltage is the positive-sequence voltage); ``worst_phase``,
only where the grid engine gives phases (``v_worst_pu`` recorded, the OpenDSS engine): the lowest
phase ``vm_phase_min_pu`` (``vm_phase_max_pu`` for ``below``), else ``v_worst_pu``; frequency
envelopes read the entity's ``f_hz``, else the run's one recorded ``f_hz``):

* a **disturbance** is a run of consecutive steps outside the envelope's continuous limit; its
  clock ``τ`` starts at its first step, and every recorded value is held over its step
  ``[τ, τ + Δt)`` (the recorder samples each step's start);
* the **margin** at a step is the distance from the held value to the tightest boundary over its
  step (``value − boundary`` for ``above``, ``boundary − value`` for ``below``) [pu or Hz], and
  the **time margin** is how much longer the value could have been held: the boundary's first
  time it no longer clears the value minus ``τ + Δt`` [s]. Both are negative beyond the boundary;
* per disturbance: ``t_start_s`` (from the run's start), ``duration_s``, the extreme value,
  ``margin_pu``/``margin_hz`` (the smallest margin) with ``t_margin_s`` (when), ``margin_time_s``
  with ``t_margin_time_s``, and ``pass`` (smallest margin ≥ 0); ``open_at_end`` when the run ends
  inside it. Disturbances are keyed ``d1``, ``d2``, … so ``cosim compare`` lines them up.

Per envelope: ``envelope`` (the shipped name, or the user's file by its absolute path),
``applies_to`` (the file's voltage definition), ``pass`` (every disturbance passes
on that definition; true with none), and one table per definition judged, each with its own
``pass``, ``n_disturbances``, worst ``margin_*`` and the disturbances. A placeholder envelope is
refused at validation (it has no values).

Cessations (any recorded ``ceasing_positive_sequence_frac`` / ``ceasing_worst_phase_frac``, the
ride-through adapter's outputs): each onset (a step where either share turns positive after a
step with both at 0) with its time and ``decided_by``: ``worst_phase`` (only the worst phase
called for ceasing), ``positive_sequence`` or ``both``, and ``ceased`` (the entity's
``p_connected_frac`` fell below 1 at that step or the next: the acting definition ceased).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cosim.errors import Problem
from cosim.kpis._block import Block, KpiInput, KpiParams, ParamsContext, finite
from cosim.roles import RunRoles
from cosim.scenario import envelopes as envelope_files
from cosim.scenario.envelopes import Envelope, load

NAME = "ride_through_verdict"
VOLTAGE_ATTRS = ("v1_pu", "v_worst_pu", "vm_pu", "vm_min_pu", "vm_max_pu", "vm_phase_min_pu", "vm_phase_max_pu",
                 "va_pu", "vb_pu", "vc_pu")
CEASING_ATTRS = ("ceasing_positive_sequence_frac", "ceasing_worst_phase_frac", "p_connected_frac")


#: the recorded attributes a verdict needs at its point of connection, by quantity
VERDICT_ATTRS = {"voltage": ("v1_pu", "vm_min_pu", "vm_max_pu", "vm_pu"), "frequency": ("f_hz",)}


class VerdictParams(KpiParams):
    """``[kpis.ride_through_verdict]``: the ride-through envelopes (``cosim/scenario/envelopes.py``)
    judged at each point of connection: entity id -> envelope names (shipped) or ``.toml`` files
    (relative to the scenario)."""

    envelopes: dict[str, list[str]] = {}


def check(params: VerdictParams, ctx: ParamsContext) -> tuple[VerdictParams, list[Problem]]:
    """Every envelope named: at a known entity, a valid file, not a placeholder, at a point of
    connection that records what it judges (one problem each); a user's own file is kept by its
    absolute path for the run."""
    refs = params.envelopes
    where = f"{ctx.where}.envelopes"
    problems = [Problem(f"{where}.{entity}", f"unknown entity; give a point of connection among "
                                              f"{', '.join(sorted(ctx.entities)) or 'none'}")
                for entity in refs if entity not in ctx.entities]
    problems += [Problem(key, message) for key, message in envelope_files.verdict_problems(refs, ctx.base_dir, where)]
    if not problems:
        problems = _check_records(refs, ctx, where)
    if problems:
        return params, problems
    resolved = {e: [str(envelope_files.resolve(r, ctx.base_dir)) if r.lower().endswith(".toml") or "/" in r else r
                    for r in names] for e, names in refs.items()}
    return params.model_copy(update={"envelopes": resolved}), []


def _check_records(refs: dict[str, list[str]], ctx: ParamsContext, where: str) -> list[Problem]:
    """A verdict whose point of connection records nothing it can judge is a problem, not an empty verdict."""
    if ctx.recorded is None:
        return []  # some entities are invalid: said elsewhere
    any_f_hz = [n for n in ctx.recorded if n.endswith(".f_hz")]
    problems = []
    for entity, names in refs.items():
        for k, ref in enumerate(names):
            quantity = load(ref, ctx.base_dir).quantity
            wanted = [f"{entity}.{a}" for a in VERDICT_ATTRS[quantity]]
            if any(w in ctx.recorded for w in wanted) or (quantity == "frequency" and len(any_f_hz) == 1):
                continue
            problems.append(Problem(f"{where}.{entity}[{k}]", f"{ref!r} judges {entity}'s {quantity}, but the run "
                                    f"records none of {', '.join(wanted)}; add \"{entity}.*\" to record.include (or a "
                                    "point of connection that reports it)"))
    return problems


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    return [c for c in columns if c.rsplit(".", 1)[-1] in (*VOLTAGE_ATTRS, *CEASING_ATTRS, "f_hz")]


def judge(envelope: Envelope, t_s: np.ndarray, values: np.ndarray, dt_s: float) -> list[dict[str, Any]]:
    """Every disturbance of ``values`` (sampled at ``t_s`` [s], each held for ``dt_s``) against
    ``envelope``: its start, duration, extreme, margins and verdict (see the module docstring)."""
    values = np.asarray(values, dtype=float)
    outside = np.array([math.isfinite(v) and envelope.outside(v) for v in values], dtype=bool)
    above = envelope.must_stay == "above"
    unit = envelope.unit.lower()
    found = []
    k = 0
    while k < len(values):
        if not outside[k]:
            k += 1
            continue
        end = k
        while end < len(values) and outside[end]:
            end += 1
        t0 = float(t_s[k])
        margins, time_margins = [], []
        for j in range(k, end):
            tau = float(t_s[j]) - t0
            v = float(values[j])
            bound = envelope.tightest(tau, tau + dt_s)
            margins.append(v - bound if above else bound - v)
            time_margins.append(envelope.time_limit(v) - (tau + dt_s))
        worst = int(np.argmin(margins))
        worst_time = int(np.argmin(time_margins))
        extreme = values[k:end].min() if above else values[k:end].max()
        found.append({
            "t_start_s": finite(t0), "duration_s": finite((end - k) * dt_s),
            f"{'min' if above else 'max'}_{unit}": finite(extreme),
            f"margin_{unit}": finite(margins[worst]), "t_margin_s": finite(t_s[k + worst]),
            "margin_time_s": finite(time_margins[worst_time]), "t_margin_time_s": finite(t_s[k + worst_time]),
            "pass": bool(min(margins) >= -1e-9), "open_at_end": bool(end == len(values)),
        })
        k = end
    return found


def summary(envelope: Envelope, disturbances: list[dict[str, Any]]) -> dict[str, Any]:
    """One definition's verdict: ``pass``, ``n_disturbances``, the smallest margins and the
    disturbances keyed ``d1``, ``d2``, …"""
    unit = envelope.unit.lower()
    out: dict[str, Any] = {"pass": all(d["pass"] for d in disturbances), "n_disturbances": len(disturbances)}
    if disturbances:
        out[f"margin_{unit}"] = min(d[f"margin_{unit}"] for d in disturbances)
        out["margin_time_s"] = min(d["margin_time_s"] for d in disturbances)
    out["disturbances"] = {f"d{i + 1}": d for i, d in enumerate(disturbances)}
    return out


def series_columns(columns: list[str], entity: str, envelope: Envelope) -> dict[str, str]:
    """The recorded columns of ``entity`` to judge ``envelope`` on, by voltage definition (frequency: one)."""
    have = set(columns)

    def col(attr: str) -> str | None:
        return f"{entity}.{attr}" if f"{entity}.{attr}" in have else None

    if envelope.quantity == "frequency":
        found = [c for c in columns if c.endswith(".f_hz")]
        name = col("f_hz") or (found[0] if len(found) == 1 else None)
        return {"frequency": name} if name else {}
    above = envelope.must_stay == "above"
    out = {}
    pos = col("v1_pu") or col("vm_min_pu" if above else "vm_max_pu") or col("vm_pu")
    if pos:
        out["positive_sequence"] = pos
    if col("v_worst_pu"):
        out["worst_phase"] = col("vm_phase_min_pu" if above else "vm_phase_max_pu") or col("v_worst_pu")
    return out


def series_for(inp: KpiInput, entity: str, envelope: Envelope) -> dict[str, pd.Series]:
    """The recorded series of ``entity`` to judge ``envelope`` on (:func:`series_columns`)."""
    return {d: inp.ts[c] for d, c in series_columns(list(inp.ts.columns), entity, envelope).items()}


def _seconds(index: pd.Index) -> np.ndarray:
    if isinstance(index, pd.DatetimeIndex) and len(index):
        return np.asarray((index - index[0]).total_seconds(), dtype=float)
    return np.arange(len(index), dtype=float)


def _verdicts(inp: KpiInput, envelopes: dict[str, list[str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t_s = _seconds(inp.ts.index)
    dt_s = inp.dt_h * 3600.0
    for entity, refs in envelopes.items():
        for ref in refs:
            envelope = load(ref)
            series = series_for(inp, entity, envelope)
            entry: dict[str, Any] = {"title": envelope.title, "quantity": envelope.quantity,
                                     "must_stay": envelope.must_stay, "envelope": ref}
            if envelope.quantity == "voltage":
                entry["applies_to"] = envelope.voltage_definition
            if not series:
                entry["judged"] = False
                out.setdefault(entity, {})[envelope.name] = entry
                continue
            entry["judged"] = True
            for definition, values in series.items():
                entry[definition] = summary(envelope, judge(envelope, t_s, values.to_numpy(float), dt_s))
            deciding = entry.get(envelope.voltage_definition or "frequency")
            if deciding is None:  # a worst-phase envelope on a balanced engine: its phases are the bus voltage
                deciding = entry.get("positive_sequence")
                entry["applies_to_judged_on"] = "positive_sequence"
            entry["pass"] = deciding["pass"]
            out.setdefault(entity, {})[envelope.name] = entry
    return out


def cessations(inp: KpiInput) -> dict[str, Any]:
    """Each cessation onset of every entity recording both ceasing shares (see the module docstring)."""
    out: dict[str, Any] = {}
    t_s = _seconds(inp.ts.index)
    entities = sorted({c.rsplit(".", 1)[0] for c in inp.ts.columns if c.endswith(".ceasing_worst_phase_frac")})
    for entity in entities:
        pos, worst = inp.col(entity, "ceasing_positive_sequence_frac"), inp.col(entity, "ceasing_worst_phase_frac")
        if pos is None or worst is None:
            continue
        p = np.nan_to_num(inp.ts[pos].to_numpy(float))
        w = np.nan_to_num(inp.ts[worst].to_numpy(float))
        conn = inp.col(entity, "p_connected_frac")
        connected = inp.ts[conn].to_numpy(float) if conn else None
        events = {}
        for k in range(len(p)):
            calling = p[k] > 0 or w[k] > 0
            before = k > 0 and (p[k - 1] > 0 or w[k - 1] > 0)
            if not calling or before:
                continue
            decided = "both" if p[k] > 0 and w[k] > 0 else ("worst_phase" if w[k] > 0 else "positive_sequence")
            event = {"t_s": finite(t_s[k]), "decided_by": decided,
                     "ceasing_positive_sequence_frac": finite(p[k]), "ceasing_worst_phase_frac": finite(w[k])}
            if connected is not None:
                event["ceased"] = bool(np.nanmin(connected[k:k + 2]) < 1.0 - 1e-9)
            events[f"c{len(events) + 1}"] = event
        if events:
            out[entity] = {"n_onsets": len(events), **events}
    return out


def compute(inp: KpiInput) -> dict[str, Any]:
    envelopes = (inp.params.get(NAME) or {}).get("envelopes") or {}
    result: dict[str, Any] = _verdicts(inp, envelopes) if envelopes else {}
    ceased = cessations(inp)
    if ceased:
        result["cessations"] = ceased
    return {NAME: result} if result else {}


BLOCK = Block(NAME, "Ride-through verdicts", 95, _columns, compute, headline=("pass",), params=VerdictParams,
              check=check)
