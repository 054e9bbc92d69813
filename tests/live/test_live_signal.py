"""The live-signal adapter against local sources: an HTTP JSON endpoint and a fake Prometheus query
API (the JSON shape of Prometheus's ``/api/v1/query``), both on 127.0.0.1; failures hold the last
value and count, never raise; the params are checked like any scenario's."""

from __future__ import annotations

import math
import threading

import pytest

from cosim.adapters import live_signal
from cosim.adapters.live_signal import LiveSignalSim, SourceError, at_pointer, prometheus_value
from cosim.errors import ScenarioError
from cosim.scenario import load_scenario

START = {"start_utc": "2024-07-15T00:00:00+00:00", "step_s": 60, "duration_s": 3600, "seed": 1}


def started(**params) -> LiveSignalSim:
    sim = LiveSignalSim()
    sim.init("live", time_resolution=1.0, **START, **params)
    sim.create(1, "LiveSignal", eid="sig")
    return sim


def outputs(sim: LiveSignalSim, t: int) -> dict:
    sim.step(t, {}, 3600)
    return sim.get_data({"sig": sim.meta["models"]["LiveSignal"]["outputs"]})["sig"]


def test_json_source_value_then_held_and_flagged_when_the_source_dies(make_source, until):
    src = make_source(lambda path, query: (200, {"data": {"ci": 123.5, "list": [1, 2]}}))
    sim = started(url=f"{src.url}/now", pointer="/data/ci", fallback={"ci_g_kwh": 400.0}, timeout_s=0.5, poll_s=0.05)
    try:
        first = outputs(sim, 0)  # the first read is awaited: the value is there at step 0
        assert first["ci_g_kwh"] == 123.5 and first["n_failed_polls"] == 0 and 0 <= first["age_s"] < 60
        assert src.requests[0][0] == "/now"
        src.stop()
        until(lambda: outputs(sim, 60)["n_failed_polls"] >= 2, "failed polls to be counted")
        held = outputs(sim, 120)
        assert held["ci_g_kwh"] == 123.5 and held["age_s"] > 0  # the last good value, flagged stale
    finally:
        sim.finalize()


def test_fallback_before_the_first_success_is_flagged(make_source):
    src = make_source(lambda path, query: (503, {"error": "warming up"}))
    sim = started(url=src.url, fallback={"price_usd_mwh": 42.0}, timeout_s=0.5, poll_s=60.0)
    try:
        out = outputs(sim, 0)
        assert out["price_usd_mwh"] == 42.0 and out["n_failed_polls"] == 1 and math.isnan(out["age_s"])
    finally:
        sim.finalize()


def _prometheus(series):
    def answer(path, query):
        if path != "/api/v1/query":
            return 404, {"status": "error", "error": f"no {path}"}
        if query.get("query") == ["broken("]:
            return 400, {"status": "error", "errorType": "bad_data", "error": "parse error"}
        return 200, {"status": "success", "data": {"resultType": "vector", "result": series}}
    return answer


def test_prometheus_instant_query_against_a_fake_api(make_source):
    series = [{"metric": {"__name__": "site_power_watts", "site": "a"}, "value": [1721001600.0, "1500000"]}]
    src = make_source(_prometheus(series))
    sim = started(url=src.url, source="prometheus", query='sum(site_power_watts{site="a"}) / 1e6',
                  fallback={"p_site_mw": 0.0}, timeout_s=0.5, poll_s=60.0)
    try:
        out = outputs(sim, 0)
        assert out == {"p_site_mw": 1_500_000.0, "n_failed_polls": 0, "age_s": out["age_s"]}
        path, query = src.requests[0]
        assert path == "/api/v1/query" and query == {"query": ['sum(site_power_watts{site="a"}) / 1e6']}
    finally:
        sim.finalize()


def test_prometheus_answers_that_give_no_single_number():
    with pytest.raises(SourceError, match="2 series"):
        prometheus_value({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {}, "value": [0, "1"]}, {"metric": {}, "value": [0, "2"]}]}}, "up")
    with pytest.raises(SourceError, match="0 series"):
        prometheus_value({"status": "success", "data": {"resultType": "vector", "result": []}}, "up")
    with pytest.raises(SourceError, match="parse error"):
        prometheus_value({"status": "error", "error": "parse error"}, "broken(")
    with pytest.raises(SourceError, match="not a finite number"):
        prometheus_value({"status": "success", "data": {"resultType": "scalar", "result": [0, "NaN"]}}, "x")
    assert prometheus_value({"status": "success", "data": {"resultType": "scalar", "result": [0, "2.5"]}}, "x") == 2.5


def test_json_pointer():
    doc = {"a": {"b/c": [10, {"d": 7}]}, "flag": True, "text": "12"}
    assert at_pointer(doc, "/a/b~1c/1/d") == 7.0
    assert at_pointer(3.25, "") == 3.25
    for pointer, match in [("/a/x", "no 'x'"), ("/a/b~1c/5", "no '5'"), ("/flag", "not a finite number"),
                           ("/text", "not a finite number")]:
        with pytest.raises(SourceError, match=match):
            at_pointer(doc, pointer)


def test_a_source_slower_than_its_timeout_counts_as_failed(make_source):
    release = threading.Event()

    def slow(path, query):
        release.wait(5)  # answers only after the test has seen the timeout
        return 200, {"v": 1.0}

    src = make_source(slow)
    try:
        with pytest.raises(SourceError, match="no answer"):
            live_signal.read_source(live_signal.SimParams.model_validate(
                {"url": src.url, "pointer": "/v", "fallback": {"t_dry_c": 20.0}, "timeout_s": 0.2}))
    finally:
        release.set()


@pytest.mark.parametrize("sim, problem", [
    ({"url": "ftp://x/y"}, "http:// or https://"),
    ({"source": "prometheus"}, "needs query"),
    ({"query": "up"}, "query is for source = 'prometheus'"),
    ({"fallback": {"ci": 1.0}}, "fallback.ci: name the output with its unit suffix"),
    ({"fallback": {"a_mw": 1.0, "b_mw": 2.0}}, "exactly one output"),
    ({"pointer": "data/ci"}, "starts with '/'"),
    ({"timeout_s": 0}, "timeout_s"),
])
def test_bad_params_are_scenario_problems_with_their_key(tmp_path, sim, problem):
    table = {"url": "http://127.0.0.1:9/", "fallback": {"ci_g_kwh": 1.0}, **sim}
    lines = "\n".join(f"{k} = {_toml(v)}" for k, v in table.items())
    path = tmp_path / "live.toml"
    path.write_text(f'[scenario]\nname = "live"\nstart = 2024-07-15T00:00:00Z\nduration_s = 60\nstep_s = 1\n\n'
                    f'[sims.feed]\nadapter = "live_signal"\n{lines}\n\n'
                    '[entities.sig]\nsim = "feed"\nmodel = "LiveSignal"\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "sims.feed" in str(info.value) and problem in str(info.value)


def _toml(value):
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
