"""Write the synthetic VTN logs of this folder (deterministic; no randomness).

    python scenarios/data/openadr/make_logs.py

``july_2024_vtn_log.jsonl``: a made-up DR programme's month (July 2024) as a VEN would have
received it: weekday-afternoon events of 2-3 h with 15 min ramp-up, announced the day before at
12:00 UTC; SIMPLE levels 1-3 and LOAD_DISPATCH deltas and setpoints; one event modified, one
cancelled, one asking more than the shipped scenario's ``max_shed_mw`` (refused). Not a record
of any real VTN.
``example_vtn_log.jsonl``: the first two events of that month (a short example).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
UTC = timezone.utc
CONTEXT = "oadr://example-utility/datacenter-dr"

#: (day of July, start hour UTC, duration h, signal name, signal type, payload)
EVENTS = [
    (2, 19, 3, "SIMPLE", "level", 1),
    (3, 19, 3, "LOAD_DISPATCH", "delta", 0.3),
    (9, 18, 2, "SIMPLE", "level", 2),
    (10, 19, 3, "LOAD_DISPATCH", "setpoint", 1.6),
    (11, 20, 2, "SIMPLE", "level", 3),            # 0.5 MW at the default levels
    (16, 19, 3, "LOAD_DISPATCH", "delta", 0.4),   # modified to 0.25 MW the morning of
    (17, 19, 3, "SIMPLE", "level", 2),            # cancelled the morning of
    (18, 19, 2, "LOAD_DISPATCH", "delta", 1.2),   # more than the VEN's max_shed_mw: refused
    (23, 18, 3, "SIMPLE", "level", 1),
    (24, 19, 3, "LOAD_DISPATCH", "delta", 0.35),
    (30, 19, 2, "SIMPLE", "level", 2),
]


def _t(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def event(n: int, day: int, hour: int, hours: int, name: str, kind: str, payload: float,
          modification: int = 0, status: str = "far") -> dict:
    start = datetime(2024, 7, day, hour, tzinfo=UTC)
    return {"event_descriptor": {"event_id": f"jul24-{n:02d}", "modification_number": modification,
                                 "event_status": status, "market_context": CONTEXT, "priority": 0,
                                 "created_date_time": _t(start - timedelta(days=1, hours=hour - 11)),
                                 "test_event": False},
            "active_period": {"dtstart": _t(start), "duration": f"PT{hours}H", "ramp_up_period": "PT15M"},
            "event_signals": [{"signal_name": name, "signal_type": kind, "signal_id": f"sig-{n:02d}",
                               "intervals": [{"dtstart": _t(start), "duration": f"PT{hours}H",
                                              "signal_payload": payload, "uid": 0}]}],
            "targets": [{"resource_id": "campus"}], "response_required": "always"}


def lines() -> list[str]:
    out = []
    for n, (day, hour, hours, name, kind, payload) in enumerate(EVENTS, start=1):
        received = datetime(2024, 7, day - 1, 12, tzinfo=UTC)
        out.append((received, event(n, day, hour, hours, name, kind, payload)))
        morning = datetime(2024, 7, day, 9, tzinfo=UTC)
        if day == 16:
            out.append((morning, event(n, day, hour, hours, name, kind, 0.25, modification=1)))
        if day == 17:
            out.append((morning, event(n, day, hour, hours, name, kind, payload, modification=1, status="cancelled")))
    out.sort(key=lambda pair: pair[0])
    return [json.dumps({"received_utc": _t(r), "event": e}, sort_keys=True) for r, e in out]


if __name__ == "__main__":
    month = lines()
    (HERE / "july_2024_vtn_log.jsonl").write_text("\n".join(month) + "\n", encoding="utf-8")
    (HERE / "example_vtn_log.jsonl").write_text("\n".join(month[:2]) + "\n", encoding="utf-8")
