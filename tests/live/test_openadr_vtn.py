"""OpenADR 2.0b on the wire: a real openleadr VTN on loopback sends an event to a VEN whose
``on_event`` is the replay adapter's handler; the campus sheds in the run that applies it, and
the telemetry reports the VTN receives equal the run's recorded metered power.

    VTN (OpenADRServer, 127.0.0.1) --oadrDistributeEvent--> VEN (OpenADRClient)
      on_event -> openadr_events.event_on_handler -> log.jsonl -> cosim.run (openadr_month.toml, 6 h)
      VEN add_report(full) <- the run's responder.p_metered_mw --oadrUpdateReport--> VTN
"""

from __future__ import annotations

import asyncio
import importlib.util
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

import cosim

openleadr = pytest.importorskip("openleadr")

from cosim.adapters.openadr_events import VenParams, VenSchedule, event_on_handler, telemetry_callback  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 30.0  # every wait on the wire is bounded


async def _until(predicate, what: str) -> None:
    for _ in range(int(WAIT_S * 10)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {what} within {WAIT_S} s")


def _example():
    """examples/openadr_loopback.py: its loopback helpers (a free port, the scenario cut to six hours)."""
    spec = importlib.util.spec_from_file_location("openadr_loopback", ROOT / "examples" / "openadr_loopback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = _example()
_free_port, _run = EXAMPLE._free_port, EXAMPLE._run


def test_vtn_event_sheds_the_campus_and_reports_the_run(tmp_path):
    asyncio.run(_scenario(tmp_path))


async def _scenario(tmp_path: Path) -> None:
    port = _free_port()
    now = datetime.now(timezone.utc)
    event_start = (now + timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    opted: list[str] = []
    received: list[tuple[datetime, float]] = []
    readings: list[tuple[datetime, float]] = []

    server = openleadr.OpenADRServer(vtn_id="cosim-test-vtn", http_host="127.0.0.1", http_port=port,
                                     requested_poll_freq=timedelta(seconds=1))
    server.add_handler("on_create_party_registration", lambda info: ("ven-campus", "reg-1"))

    def on_register_report(ven_id, resource_id, measurement, unit, scale, min_sampling_interval,
                           max_sampling_interval):
        def on_update_report(data, **_):
            received.extend(data)
        return on_update_report, timedelta(seconds=1)

    server.add_handler("on_register_report", on_register_report)
    await server.run()

    params = VenParams(file=str(ROOT / "scenarios/data/openadr/example_vtn_log.jsonl"), resource_ids=["campus"],
                       ven_id="ven-campus", max_shed_mw=0.6)
    log = tmp_path / "log.jsonl"
    handler = event_on_handler(VenSchedule(), params, lambda: datetime.now(timezone.utc), log)
    client = openleadr.OpenADRClient(ven_name="campus", vtn_url=f"http://127.0.0.1:{port}/OpenADR2/Simple/2.0b",
                                     allow_jitter=False)
    client.add_handler("on_event", handler)
    client.add_report(telemetry_callback(lambda: readings), resource_id="campus",
                      measurement="real_power", data_collection_mode="full", unit="W", scale="M",
                      sampling_rate=timedelta(seconds=1), report_duration=timedelta(hours=6))
    await client.run()
    try:
        server.add_event(ven_id="ven-campus", signal_name="LOAD_DISPATCH", signal_type="delta",
                         intervals=[{"dtstart": event_start, "duration": timedelta(hours=2), "signal_payload": 0.5}],
                         targets=[{"resource_id": "campus"}], ramp_up_period=timedelta(minutes=15),
                         callback=lambda ven_id, event_id, opt_type: opted.append(opt_type))
        await _until(lambda: opted, "opt-in from the VEN")
        assert opted == ["optIn"] and not handler.refused and log.read_text().count("\n") == 1

        result = await asyncio.to_thread(_run, log, event_start - timedelta(hours=3), tmp_path)
        assert result.ok, result.reason
        ts = pd.read_parquet(result.run_dir / "timeseries.parquet").set_index("time_utc")
        during = ts[(ts.index >= event_start + timedelta(minutes=10)) & (ts.index < event_start + timedelta(hours=2))]
        before = ts[(ts.index >= event_start - timedelta(hours=2)) & (ts.index < event_start - timedelta(minutes=15))]
        assert during["responder.dr_requested_mw"].eq(0.5).all()
        assert during["campus.p_mw"].mean() < before["campus.p_mw"].mean() - 0.15  # the cluster sheds (the battery gives the rest)
        assert during["responder.dr_delivered_mw"].mean() > 0.9 * 0.5  # the site meter

        metered = ts["responder.p_metered_mw"]
        readings.extend((t.to_pydatetime(), float(v)) for t, v in metered.items())
        await _until(lambda: len(received) >= len(readings), "telemetry report of the whole run")
        got = pd.Series([v for _, v in received], index=pd.DatetimeIndex([t for t, _ in received]))
        assert list(got.index) == list(metered.index)  # each report carries the run's simulated instant
        assert got.to_numpy() == pytest.approx(metered.to_numpy(), rel=1e-9)
    finally:
        await client.stop()
        await server.stop()
