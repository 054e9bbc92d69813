"""A live run whose grid is driven past what it can solve, or cut from its source, through the REST API,
on each grid engine: ``/state`` says ``degraded`` from that step, ``/entities/feeder`` serves null (not
the last solved values), ``/metrics`` NaN, and the run folder ends ``degraded``.

Scenario (a feeder and one element, steered over HTTP)::

    PUT /entities/pcc/inputs {"p_mw": ...} --> pcc (Load) --> feeder (Grid) --> recorder
    PUT /entities/feeder/inputs {"line_<id>_in_service": 0} ----^
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cosim.folder import RunFolder
from cosim.live import LiveRun, load_live
from cosim.live.server import LiveServer, bind

SCENARIO = """
[scenario]
name = "live_feeder"
start = 2024-07-15T00:00:00Z
duration_s = 3600
step_s = 60

[sims.grid]
adapter = "grid"
network = "{network}"
{sim_extra}

[entities.feeder]
sim = "grid"
model = "Grid"

[entities.pcc]
sim = "grid"
model = "Load"
bus = "{bus}"
p_mw = 1.0
{element_extra}
"""

#: engine -> scenario keys, the line feeding the element, a load there without a solution [MW]
ENGINES = {
    "pandapower": ({"network": "ieee33", "bus": "18", "sim_extra": "profiles = false", "element_extra": ""},
                   "line_1_2_in_service", 5.0),
    "opendss": ({"network": "ieee13", "bus": "675", "sim_extra": 'engine = "opendss"\nregulators = "fixed"',
                 "element_extra": "vmin_pu = 0.5"}, "line_671_692_in_service", 30.0),
}


def in_fresh_process(request, engine: str) -> bool:
    """Run an OpenDSS case in a pytest of its own and say whether this one is done.

    The OpenDSS engine (DSS C-API) crashed stepping a live run's thread in a test process that had
    imported ``opendssdirect`` at collection (another test module) before its first engine context;
    ``cosim serve`` imports it only with its first context, as a fresh process here does."""
    if engine != "opendss" or os.environ.get("COSIM_TEST_FRESH_PROCESS") == "1":
        return False
    env = {**os.environ, "COSIM_TEST_FRESH_PROCESS": "1"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                          request.node.nodeid], cwd=request.config.rootpath, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return True


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(engine: str):
        keys = ENGINES[engine][0]
        path = tmp_path / "live.toml"
        path.write_text(SCENARIO.format(**keys))
        run = LiveRun(load_live(path, {}, 0.05), tmp_path / "runs", report=False)  # 3 s a step of 60 s
        server = LiveServer(run, bind("127.0.0.1", 0), say=lambda text: None)
        thread = threading.Thread(target=server.serve, daemon=True)
        thread.start()
        started.append((server, thread))
        return run, httpx.Client(base_url=server.url, timeout=10.0)

    yield start
    for server, thread in started:
        server.shutdown()
        thread.join(timeout=30)


def _metric(client: httpx.Client, entity: str, attr: str) -> float | None:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "cosim_output" and sample.labels == {"entity": entity, "attr": attr}:
                return sample.value
    return None


@pytest.mark.parametrize("engine", list(ENGINES))
def test_an_unsolved_grid_is_degraded_and_served_as_unknown(serve, until, engine, request):
    if in_fresh_process(request, engine):
        return
    run, client = serve(engine)
    until(lambda: client.get("/state").json()["n_steps"] >= 1, "the first step")
    assert client.get("/state").json()["status"] == "running"
    assert math.isfinite(_metric(client, "feeder", "vm_min_pu"))
    fail_mw = ENGINES[engine][2]
    assert client.put("/entities/pcc/inputs", json={"p_mw": fail_mw}).status_code == 200
    state = until(lambda: (st := client.get("/state").json())["status"] == "degraded" and st, "degraded", 60)
    assert "did not converge" in state["reason"]
    feeder = client.get("/entities/feeder").json()["outputs"]
    assert feeder["converged"] is False and feeder["vm_min_pu"] is None and feeder["p_import_mw"] is None
    pcc = client.get("/entities/pcc").json()["outputs"]
    assert pcc["p_mw"] == fail_mw and pcc["p_served_mw"] is None and pcc["vm_pu"] is None
    assert math.isnan(_metric(client, "feeder", "vm_min_pu")) and math.isnan(_metric(client, "pcc", "p_served_mw"))
    # a degraded run still takes inputs: the operator can take the load back
    assert client.put("/entities/pcc/inputs", json={"p_mw": 1.0}).status_code == 200
    run.stop("test over")
    meta = RunFolder(run.run_dir).metadata()
    assert meta["status"] == "stopped"  # stopped early; the parquet keeps the NaN rows
    ts = RunFolder(run.run_dir).timeseries(["feeder.converged", "feeder.vm_min_pu"])
    unsolved = ~ts["feeder.converged"].astype(bool)
    assert unsolved.any() and ts.loc[unsolved, "feeder.vm_min_pu"].isna().all()


@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_deenergised_element_makes_the_live_run_degraded(serve, until, engine, request):
    if in_fresh_process(request, engine):
        return
    run, client = serve(engine)
    until(lambda: client.get("/state").json()["n_steps"] >= 1, "the first step")
    line = ENGINES[engine][1]
    assert client.put("/entities/feeder/inputs", json={line: 0}).status_code == 200
    state = until(lambda: (st := client.get("/state").json())["status"] == "degraded" and st, "degraded", 60)
    assert "buses without voltage" in state["reason"]
    pcc = client.get("/entities/pcc").json()["outputs"]
    assert pcc["p_served_mw"] == 0.0 and pcc["vm_pu"] is None and pcc["p_mw"] == 1.0
    feeder = client.get("/entities/feeder").json()["outputs"]
    assert feeder["converged"] is True and feeder["n_buses_unsupplied"] >= 1


def test_a_served_run_that_ends_degraded_exits_3(tmp_path):
    """``cosim serve --exit-at-end`` on a run whose feeder has an unsolvable load from the start: the
    run folder says ``degraded`` and the server returns 3, as ``cosim run`` does (not 0)."""
    keys = dict(ENGINES["pandapower"][0], element_extra="")
    path = tmp_path / "live.toml"
    path.write_text(SCENARIO.format(**keys).replace("duration_s = 3600", "duration_s = 180").replace(
        "p_mw = 1.0", f"p_mw = {ENGINES['pandapower'][2]}"))
    run = LiveRun(load_live(path, {}, 0.001), tmp_path / "runs", report=False)
    server = LiveServer(run, bind("127.0.0.1", 0), exit_at_end=True, say=lambda text: None)
    assert server.serve() == 3
    assert RunFolder(run.run_dir).metadata()["status"] == "degraded"
