"""Live operation: a scenario run in real time, watched and steered over HTTP (``cosim serve``).

:class:`LiveRun` (:mod:`.run`) steps a :class:`cosim.Session` on a thread, paced by
``rt_factor``, and takes inputs between steps; :mod:`.app` is its REST API (FastAPI), :mod:`.metrics`
its Prometheus ``/metrics``, :mod:`.server` serves both with uvicorn. fastapi, uvicorn and
prometheus-client come with the ``live`` extra and are imported only when a run is served. Live input
signals (an HTTP JSON source, a Prometheus query) are an adapter: ``adapters/live_signal.py``.
"""

from __future__ import annotations

from cosim.live.run import LiveRun, RunOver, UnknownEntity, load_live

__all__ = ["LiveRun", "RunOver", "UnknownEntity", "load_live"]
