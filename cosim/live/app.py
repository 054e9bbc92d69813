"""The HTTP face of a live run (FastAPI; OpenAPI at ``/docs`` and ``/openapi.json``).

Endpoints:

* ``GET /state``: scenario, status (``running``, ``finishing`` while the run folder is written,
  then ``ok``, ``stopped`` or ``failed`` with the reason), ``time_s`` (simulation time of the
  next step) and its ``utc``, ``last_step_s``, ``n_steps``, ``rt_factor``, ``wall_per_sim_ratio``,
  ``lag_s``, ``run_dir``.
* ``GET /entities``: every entity's id, sim, adapter, model, role, outputs, the inputs it takes
  from outside with their bounds (``low``/``high``: ``CosimSim.settable_bounds``) and the
  values held on it.
* ``GET /entities/{eid}``: its latest outputs (after its latest step; NaN as null) and held inputs.
* ``PUT`` or ``POST /entities/{eid}/inputs`` with ``{"p_cap_w": 500}``: hold each input at its
  value from the next step on (``applies_from_s`` in the answer) until it is set again; ``null``
  releases one. The request is checked whole and applied whole or not at all: an unknown entity
  is 404 naming the known ones; an unknown input, a value that is no finite number, one
  outside the bounds, or an input the entity refuses from outside (``CosimSim.refused_inputs``,
  e.g. a PERC1 share on a RideThrough with its own ``perc1``) is 422 with one problem per key (``path`` = ``entities.<eid>.<input>``,
  ``value``, ``problem``, and the input's ``bounds``); a request after the run ended is 409.
  A body that is not JSON, or JSON nested deeper than ``MAX_JSON_DEPTH`` (64) levels, is 400; one
  over the size limit (``MAX_BODY_BYTES``, 1 MiB, or ``cosim serve --max-body-bytes``) is 413, told
  by its Content-Length before anything is read, or as soon as the bytes read pass it. A client that
  leaves before its body is in gets no answer and costs one log line (no traceback).
* ``GET /metrics``: Prometheus text format (:mod:`cosim.live.metrics`).
* ``PUT /site/{id}/load-target`` with ``{"target_p_mw": 0.5, "ramp_mw_per_min": 0.1, "hold_s": 600}``:
  a load target reached along a ramp through the site's facility limit (:mod:`cosim.live.site`);
  ``DELETE`` releases it. ``GET /site/{id}/power-status``: measured ``p_mw``, target, ramp state,
  facility limit, met or not. ``GET /site/{id}/events``: the site's events as server-sent events
  (``id`` = sequence number; ``Last-Event-ID`` or ``?after=N`` resumes), ending when the run is over.
  An unknown site is 404, a bad body or a target outside the site's range 422, a run over 409.
"""

# no `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time, and
# Request is imported inside build_app (the live extra is optional)

import asyncio
import json
import logging
import math
from typing import Any

from cosim.errors import ScenarioError
from cosim.live import metrics
from cosim.live.run import LiveRun, RunOver, UnknownEntity
from cosim.live.site import UnknownSite

#: The largest request body read, by default (``cosim serve --max-body-bytes``). [bytes]
MAX_BODY_BYTES = 1024 * 1024
#: The deepest nesting of arrays and objects a request's JSON may have (an input set is 1 level).
MAX_JSON_DEPTH = 64

_log = logging.getLogger("uvicorn.error")  # uvicorn's own log: one line where the server's messages go


class _BodyTooLarge(Exception):
    """A request body over the limit (``size``: its Content-Length, 0 when the bytes read passed it). [bytes]"""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


_INPUTS_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": {"type": ["number", "null"]}},
            "example": {"p_cap_w": 500},
        }},
    },
}


def build_app(run: LiveRun, max_body_bytes: int = MAX_BODY_BYTES):
    """The FastAPI application serving ``run``, reading request bodies up to ``max_body_bytes``."""
    from fastapi import FastAPI, Request, Response  # the live extra: imported only when a run is served
    from fastapi.responses import JSONResponse  # the live extra: imported only when a run is served
    from starlette.requests import ClientDisconnect  # the live extra (fastapi's base): imported only when a run is served

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
            raw = await _read_body(request, max_body_bytes)
        except _BodyTooLarge as exc:
            declared = f" ({exc.size} bytes declared)" if exc.size else ""
            return JSONResponse({"detail": f"the body is larger than the server's limit of {max_body_bytes} bytes"
                                           f"{declared}; send only the inputs to set, e.g. {{\"p_cap_w\": 500}}"},
                                status_code=413, headers={"Connection": "close"})
        except ClientDisconnect:
            client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
            _log.warning("%s left before its request body to %s was in; nothing was set", client, request.url.path)
            return Response(status_code=400)  # nobody reads it
        try:
            body = json.loads(raw or b"null")
        except RecursionError:
            body = _TOO_DEEP
        except ValueError as exc:
            return JSONResponse({"detail": f"the body is not JSON ({exc}); send e.g. {{\"p_cap_w\": 500}}"},
                                status_code=400)
        if body is _TOO_DEEP or _depth_over(body, MAX_JSON_DEPTH):
            return JSONResponse({"detail": f"the body's JSON is nested deeper than {MAX_JSON_DEPTH} levels; send "
                                           "a flat object of inputs and values, e.g. {\"p_cap_w\": 500}"},
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

    _site_routes(app, run, max_body_bytes)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    def get_metrics() -> Response:
        return Response(metrics.exposition(run, registry), media_type=metrics.CONTENT_TYPE)

    return app


_TOO_DEEP = object()

#: How often an open event stream looks for new events. [s]
EVENT_POLL_S = 0.1

_TARGET_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {
            "schema": {"type": "object", "required": ["target_p_mw", "ramp_mw_per_min"],
                       "properties": {"target_p_mw": {"type": "number"}, "ramp_mw_per_min": {"type": "number"},
                                      "hold_s": {"type": ["number", "null"]}}},
            "example": {"target_p_mw": 0.5, "ramp_mw_per_min": 0.1, "hold_s": 600},
        }},
    },
}


def _site_routes(app, run: LiveRun, max_body_bytes: int) -> None:
    """``/site/{sid}/...``: load target, power status, event stream (:mod:`cosim.live.site`)."""
    from fastapi import Request  # the live extra: imported only when a run is served
    from fastapi.responses import JSONResponse, StreamingResponse  # the live extra: imported only when a run is served

    def refused(exc: Exception, sid: str) -> JSONResponse:
        if isinstance(exc, UnknownSite):
            return JSONResponse({"detail": str(exc), "path": f"sites.{sid}"}, status_code=404)
        if isinstance(exc, ScenarioError):
            return JSONResponse({"detail": [{"path": p.path, "problem": p.message, "value": json_value(p.value)}
                                            for p in exc.problems], "message": str(exc)}, status_code=422)
        return JSONResponse({"detail": str(exc)}, status_code=409)

    async def put_target(sid: str, request: Request):
        try:
            raw = await _read_body(request, max_body_bytes)
            body = json.loads(raw or b"null")
        except _BodyTooLarge:
            return JSONResponse({"detail": f"the body is larger than the server's limit of {max_body_bytes} bytes"},
                                status_code=413, headers={"Connection": "close"})
        except (ValueError, RecursionError) as exc:
            return JSONResponse({"detail": f"the body is not JSON ({exc}); send e.g. {{\"target_p_mw\": 0.5, "
                                           "\"ramp_mw_per_min\": 0.1, \"hold_s\": 600}"}, status_code=400)
        try:
            return run.set_target(sid, body)
        except (UnknownSite, ScenarioError, RunOver) as exc:
            return refused(exc, sid)

    app.add_api_route("/site/{sid}/load-target", put_target, methods=["PUT"], openapi_extra=_TARGET_BODY,
                      summary="reach a load target along a ramp, hold it, release it",
                      responses={404: {"description": "no such site"}, 409: {"description": "the run is over"},
                                 422: {"description": "a bad body or a target outside the site's range"}})

    @app.delete("/site/{sid}/load-target", summary="release the site's load target")
    def delete_target(sid: str):
        try:
            return run.release_target(sid)
        except (UnknownSite, RunOver) as exc:
            return refused(exc, sid)

    @app.get("/site/{sid}/power-status", summary="measured power, target, ramp state, facility limit, met")
    def power_status(sid: str):
        try:
            return run.site_status(sid)
        except UnknownSite as exc:
            return refused(exc, sid)

    @app.get("/site/{sid}/events", summary="the site's events as server-sent events (text/event-stream)")
    async def events(sid: str, request: Request, after: int | None = None):
        try:
            run.sites.site(sid)
        except UnknownSite as exc:
            return refused(exc, sid)
        last = request.headers.get("last-event-id", "")
        seq = after if after is not None else (int(last) if last.isdigit() else 0)

        async def stream():
            nonlocal seq
            while not await request.is_disconnected():
                found, over = run.site_events(sid, seq)
                for event in found:
                    seq = event["seq"]
                    yield f"id: {seq}\nevent: {event['event']}\ndata: {json.dumps(json_value(event))}\n\n"
                if over and not found:
                    return
                await asyncio.sleep(EVENT_POLL_S)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _read_body(request, limit: int) -> bytes:
    """The request's body, refused (:class:`_BodyTooLarge`) when its Content-Length or the bytes read
    pass ``limit``: nothing over it is kept in memory."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _BodyTooLarge(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _BodyTooLarge(0)
        chunks.append(chunk)
    return b"".join(chunks)


def _depth_over(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists and dicts deeper than ``limit`` levels (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


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
