"""A live run as an OpenADR 2.0b VEN: a real openleadr VTN on loopback in the test process, a
:class:`cosim.live.LiveRun` of the month scenario cut to six hours on a fast clock, and the run's
:class:`cosim.live.ven.LiveVen` registered with it.

    VTN (OpenADRServer, 127.0.0.1) --oadrDistributeEvent--> LiveVen (openleadr client, own thread)
      on_event -> parse_event + policy -> the Events entity's schedule (at the run's instant) -> responder
      LiveRun step -> responder.p_metered_mw -> telemetry (full mode) --oadrUpdateReport--> VTN

The first test serves the run as ``cosim serve --vtn`` does (:class:`cosim.live.server.LiveServer`).
Checks: the event sheds the campus during its window and not before; the readings the VTN
receives equal the run's recorded parquet (times and values); a VTN stopped mid-event leaves the
run going on the accepted event, which still ends at its end time, with the VEN's status saying
the VTN is unreachable since then; a VTN that is not there fails registration with a message.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

openleadr = pytest.importorskip("openleadr")

from cosim.live import LiveRun, load_live  # noqa: E402
from cosim.live.metrics import exposition  # noqa: E402
from cosim.live.server import LiveServer, bind  # noqa: E402
from cosim.live.ven import RECEIVED_LOG, STATUS_FILE, LiveVen, VenError, granules  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 30.0  # every wait on the wire is bounded
RT_FACTOR = 0.0004  # wall seconds per simulated second: 6 h in ~9 s, a 300 s step every 0.12 s
STEP = timedelta(seconds=300)


async def _until(predicate, what: str, wait_s: float = WAIT_S) -> None:
    for _ in range(int(wait_s * 20)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {what} within {wait_s} s")


def _scenario(tmp_path: Path, start: datetime) -> Path:
    """scenarios/openadr_month.toml with no recorded events, starting now, six hours long."""
    text = (ROOT / "scenarios/openadr_month.toml").read_text()
    scenario = tmp_path / "live_ven.toml"
    scenario.write_text(text.replace('file = "data/openadr/july_2024_vtn_log.jsonl"',
                                     'telemetry = "responder.p_metered_mw"\nven_name = "campus"')
                        .replace("start = 2024-07-01T00:00:00Z", f"start = {start:%Y-%m-%dT%H:%M:%SZ}")
                        .replace("duration_s = 2_678_400", "duration_s = 21_600"))
    return scenario


def _example():
    """examples/openadr_vtn.py: the loopback VTN (registers any VEN as ven-<name>, asks telemetry every second)."""
    spec = importlib.util.spec_from_file_location("openadr_vtn", ROOT / "examples" / "openadr_vtn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()
_free_port = EXAMPLE.free_port


async def _vtn(port: int, received: list):
    return await EXAMPLE.vtn(port, received.extend)


def _send(server, start: datetime, hours: tuple[float, float], mw: float, opted: list) -> None:
    EXAMPLE.send(server, "ven-campus", start + timedelta(hours=hours[0]), timedelta(hours=hours[1] - hours[0]), mw,
                 opted.append)


def _live(tmp_path: Path, port: int, start: datetime) -> tuple[LiveRun, LiveVen]:
    scn = load_live(_scenario(tmp_path, start), {"scenario.rt_factor": RT_FACTOR}, None)
    run = LiveRun(scn, tmp_path / "runs", report=False)
    said: list[str] = []
    ven = LiveVen(run, f"http://127.0.0.1:{port}/OpenADR2/Simple/2.0b", register_timeout_s=10,
                  flush_timeout_s=10, say=said.append)
    ven.said = said
    return run, ven


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(second=0, microsecond=0)


def test_live_ven_sheds_during_the_event_and_reports_the_run(tmp_path):
    asyncio.run(_shed_and_report(tmp_path))


async def _shed_and_report(tmp_path: Path) -> None:
    port, received, opted = _free_port(), [], []
    server = await _vtn(port, received)
    start = _now()
    run, ven = _live(tmp_path, port, start)
    try:
        await asyncio.to_thread(ven.start)
        assert ven.status()["vtn"] == "reachable" and ven.status()["ven_id"] == "ven-campus"
        _send(server, start, (2.0, 4.0), 0.5, opted)
        await _until(lambda: opted, "opt-in from the VEN")
        assert opted == ["optIn"]
        served = LiveServer(run, bind("127.0.0.1", 0), exit_at_end=True, say=lambda _: None, ven=ven)
        code = await asyncio.to_thread(served.serve)  # cosim serve's object: steps, serves, then closes the VEN
        assert code == 0 and run.status == "ok", run.reason
        await _until(lambda: len(received) >= len(ven.readings), "telemetry of the whole run")
    finally:
        await asyncio.to_thread(run.stop)
        await asyncio.to_thread(ven.close)
        await server.stop()

    ts = pd.read_parquet(run.run_dir / "timeseries.parquet").set_index("time_utc")
    event_start = start + timedelta(hours=2)
    during = ts[(ts.index >= event_start + timedelta(minutes=10)) & (ts.index < event_start + timedelta(hours=2))]
    before = ts[(ts.index >= event_start - timedelta(hours=1)) & (ts.index < event_start - timedelta(minutes=15))]
    after = ts[ts.index >= event_start + timedelta(hours=2, minutes=5)]
    assert during["responder.dr_requested_mw"].eq(0.5).all()
    assert before["responder.dr_requested_mw"].eq(0).all() and after["responder.dr_requested_mw"].eq(0).all()
    assert during["responder.dr_delivered_mw"].mean() > 0.9 * 0.5  # the site meter sheds
    assert during["campus.p_mw"].mean() < before["campus.p_mw"].mean() - 0.15  # the cluster too

    metered = ts["responder.p_metered_mw"]
    got = pd.Series([v for _, v in received], index=pd.DatetimeIndex([t for t, _ in received]))
    assert list(got.index) == list(metered.index)  # each reading carries the run's simulated instant
    assert got.to_numpy() == pytest.approx(metered.to_numpy(), rel=1e-12)

    logged = (run.run_dir / RECEIVED_LOG).read_text().splitlines()
    assert len(logged) == 1 and json.loads(logged[0])["event"]["event_signals"][0]["intervals"][0]["signal_payload"] == 0.5
    status = json.loads((run.run_dir / STATUS_FILE).read_text())
    assert status["vtn"] == "reachable" and status["n_opt_in"] == 1 and status["n_readings_pending"] == 0


def test_a_vtn_stopped_mid_event_leaves_the_run_on_its_accepted_schedule(tmp_path):
    asyncio.run(_vtn_dies(tmp_path))


async def _vtn_dies(tmp_path: Path) -> None:
    port, received, opted = _free_port(), [], []
    server = await _vtn(port, received)
    start = _now()
    run, ven = _live(tmp_path, port, start)
    event_start, event_end = start + timedelta(hours=2), start + timedelta(hours=5)
    try:
        await asyncio.to_thread(ven.start)
        _send(server, start, (2.0, 5.0), 0.4, opted)
        await _until(lambda: opted, "opt-in from the VEN")
        run.start()
        await _until(lambda: (run.last_step_s or 0) >= 2.5 * 3600, "the run halfway into the event")
        await server.stop()  # the VTN dies mid-event
        stopped_at = datetime.now(timezone.utc)
        await _until(lambda: ven.status()["vtn"] == "unreachable", "unreachable VTN in the VEN's status", 10)
        state = run.state()["ven"]
        assert state["vtn"] == "unreachable" and state["schedule"].startswith("the events accepted before")
        assert datetime.fromisoformat(state["unreachable_since_utc"]) >= stopped_at - timedelta(seconds=1)
        assert state["last_error"]  # what openleadr met (connection refused)
        metrics = exposition(run).decode()
        assert f'cosim_openadr_vtn_reachable{{vtn_url="http://127.0.0.1:{port}/OpenADR2/Simple/2.0b"}} 0.0' in metrics
        await asyncio.to_thread(run.wait, WAIT_S * 2)
        assert run.status == "ok", run.reason
    finally:
        await asyncio.to_thread(run.stop)
        await asyncio.to_thread(ven.close)

    assert any("unreachable since" in line for line in ven.said)
    ts = pd.read_parquet(run.run_dir / "timeseries.parquet").set_index("time_utc")
    during = ts[(ts.index >= event_start) & (ts.index < event_end)]
    assert during["responder.dr_requested_mw"].eq(0.4).all()  # to the end, on the schedule it had
    assert ts[ts.index >= event_end]["responder.dr_requested_mw"].eq(0).all()  # and ended at its end
    assert not ts[ts.index >= event_end]["events.event_active"].any()
    status = json.loads((run.run_dir / STATUS_FILE).read_text())
    assert status["vtn"] == "unreachable" and status["unreachable_since_sim_utc"] is not None
    assert status["n_readings_pending"] > 0  # the telemetry it could not send is counted, not claimed sent


LOAD_CONTROL = [  # (signal type, payload, the output it sets, its value) per adapters/openadr_events.py
    ("x-loadControlCapacity", 0.5, "dr_cap_mw", 1.0),  # half of capacity_mw = 2
    ("x-loadControlLevelOffset", -2, "dr_reduction_mw", 0.3),  # two levels of 0.15 MW
    ("x-loadControlPercentOffset", -25, "dr_reduction_frac", 0.25),
    ("x-loadControlSetpoint", 1.2, "dr_cap_mw", 1.2),
]


def test_load_control_signals_arrive_over_the_wire(tmp_path):
    asyncio.run(_load_control(tmp_path))


async def _load_control(tmp_path: Path) -> None:
    """Each LOAD_CONTROL type, sent by the VTN as XML, reaches the run's schedule as its DR signal."""
    port, answers = _free_port(), []
    server = await _vtn(port, [])
    start = _now()
    scn = load_live(_scenario(tmp_path, start), {"entities.events.capacity_mw": 2.0,
                                                 "entities.events.level_offset_mw": 0.15}, RT_FACTOR)
    run = LiveRun(scn, tmp_path / "runs", report=False)
    ven = LiveVen(run, f"http://127.0.0.1:{port}/OpenADR2/Simple/2.0b", say=lambda _: None)
    try:
        await asyncio.to_thread(ven.start)
        ids = []
        for i, (kind, payload, _, _) in enumerate(LOAD_CONTROL):
            ids.append(server.add_event(ven_id="ven-campus", signal_name="LOAD_CONTROL", signal_type=kind,
                             intervals=[{"dtstart": start + timedelta(hours=i + 1), "duration": timedelta(minutes=30),
                                         "signal_payload": payload}], targets=[{"resource_id": "campus"}],
                             callback=lambda ven_id, event_id, opt_type: answers.append(opt_type)))
        await _until(lambda: len(answers) == len(LOAD_CONTROL), "an answer to each event")
        assert answers == ["optIn"] * len(LOAD_CONTROL), ven.status()["refused"]
        for i, (kind, _, output, value) in enumerate(LOAD_CONTROL):
            out = ven.schedule.at(start + timedelta(hours=i + 1, minutes=10))
            assert out["event_active"] and out[output] == pytest.approx(value), kind
        server.cancel_event("ven-campus", ids[0])  # a cancellation withdraws the event from its reception on
        await _until(lambda: not ven.schedule.at(start + timedelta(hours=1, minutes=10))["event_active"],
                     "the cancellation at the VEN")
    finally:
        await asyncio.to_thread(run.stop)
        await asyncio.to_thread(ven.close)
        await server.stop()


def test_registration_with_no_vtn_fails_within_its_bound(tmp_path):
    port = _free_port()  # nothing listens there
    run, ven = _live(tmp_path, port, _now())
    began = time.monotonic()
    with pytest.raises(VenError, match=rf"--vtn http://127.0.0.1:{port}/OpenADR2/Simple/2.0b: the VEN 'campus' "
                                       r"could not register \(.*\); check the URL"):
        ven.start()
    assert time.monotonic() - began < 30  # bounded (the connect timeout is 5 s; refused is at once)
    run.stop()


def test_serve_with_an_unreachable_vtn_says_so_and_exits_1(tmp_path):
    port = _free_port()
    proc = subprocess.run([sys.executable, "-m", "cosim", "serve", str(_scenario(tmp_path, _now())), "--port", "0",
                           "--out", str(tmp_path / "runs"), "--vtn", f"http://127.0.0.1:{port}/OpenADR2/Simple/2.0b",
                           "--no-report"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "could not register" in proc.stderr and "Traceback" not in proc.stderr
    assert "Warning" not in proc.stderr  # no library's deprecation noise around the one message
    (folder,) = (tmp_path / "runs").iterdir()  # the run folder says why it never ran
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["status"] == "stopped" and "the VEN did not join its VTN" in metadata["reason"]


def test_serve_without_vtn_contacts_nothing_and_names_the_flag(tmp_path):
    scn = load_live(_scenario(tmp_path, _now()), {"entities.events.vtn_url": "http://192.0.2.1:8080/OpenADR2/Simple/2.0b",
                                                  "scenario.duration_s": 600}, RT_FACTOR)
    run = LiveRun(scn, tmp_path / "runs", report=False)
    run.start()
    assert run.wait(WAIT_S)
    assert "ven" not in run.state()  # no VEN without --vtn


def test_granules_average_over_the_requested_granularity():
    t0 = datetime(2024, 7, 1, tzinfo=timezone.utc)
    readings = [(t0 + i * STEP, float(i)) for i in range(5)]
    assert granules(readings, t0, 1.0, 300.0) == readings  # finer than the step: one reading a step
    assert granules(readings, t0, 600.0, 300.0) == [(t0, 0.5), (t0 + 2 * STEP, 2.5)]  # the last is incomplete
