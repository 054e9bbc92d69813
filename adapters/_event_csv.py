"""Events from a small CSV file: one row an event, ``t_s,duration_s,<what>`` (faults, line trips)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Callable

from cosim.adapters._bounded_read import check_event_file_size


def read_events(path: Path, what: str, parse: Callable[[str], object], must: str) -> list[tuple[float, float, object]]:
    """The ``(t_s, duration_s, <what>)`` rows of ``path`` (lines starting with ``#`` are comments).

    Args:
        what: the third column's name; ``parse`` turns its text into the value.
        must: what a bad row is told (``"t_s, duration_s and vm_pu must be numbers"``).

    Raises:
        ValueError: naming the file, and the row of a bad value.
    """
    check_event_file_size(path)  # read whole: within a stated size (a ValueError naming the file and limit)
    rows = [line for line in Path(path).read_text(encoding="utf-8-sig").splitlines() if not line.startswith("#")]
    reader = csv.DictReader(rows)
    if [c for c in ("t_s", "duration_s", what) if c not in (reader.fieldnames or [])]:
        raise ValueError(f"{Path(path).name}: the header must name t_s, duration_s and {what}")
    found = []
    for number, row in enumerate(reader, start=2):
        try:
            event = (float(row["t_s"]), float(row["duration_s"]), parse(row[what]))
        except (TypeError, ValueError):
            raise ValueError(f"{Path(path).name}: row {number}: {must}") from None
        numbers = [v for v in event if isinstance(v, float)]
        if not all(math.isfinite(v) for v in numbers):  # nan/inf parse as floats: a trip that never happens
            raise ValueError(f"{Path(path).name}: row {number}: {must} (finite; got {row['t_s']}, {row['duration_s']}, "
                             f"{row[what]})")
        found.append(event)
    return found
