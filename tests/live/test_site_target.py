"""Site load targets on a live run served in this process (uvicorn on a thread, 127.0.0.1, a free
port): a target lowers a datacenter campus's measured power along its ramp through the facility
limit (``p_limit_mw``), power-status reports it, an unreachable target (below the campus's idle
draw) is a ``target_not_met`` event on the server-sent event stream; bad requests are 404 / 422.
The tracking logic is also checked on its own (:class:`cosim.live.site.SiteTargets`).
"""

from __future__ import annotations

import json

import httpx
import pytest

from cosim.live.site import SiteTargets
from tests.live.test_live_run import HEAD, Served

CAMPUS = """
[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 1024
rated_mw = 2.0
training = { source = "synthetic", n_jobs = 40, span_s = 600 }
"""


@pytest.fixture
def campus(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text(HEAD.format(duration_s=14400).replace("step_s = 1", "step_s = 60") + CAMPUS)
    served = Served(path, tmp_path / "runs", rt_factor=0.003)  # a 60 s step every 0.18 s of wall time
    yield served, httpx.Client(base_url=served.server.url, timeout=10.0)
    served.close()


def _sse(client: httpx.Client, path: str, until_event: str, limit: int = 200) -> list[dict]:
    """The events of a server-sent stream up to and with the first ``until_event`` (or its end)."""
    found, kind = [], None
    with client.stream("GET", path, timeout=60.0) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: "):]
            elif line.startswith("data: "):
                found.append(json.loads(line[len("data: "):]))
                assert found[-1]["event"] == kind
                if kind == until_event or len(found) >= limit:
                    break
    return found


def test_a_target_lowers_the_campus_within_its_ramp_and_an_unreachable_one_is_a_breach(campus, until):
    served, client = campus
    # the synthetic jobs fill the campus over its first 10 minutes: wait until it draws ~0.7 MW
    until(lambda: (client.get("/site/campus/power-status").json()["p_mw"] or 0) > 0.65, "the campus to fill")
    before = client.get("/site/campus/power-status").json()
    assert before["ramp_state"] == "none" and before["range_mw"] == [0.0, 2.0] and before["facility_limit_mw"] == 2.0
    assert before["at_facility_limit"] is False

    answer = client.put("/site/campus/load-target", json={"target_p_mw": 0.55, "ramp_mw_per_min": 0.05, "hold_s": None})
    assert answer.status_code == 200, answer.text
    started = answer.json()
    assert started["ramp_state"] == "ramping" and started["target"]["target_p_mw"] == 0.55
    ramp_end_s = started["target"]["ramp_end_s"]
    assert ramp_end_s > started["applies_from_s"]  # 0.1+ MW at 0.05 MW/min: a few minutes
    # the limit moves along the ramp, not at once: the first step's limit is above the target
    assert started["p_limit_mw"] > 0.55

    events = _sse(client, "/site/campus/events", "ramp_end")
    assert [e["event"] for e in events] == ["target_set", "ramp_end"]
    assert events[-1]["met"] is True and events[-1]["time_s"] >= ramp_end_s
    status = client.get("/site/campus/power-status").json()
    assert status["ramp_state"] == "holding" and status["met"] is True
    assert status["p_mw"] <= 0.55 + status["target"]["tolerance_mw"] and status["p_limit_mw"] == 0.55
    held = client.get("/entities/campus").json()["held"]
    assert held == {"p_limit_mw": 0.55}  # the target acts through the facility limit

    # below the idle draw of 1024 GPUs (~0.45 MW): the limit is held at 0, the physics cannot follow
    answer = client.put("/site/campus/load-target", json={"target_p_mw": 0.0, "ramp_mw_per_min": 1.0, "hold_s": 600})
    assert answer.status_code == 200, answer.text
    seq = max(e["seq"] for e in events)
    breach = _sse(client, f"/site/campus/events?after={seq}", "target_not_met")
    assert [e["event"] for e in breach] == ["target_released", "target_set", "ramp_end", "target_not_met"]
    assert breach[-1]["shortfall_mw"] > 0.3 and breach[-1]["p_mw"] > 0.3
    status = client.get("/site/campus/power-status").json()
    assert status["met"] is False and status["ramp_state"] == "holding"

    # released after its hold: the scenario's own limit (none) applies again
    until(lambda: client.get("/site/campus/power-status").json()["ramp_state"] == "released", "the hold to end")
    assert client.get("/entities/campus").json()["held"] == {}


def test_bad_site_requests_are_named(campus):
    served, client = campus
    answer = client.put("/site/hall_b/load-target", json={"target_p_mw": 1.0, "ramp_mw_per_min": 0.1})
    assert answer.status_code == 404 and "no site 'hall_b'" in answer.json()["detail"] and "campus" in answer.json()["detail"]
    assert client.get("/site/hall_b/power-status").status_code == 404
    assert client.get("/site/hall_b/events").status_code == 404
    answer = client.put("/site/campus/load-target", json={"target_p_mw": 5.0, "ramp_mw_per_min": 0.1, "hold_s": 60})
    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]
    assert problem["path"] == "sites.campus.target_p_mw" and problem["value"] == 5.0
    assert "5 MW is outside campus's range [0, 2] MW" in problem["problem"] and "give a target within it" in problem["problem"]
    answer = client.put("/site/campus/load-target", json={"target_p_mw": 1.0, "ramp_mw_per_min": 0, "hold_s": -1, "mw": 1})
    assert answer.status_code == 422
    assert {p["path"] for p in answer.json()["detail"]} == {
        "sites.campus.ramp_mw_per_min", "sites.campus.hold_s", "sites.campus.mw"}
    assert client.put("/site/campus/load-target", content=b"{").status_code == 400
    assert client.get("/site/campus/power-status").json()["ramp_state"] == "none"  # nothing was set


def test_the_ramp_the_hold_and_the_facility_limit_on_their_own():
    sites = SiteTargets({"s": (0.0, 10.0)}, {"s": 8.0})
    assert sites.sites["s"].facility_limit_mw == 8.0
    sites.after_step(0.0, 60.0, {"s": {"p_mw": 6.0}})
    limit = sites.set_target("s", 3.0, 1.0, 120.0, 60.0, 60.0)  # 3 MW down at 1 MW/min: 3 steps
    assert limit == 5.0
    limits = [sites.after_step(t, 60.0, {"s": {"p_mw": 6.0 - (t - 60.0) / 60.0 - 1.0}}) for t in (60.0, 120.0, 180.0)]
    assert limits == [{"s": 4.0}, {"s": 3.0}, {}]
    assert sites.status("s")["ramp_state"] == "holding" and sites.status("s")["met"] is True
    sites.after_step(240.0, 60.0, {"s": {"p_mw": 3.0}})
    assert sites.after_step(300.0, 60.0, {"s": {"p_mw": 9.0}}) == {"s": None}  # hold over: released
    kinds = [e["event"] for e in sites.events_after("s", 0)]
    assert kinds == ["target_set", "ramp_end", "facility_limit_reached", "target_not_met", "target_released"]
    assert sites.status("s")["at_facility_limit"] is True


def test_a_site_at_its_facility_limit_says_so(tmp_path, until):
    """The scenario's own facility limit (0.3 MW) is below the idle draw of 1024 H100s: the site is
    at its limit from the first step, and the adapter reports what it could not shed."""
    path = tmp_path / "site.toml"
    path.write_text(HEAD.format(duration_s=3600).replace("step_s = 1", "step_s = 60")
                    + CAMPUS.replace("rated_mw = 2.0", "rated_mw = 2.0\np_limit_mw = 0.3"))
    served = Served(path, tmp_path / "runs", rt_factor=0.003)
    try:
        client = httpx.Client(base_url=served.server.url, timeout=10.0)
        (event,) = _sse(client, "/site/campus/events", "facility_limit_reached")
        assert event["facility_limit_mw"] == 0.3 and event["p_mw"] >= 0.3
        status = client.get("/site/campus/power-status").json()
        assert status["facility_limit_mw"] == 0.3 and status["at_facility_limit"] is True
        assert status["p_limit_excess_mw"] > 0 and status["ramp_state"] == "none"
    finally:
        served.close()
