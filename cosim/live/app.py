"""The HTTP face of a live run (FastAPI; OpenAPI at ``/docs`` and ``/openapi.json``).

Endpoints:

* ``GET /state``: scenario, status (``running``, ``finishing`` while the run folder is written,
  then ``ok``, ``stopped`` or ``failed`` with the reason), ``time_s`` (simulation time of the
  next step) and its ``utc``, ``last_step_s``, ``n_steps``, ``rt_factor``, ``wall_per_sim_ratio``,
  ``lag_s``, ``run_dir``.
* ``GET /entities``: every entity's id, sim, adapter, model, role, outputs, the inputs it takes
  from outside with the adapter's bounds (``low``/``high``; null: any finite number) and the
  values held on it.
* ``GET /entities/{eid}``: its latest outputs (after its latest step; NaN as null) and held inputs.
* ``PUT`` or ``POST /entities/{eid}/inputs`` with ``{"p_cap_w": 500}``: hold each input at its
  value from the next step on (``applies_from_s`` in the answer) until it is set again; ``null``
  releases one. The request is checked whole and applied whole or not at all: an unknown entity
  is 404 naming the known ones; an unknown input, a value that is no finite number, or one
  outside the bounds is 422 with one problem per key (``path`` = ``entities.<eid>.<input>``,
  ``value``, ``problem``, and the input's ``bounds``); a request after the run ended is 409.
* ``GET /metrics``: Prometheus text format (:mod:`cosim.live.metrics`).
"""

# no `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time, and
# Request is imported inside build_app (the live extra is optional)

import json
import math
from typing import Any

from cosim.errors import ScenarioError
from cosim.live import metrics
from cosim.live.run import LiveRun, RunOver, UnknownEntity

_INPUTS_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
            "example": {"p_cap_w": 500},
        }},
    },
}


def build_app(run: LiveRun):
    """The FastAPI application serving ``run``."""
    from fastapi import FastAPI, Request, Response  # the live extra: imported only when a run is served
    from fastapi.responses import JSONResponse  # the live extra: imported only when a run is served

    app = FastAPI(title=f"cosim live: {run.scn.scenario.name}", version="1",
                  description="A cosim scenario running in real time: read its state and outputs, set its inputs.")
    registry = metrics.registry_for(run)

    @app.get("/state", summary="where the run is")
    def get_state() -> dict[str, Any]:
        return run.state()

    @app.get("/entities", summary="entities, their roles and the inputs that can be set")
    def get_entities() -> list[dict[str, Any]]:
        return run.entities()

    @app.get("/entities/{eid}", summary="an entity's latest outputs",
             responses={404: {"description": "no such entity"}})
    def get_entity(eid: str):
        try:
            return run.entity(eid)
        except UnknownEntity as exc:
            return JSONResponse({"detail": str(exc), "path": f"entities.{eid}"}, status_code=404)

    async def set_inputs(eid: str, request: Request):
        try:
            body = json.loads(await request.body() or b"null")
        except ValueError as exc:
            return JSONResponse({"detail": f"the body is not JSON ({exc}); send e.g. {{\"p_cap_w\": 500}}"},
                                status_code=400)
        try:
            return run.set_inputs(eid, body)
        except UnknownEntity as exc:
            return JSONResponse({"detail": str(exc), "path": f"entities.{eid}"}, status_code=404)
        except ScenarioError as exc:
            return JSONResponse({"detail": _problems(run, eid, exc), "message": str(exc)}, status_code=422)
        except RunOver as exc:
            return JSONResponse({"detail": str(exc)}, status_code=409)

    for method in ("PUT", "POST"):
        app.add_api_route("/entities/{eid}/inputs", set_inputs, methods=[method], openapi_extra=_INPUTS_BODY,
                          summary="hold inputs from the next step on (null releases one)",
                          operation_id=f"set_inputs_{method.lower()}",
                          responses={404: {"description": "no such entity"},
                                     409: {"description": "the run is over"},
                                     422: {"description": "an unknown input or a bad value; each with its key path"}})

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    def get_metrics() -> Response:
        return Response(metrics.exposition(run, registry), media_type=metrics.CONTENT_TYPE)

    return app


def json_value(value: Any) -> Any:
    """``value`` as it can go into strict JSON (NaN, inf and other objects as their text)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return repr(value)


def _problems(run: LiveRun, eid: str, exc: ScenarioError) -> list[dict[str, Any]]:
    """The problems of a refused request as JSON, each with the bounds of its input when known."""
    found = []
    for problem in exc.problems:
        attr = problem.path.rpartition(".")[2]
        spec = run.inputs.get(eid, {}).get(attr)
        entry = {"path": problem.path, "problem": problem.message}
        entry["value"] = json_value(problem.value)
        if spec is not None:
            entry["bounds"] = None if spec.bounds is None else [spec.to_json()["low"], spec.to_json()["high"]]
        found.append(entry)
    return found
