"""A live run served in this process (uvicorn on a thread, 127.0.0.1, a free port) with a live
signal fed by a local HTTP server: the source dies, the run goes on holding the last value with
the stale flag set; a value set through the API is recorded from the next step; the final state
stays served after the end; a failing simulator leaves a ``failed`` run and a server that answers.

Scenario (toy ramp + live signal; no connection between them)::

    local JSON source --HTTP--> feed (live_signal) ----> recorder
    PUT /entities/ramp/inputs --> ramp (toy_ramp) -----> recorder
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cosim.folder import RunFolder
from cosim.live import LiveRun, load_live
from cosim.live.server import LiveServer, bind

#: Statuses of a run not yet over (``finishing``: its folder is being written).
LIVE = ("running", "finishing")

HEAD = """[scenario]
name = "live_toy"
start = 2024-07-15T00:00:00Z
duration_s = {duration_s}
step_s = 1
"""

SIGNAL = """
[sims.feed]
adapter = "live_signal"
url = "{url}/ci"
pointer = "/data/ci"
fallback = {{ ci_g_kwh = 400.0 }}
timeout_s = 0.5
poll_s = 0.05

[entities.sig]
sim = "feed"
model = "LiveSignal"
"""

RAMP = """
[sims.toys]
adapter = "toy_ramp"

[entities.ramp]
sim = "toys"
model = "Ramp"
p0_mw = 1.0
slope_mw_h = 0.0
"""


class Served:
    """A :class:`LiveServer` serving on a thread; ``code`` is what ``serve`` returned."""

    def __init__(self, path: Path, out: Path, rt_factor: float):
        self.run = LiveRun(load_live(path, {}, rt_factor), out, report=False)
        self.server = LiveServer(self.run, bind("127.0.0.1", 0), say=lambda text: None)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.code = self.server.serve()

    def close(self) -> int | None:
        self.server.shutdown()
        self.thread.join(timeout=30)
        return self.code


@pytest.fixture
def serve(tmp_path, toy_adapters):
    started: list[Served] = []

    def start(text: str, rt_factor: float) -> tuple[Served, httpx.Client]:
        path = tmp_path / "live.toml"
        path.write_text(text)
        served = Served(path, tmp_path / "runs", rt_factor)
        started.append(served)
        return served, httpx.Client(base_url=served.server.url, timeout=10.0)

    yield start
    for served in started:
        served.close()


def _metric(client: httpx.Client, name: str, labels: dict[str, str]) -> float | None:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return None


def test_a_dead_source_is_held_and_flagged_and_the_run_goes_on(serve, make_source, until):
    src = make_source(lambda path, query: (200, {"data": {"ci": 123.5}}))
    served, client = serve(HEAD.format(duration_s=300) + SIGNAL.format(url=src.url) + RAMP, rt_factor=0.01)
    sig = until(lambda: (e := client.get("/entities/sig").json())["outputs"] and e, "the first step")["outputs"]
    assert sig["ci_g_kwh"] == 123.5 and sig["n_failed_polls"] == 0
    assert _metric(client, "cosim_signal_stale", {"entity": "sig"}) == 0.0

    answer = client.put("/entities/ramp/inputs", json={"p_cap_mw": 0.5})  # inside its unit's plausible range
    assert answer.status_code == 200, answer.text
    applies_s = answer.json()["applies_from_s"]

    src.stop()
    stale = until(lambda: (o := client.get("/entities/sig").json()["outputs"])["n_failed_polls"] > 0 and o,
                  "the stale flag")
    assert stale["ci_g_kwh"] == 123.5 and stale["age_s"] > 0
    assert _metric(client, "cosim_signal_stale", {"entity": "sig"}) == 1.0
    steps_then = client.get("/state").json()["n_steps"]
    until(lambda: client.get("/state").json()["n_steps"] > steps_then + 5, "steps after the source died")

    final = until(lambda: (st := client.get("/state").json())["status"] not in LIVE and st, "the run's end", 60)
    assert final["status"] == "ok" and final["n_steps"] == 300
    assert client.get("/entities/sig").json()["outputs"]["ci_g_kwh"] == 123.5  # the final state is still served
    late = client.put("/entities/ramp/inputs", json={"p_cap_mw": 0.7})
    assert late.status_code == 409 and "over" in late.json()["detail"]
    assert _metric(client, "cosim_run_info", {"scenario": "live_toy", "status": "ok"}) == 1.0
    assert served.close() == 0

    folder = RunFolder(served.run.run_dir)
    assert folder.metadata()["status"] == "ok"
    ts = folder.timeseries(["ramp.p_cap_mw", "ramp.p_mw", "sig.ci_g_kwh", "sig.n_failed_polls"])
    seconds = [(t - ts.index[0]).total_seconds() for t in ts.index]
    from_set = [x >= applies_s for x in seconds]
    assert ts["ramp.p_cap_mw"][from_set].eq(0.5).all() and ts["ramp.p_cap_mw"][[not f for f in from_set]].isna().all()
    assert ts["ramp.p_mw"][from_set].eq(0.5).all()
    assert ts["sig.ci_g_kwh"].eq(123.5).all() and ts["sig.n_failed_polls"].iloc[-1] > 0


def test_a_failing_simulator_fails_the_run_not_the_server(serve, until):
    text = HEAD.format(duration_s=60) + RAMP + """
[sims.bad]
adapter = "toy_faulty"
fail_at_s = 5

[entities.broken]
sim = "bad"
model = "Faulty"
"""
    served, client = serve(text, rt_factor=0.001)
    final = until(lambda: (st := client.get("/state").json())["status"] not in LIVE and st, "the failure", 60)
    assert final["status"] == "failed" and "injected failure at t = 5 s" in final["reason"]
    assert client.get("/entities/ramp").status_code == 200  # still answering
    assert served.close() == 1
    meta = RunFolder(served.run.run_dir).metadata()
    assert meta["status"] == "failed" and "injected failure" in meta["reason"]
    assert RunFolder(served.run.run_dir).n_rows() == 5  # what was recorded before it is kept


def test_a_json_integer_too_large_for_a_float_is_a_422_not_a_500(serve):
    """``{"p_cap_mw": 1000...0}`` (401 digits) made ``math.isfinite`` raise OverflowError: the
    server answered 500 Internal Server Error. The run goes on either way."""
    served, client = serve(HEAD.format(duration_s=3600) + RAMP, rt_factor=0.01)  # 36 s: running throughout
    answer = client.put("/entities/ramp/inputs", content=b'{"p_cap_mw": 1' + b"0" * 400 + b"}")
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["path"] == "entities.ramp.p_cap_mw" and "give a finite number" in problem["problem"]
    assert client.put("/entities/ramp/inputs", json={"p_cap_mw": 0.5}).status_code == 200
    assert client.get("/state").json()["status"] == "running"


CAMPUS = """
[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 1024
"""


def test_an_open_ended_bound_is_closed_by_the_units_range_not_a_500(serve):
    """A cluster without ``rated_mw`` takes any facility limit from 0 up: the bound (0, inf) broke
    JSON (no infinity) in /entities and in a refusal's ``bounds``; an open end is closed by the unit's
    plausible range (``cosim.sdk.INPUT_RANGES``: 100 GW for a power)."""
    served, client = serve(HEAD.format(duration_s=3600) + CAMPUS, rt_factor=0.05)
    answer = client.get("/entities")
    assert answer.status_code == 200, answer.text
    (campus,) = [e for e in answer.json() if e["id"] == "campus"]
    limit = [i for i in campus["inputs"] if i["name"] == "p_limit_mw"][0]
    assert limit == {"name": "p_limit_mw", "low": 0.0, "high": 100_000.0}
    refused = client.put("/entities/campus/inputs", json={"p_limit_mw": -5})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["bounds"] == [0.0, 100_000.0]


RIDE_THROUGH = """
[sims.rt]
adapter = "ride_through"

[entities.ups]
sim = "rt"
model = "RideThrough"
perc1 = { fcease_frac = 1.0 }

[entities.plain]
sim = "rt"
model = "RideThrough"
"""


def test_a_perc1_share_from_outside_on_a_ride_through_with_its_own_perc1_is_refused_not_a_failed_run(serve):
    """A PERC1 share put on a RideThrough that has its own perc1 would be two PERC1 in series, which
    stops the run at its next step: the server refuses it (422 naming the entity, the input and why);
    the run goes on, and the same input on a RideThrough without perc1 is taken."""
    served, client = serve(HEAD.format(duration_s=3600) + RIDE_THROUGH, rt_factor=0.01)
    answer = client.put("/entities/ups/inputs", json={"p_grid_connected_frac": 0.5})
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["path"] == "entities.ups.p_grid_connected_frac"
    assert "own perc1" in problem["problem"] and "in series" in problem["problem"]
    assert client.put("/entities/plain/inputs", json={"p_grid_connected_frac": 0.5}).status_code == 200
    assert client.get("/state").json()["status"] == "running"
