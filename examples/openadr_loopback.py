"""A campus as an OpenADR 2.0b VEN against a real openleadr VTN on loopback.

    .venv/bin/python examples/openadr_loopback.py [--level 3]

Starts an ``openleadr.OpenADRServer`` on 127.0.0.1 (a free port) and a VEN whose ``on_event`` is
``cosim.adapters.openadr_events.event_on_handler``; the VTN sends one SIMPLE event starting in three
hours; the VEN opts in (or out, by its policy) and logs it; a 6 h cut of scenarios/openadr_month.toml
applies the received log; the VEN reports the run's metered power to the VTN. Prints what each side saw.
Needs the ``protocols`` extra (openleadr).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
from openleadr import OpenADRClient, OpenADRServer

import cosim
from cosim.adapters.openadr_events import VenParams, VenSchedule, event_on_handler, telemetry_callback

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _until(predicate, what: str) -> None:
    for _ in range(int(WAIT_S * 10)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise SystemExit(f"no {what} within {WAIT_S} s")


def _run(log: Path, start: datetime, out: Path):
    scenario = out / "openadr_cut.toml"
    text = (ROOT / "scenarios/openadr_month.toml").read_text()
    scenario.write_text(text.replace('"data/openadr/july_2024_vtn_log.jsonl"', f'"{log}"')
                        .replace("start = 2024-07-01T00:00:00Z", f"start = {start:%Y-%m-%dT%H:%M:%SZ}")
                        .replace("duration_s = 2_678_400", "duration_s = 21_600"))
    return cosim.run(scenario, out_dir=out, overrides={"scenario.engine": "direct"})


async def main(level: int, out: Path) -> None:
    port = _free_port()
    start = (datetime.now(timezone.utc) + timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    opted, received, readings = [], [], []

    vtn = OpenADRServer(vtn_id="example-vtn", http_host="127.0.0.1", http_port=port,
                        requested_poll_freq=timedelta(seconds=1), show_fingerprint=False)
    vtn.add_handler("on_create_party_registration", lambda info: ("ven-campus", "reg-1"))

    def on_register_report(ven_id, resource_id, measurement, unit, scale, min_sampling_interval,
                           max_sampling_interval):  # openleadr reads these names: keep them all
        return (lambda data, **_: received.extend(data)), timedelta(seconds=1)

    vtn.add_handler("on_register_report", on_register_report)
    await vtn.run()

    params = VenParams(file=str(ROOT / "scenarios/data/openadr/example_vtn_log.jsonl"),
                       resource_ids=["campus"], max_shed_mw=0.6)
    log = out / "received.jsonl"
    handler = event_on_handler(VenSchedule(), params, lambda: datetime.now(timezone.utc), log)
    ven = OpenADRClient(ven_name="campus", vtn_url=f"http://127.0.0.1:{port}/OpenADR2/Simple/2.0b", allow_jitter=False)
    ven.add_handler("on_event", handler)
    telemetry = telemetry_callback(lambda: readings)
    ven.add_report(telemetry, resource_id="campus", measurement="real_power",
                   data_collection_mode="full", unit="W", scale="M", sampling_rate=timedelta(seconds=1),
                   report_duration=timedelta(hours=6))
    await ven.run()
    try:
        vtn.add_event(ven_id="ven-campus", signal_name="SIMPLE", signal_type="level",
                      intervals=[{"dtstart": start, "duration": timedelta(hours=2), "signal_payload": level}],
                      targets=[{"resource_id": "campus"}], ramp_up_period=timedelta(minutes=15),
                      callback=lambda ven_id, event_id, opt_type: opted.append(opt_type))
        await _until(lambda: opted, "answer from the VEN")
        print(f"VTN: the VEN answered {opted[0]} to SIMPLE level {level} at {start:%H:%M} UTC")
        if opted[0] != "optIn":
            return
        result = await asyncio.to_thread(_run, log, start - timedelta(hours=3), out)
        ts = pd.read_parquet(result.run_dir / "timeseries.parquet").set_index("time_utc")
        event = ts[ts["responder.dr_requested_mw"] > 0]
        print(f"run: requested {event['responder.dr_requested_mw'].max():.2f} MW, delivered "
              f"{event['responder.dr_delivered_mw'].mean():.3f} MW on average against a "
              f"{event['responder.p_baseline_mw'].iloc[0]:.3f} MW baseline ({result.run_dir})")
        readings.extend((t.to_pydatetime(), float(v)) for t, v in ts["responder.p_metered_mw"].items())
        await _until(lambda: len(received) >= len(readings), "telemetry report")
        print(f"VTN: received {len(received)} metered readings, {received[0][0]:%H:%M}-{received[-1][0]:%H:%M} UTC")
    finally:
        telemetry.stop.set()  # a report call still waiting for readings returns
        await ven.stop()
        await vtn.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", type=int, default=3, choices=range(4), help="the SIMPLE level sent")
    args = parser.parse_args()
    for name in ("openleadr", "apscheduler"):  # their per-second INFO/WARNING lines hide the result
        logging.getLogger(name).setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.level, Path(tmp)))
