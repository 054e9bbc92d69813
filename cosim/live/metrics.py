"""``/metrics`` of a live run: the Prometheus text exposition, read from the run at each scrape.

Metrics (Prometheus names carry their unit as Prometheus spells it, ``_seconds``):

* ``cosim_output{entity, attr}``: every numeric (or true/false, as 1/0) output of every entity
  after its latest step, in the unit of ``attr``'s suffix (``attr="p_mw"``: MW); ``NaN`` where the
  value is unknown (a grid step that did not solve, a de-energised bus's voltage), never the last
  known value;
* ``cosim_sim_time_seconds``: simulation time of the next step; ``cosim_steps_total``: steps taken;
* ``cosim_rt_factor_ratio``: wall seconds per simulated second asked for;
  ``cosim_wall_per_sim_ratio``: the ratio so far; ``cosim_lag_seconds``: how late the latest step began;
* ``cosim_signal_stale{entity}`` (1: the value is a held, stale reading) and
  ``cosim_signal_age_seconds{entity}`` for live signals (``adapters/live_signal.py``);
* ``cosim_openadr_vtn_reachable{vtn_url}`` (1 reachable, 0 not, NaN while registering) and
  ``cosim_openadr_readings_pending{vtn_url}`` (telemetry readings the VTN has not answered) when the
  run is an OpenADR VEN (``cosim serve --vtn``, :mod:`cosim.live.ven`);
* ``cosim_run_info{scenario, status}``: 1 (``status`` ``degraded`` from a grid's first unsolved or
  de-energised step, :mod:`cosim.live.run`).
"""

from __future__ import annotations

import math
from typing import Any

from cosim.live.run import LiveRun

#: The families every scrape has (the signal families only with live signals); the parser's names
#: (``cosim_steps`` for the counter ``cosim_steps_total``).
FAMILIES = ("cosim_output", "cosim_sim_time_seconds", "cosim_steps", "cosim_rt_factor_ratio",
            "cosim_wall_per_sim_ratio", "cosim_lag_seconds", "cosim_run_info")

#: The exposition format's content type.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class RunCollector:
    """A prometheus_client collector reading a :class:`LiveRun` when scraped."""

    def __init__(self, run: LiveRun):
        self.run = run

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily  # live extra

        snap = self.run.snapshot()
        state, outputs = snap["state"], snap["outputs"]
        out = GaugeMetricFamily("cosim_output", "latest output of an entity, in the unit of attr's suffix",
                                labels=["entity", "attr"])
        for eid, values in outputs.items():
            for attr, value in values.items():
                number = math.nan if value is None else _number(value)  # None: NaN, unknown (an unsolved grid step)
                if number is not None:
                    out.add_metric([eid, attr], number)
        yield out
        yield GaugeMetricFamily("cosim_sim_time_seconds", "simulation time of the next step", value=state["time_s"])
        yield CounterMetricFamily("cosim_steps", "steps taken", value=state["n_steps"])
        yield GaugeMetricFamily("cosim_rt_factor_ratio", "wall seconds per simulated second asked for",
                                value=state["rt_factor"])
        ratio = state["wall_per_sim_ratio"]
        yield GaugeMetricFamily("cosim_wall_per_sim_ratio", "wall seconds per simulated second so far",
                                value=math.nan if ratio is None else ratio)
        yield GaugeMetricFamily("cosim_lag_seconds", "how late the latest step began", value=state["lag_s"])
        yield from _staleness(self.run.stale_entities(), outputs, GaugeMetricFamily)
        if state.get("ven"):
            yield from _ven(state["ven"], GaugeMetricFamily)
        info = InfoMetricFamily("cosim_run", "the scenario and the run's status")
        info.add_metric([], {"scenario": state["scenario"], "status": state["status"]})
        yield info


def _staleness(eids: list[str], outputs: dict[str, dict[str, Any]], gauge):
    stale = gauge("cosim_signal_stale", "1 while a live signal holds its last value (its source fails)",
                  labels=["entity"])
    age = gauge("cosim_signal_age_seconds", "wall seconds since a live signal's value was read (NaN: none yet)",
                labels=["entity"])
    for eid in eids:
        failed = _number(outputs[eid].get("n_failed_polls"))
        if failed is not None:
            stale.add_metric([eid], 1.0 if failed > 0 else 0.0)
        read_age = _number(outputs[eid].get("age_s"))
        age.add_metric([eid], math.nan if read_age is None else read_age)
    yield stale
    yield age


def _ven(ven: dict[str, Any], gauge):
    reachable = gauge("cosim_openadr_vtn_reachable", "1 while the OpenADR VTN answers, 0 from its first "
                      "unanswered request (NaN while registering)", labels=["vtn_url"])
    reachable.add_metric([ven["vtn_url"]], {"reachable": 1.0, "unreachable": 0.0}.get(ven["vtn"], math.nan))
    pending = gauge("cosim_openadr_readings_pending", "telemetry readings the VTN has not answered yet",
                    labels=["vtn_url"])
    pending.add_metric([ven["vtn_url"]], float(ven["n_readings_pending"]))
    yield reachable
    yield pending


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def exposition(run: LiveRun, registry=None) -> bytes:
    """The metrics of ``run`` in the Prometheus text format (``registry``: one made by :func:`registry_for`)."""
    from prometheus_client import generate_latest  # the live extra: imported only when a run is served

    return generate_latest(registry or registry_for(run))


def registry_for(run: LiveRun):
    """A registry holding only ``run``'s collector (not the process's default one)."""
    from prometheus_client import CollectorRegistry  # the live extra: imported only when a run is served

    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(run))
    return registry
