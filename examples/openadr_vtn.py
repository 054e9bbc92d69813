"""A small OpenADR 2.0b VTN on loopback, to try ``cosim serve --vtn`` against (openleadr).

    .venv/bin/python examples/openadr_vtn.py [--port 8080] [--in-min 20] [--hours 1] [--mw 0.4]
        [--signal LOAD_DISPATCH/delta]

It registers any VEN (as ``ven-<name>``), asks each for its real-power telemetry every second,
and once a VEN has registered sends it one event: ``--signal`` with payload ``--mw``, starting
``--in-min`` minutes from now (wall clock), ``--hours`` long, with a 15 min ramp-up. It prints the
VEN's answer and the readings it reports. Ctrl-C stops it. ``vtn``, ``send`` and ``free_port`` are
used by the tests and the figure script of the OpenADR guide. Needs the ``protocols`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
from datetime import datetime, timedelta, timezone
from typing import Callable

from openleadr import OpenADRServer


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def vtn(port: int, on_report: Callable[[list], None], poll_s: float = 1.0,
              on_register: Callable[[str], None] | None = None, host: str = "127.0.0.1") -> OpenADRServer:
    """A running VTN on ``host:port`` that registers any VEN and asks its telemetry every second."""
    server = OpenADRServer(vtn_id="EXAMPLE-VTN", http_host=host, http_port=port,
                           requested_poll_freq=timedelta(seconds=poll_s), show_fingerprint=False)

    def on_create_party_registration(info: dict):
        ven_id = f"ven-{info['ven_name']}"
        if on_register is not None:
            on_register(ven_id)
        return ven_id, f"reg-{info['ven_name']}"

    def on_register_report(ven_id, resource_id, measurement, unit, scale, min_sampling_interval,
                           max_sampling_interval):  # openleadr reads these names: keep them all
        return (lambda data, **_: on_report(data)), timedelta(seconds=1)

    server.add_handler("on_create_party_registration", on_create_party_registration)
    server.add_handler("on_register_report", on_register_report)
    await server.run()
    return server


def send(server: OpenADRServer, ven_id: str, start: datetime, duration: timedelta, payload: float,
         on_answer: Callable[[str], None], signal: str = "LOAD_DISPATCH/delta", resource_id: str = "campus",
         ramp_up: timedelta = timedelta(minutes=15)) -> str:
    """Queue one event for ``ven_id``; ``on_answer`` gets its ``optIn``/``optOut``. Its event id."""
    name, kind = signal.split("/")
    return server.add_event(ven_id=ven_id, signal_name=name, signal_type=kind,
                            intervals=[{"dtstart": start, "duration": duration, "signal_payload": payload}],
                            targets=[{"resource_id": resource_id}], ramp_up_period=ramp_up,
                            callback=lambda ven_id, event_id, opt_type: on_answer(opt_type))


async def main(args: argparse.Namespace) -> None:
    registered: list[str] = []
    readings: list = []

    def on_report(data: list) -> None:
        readings.extend(data)
        for when, value in data:
            print(f"VTN: reading {when:%H:%M:%S} UTC  {value:.3f} MW", flush=True)

    server = await vtn(args.port, on_report, on_register=registered.append)
    print(f"VTN: listening on http://127.0.0.1:{args.port}/OpenADR2/Simple/2.0b", flush=True)
    try:
        while not registered:
            await asyncio.sleep(0.2)
        start = (datetime.now(timezone.utc) + timedelta(minutes=args.in_min)).replace(second=0, microsecond=0)
        send(server, registered[0], start, timedelta(hours=args.hours), args.mw,
             lambda answer: print(f"VTN: {registered[0]} answered {answer}", flush=True), args.signal)
        print(f"VTN: sent {args.signal} {args.mw:g} to {registered[0]}, {start:%H:%M} UTC for {args.hours:g} h",
              flush=True)
        while True:
            await asyncio.sleep(3600)
    finally:
        await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--in-min", type=float, default=20.0, help="minutes from now to the event's start")
    parser.add_argument("--hours", type=float, default=1.0, help="the event's length")
    parser.add_argument("--mw", type=float, default=0.4, help="the payload (MW, or the signal's own unit)")
    parser.add_argument("--signal", default="LOAD_DISPATCH/delta",
                        help="NAME/TYPE, e.g. SIMPLE/level, LOAD_CONTROL/x-loadControlCapacity")
    args = parser.parse_args()
    for name in ("openleadr", "apscheduler"):  # their per-second INFO/WARNING lines hide the result
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        asyncio.run(main(args))
    except KeyboardInterrupt:
        pass
