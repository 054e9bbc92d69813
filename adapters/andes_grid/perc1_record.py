"""PERC1's model record: cosim's ``perc1`` parameters as a PSS/E DYR-style line and a table, and back.

A dynamic-data (DYR) record in PSS/E's layout is ``IBUS 'MODEL' ID p1 p2 ... /``: the bus
number, the model name in quotes, the device id, then the parameters, ended by ``/`` (the layout
ANDES's own DYR reader, ``andes.io.psse``, and PSS/E's ``dyre`` read; ``'`` quotes the name and
``/`` ends a record that may run over several lines).

**The parameter order is cosim's own**, ``PARAMS`` below (20 values: Vt0 Vt1 Vt2 Vt3 Fcease Frecon
Tdrecon Trecon Tap Tbp Taq Tbq Fn Dbfl Dbfh Kpf Fl Fh Tfl Tfh). PowerWorld's PERC1 help page
(PowerWorld Simulator help, "Load Characteristic Model: PERC1", October 2025) names Fcease, Frecon,
the P and Q lead/lag time constants (Tap, Tbp, Taq, Tbq) and the low and high frequency deadbands
(Dbfl, Dbfh), and its voltage thresholds Vt0..Vt3 come from LDEV1/PVD1; its full parameter table
and order were not readable to us, so a PowerWorld or PSS/E user maps the columns by name, not by
position: the file written by ``cosim model-record`` starts with ``@!`` comment lines that list the
order, and the table beside it (``perc1_params.csv`` / ``.md``) names every column with its unit.
The frequency trip's four values (Fl, Fh, Tfl, Tfh) take the names of PSS/E's DER_A (DERA1)
``fl``/``fh``/``tfl``/``tfh``; a record of only the 16 values before them reads back with the
frequency trip off.

ANDES's DYR reader has no comment lines: to append a record to a case's DYR for ANDES, leave out
the ``@!`` lines (cosim's own reader skips them, and ``//`` lines).

No physics here: the ceasing logic is ``adapters/ride_through.py`` (co-simulated) and
``adapters/andes_grid/perc1.py`` (inside ANDES).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

#: Record column -> (``perc1`` key in a scenario, unit, meaning), in the record's order.
PARAMS: dict[str, tuple[str, str, str]] = {
    "Vt0": ("vt0_pu", "pu", "voltage at or below which all of Fcease has ceased"),
    "Vt1": ("vt1_pu", "pu", "voltage below which ceasing starts"),
    "Vt2": ("vt2_pu", "pu", "voltage above which ceasing starts (high voltage)"),
    "Vt3": ("vt3_pu", "pu", "voltage at or above which all of Fcease has ceased"),
    "Fcease": ("fcease_frac", "-", "share of the load that can cease"),
    "Frecon": ("frecon_frac", "-", "share of the ceased load that reconnects"),
    "Tdrecon": ("t_recon_delay_s", "s", "time back inside [Vt1, Vt2] before reconnection starts"),
    "Trecon": ("t_recon_s", "s", "reconnection ramp"),
    "Tap": ("tap_s", "s", "P path lead time constant"),
    "Tbp": ("tbp_s", "s", "P path lag time constant (0: no lead-lag)"),
    "Taq": ("taq_s", "s", "Q path lead time constant"),
    "Tbq": ("tbq_s", "s", "Q path lag time constant (0: no lead-lag)"),
    "Fn": ("f_nominal_hz", "Hz", "nominal frequency the deadbands are around"),
    "Dbfl": ("dbfl_hz", "Hz", "low frequency deadband"),
    "Dbfh": ("dbfh_hz", "Hz", "high frequency deadband"),
    "Kpf": ("kpf_frac_per_hz", "1/Hz", "P share change per Hz outside the deadband"),
    "Fl": ("f_trip_low_hz", "Hz", "under-frequency trip threshold (0: no under-frequency trip)"),
    "Fh": ("f_trip_high_hz", "Hz", "over-frequency trip threshold (0: no over-frequency trip)"),
    "Tfl": ("t_f_trip_low_s", "s", "time below Fl before the whole load trips"),
    "Tfh": ("t_f_trip_high_s", "s", "time above Fh before the whole load trips"),
}
MODEL = "PERC1"
#: The frequency trip's keys (0 when a record stops before them: the trip off).
TRIP_KEYS = ("f_trip_low_hz", "f_trip_high_hz", "t_f_trip_low_s", "t_f_trip_high_s")
#: The columns before the frequency trip's: a record of only this many values reads with the trip off.
N_BEFORE_TRIP = 16


def header_lines() -> list[str]:
    """``@!`` comment lines that open a record file: the layout and that the order is cosim's."""
    names = list(PARAMS)
    return ["@! PERC1 records written by cosim (cosim model-record). The parameter order is cosim's own, not",
            "@! PowerWorld's (whose PERC1 table we could not read): map the columns by name (perc1_params.csv).",
            f"@! IBUS 'PERC1' 'ID' {' '.join(names[:10])}",
            f"@!     {' '.join(names[10:])} /"]


def record_line(bus: Any, device_id: str, perc1: dict[str, Any]) -> str:
    """One DYR record of ``perc1`` (a ``Perc1Params`` dump) at ``bus``."""
    values = " ".join(f"{float(perc1[key]):.10g}" for key, _u, _m in PARAMS.values())
    return f"{bus} '{MODEL}' '{device_id}' {values} /"


def table_rows(bus: Any, device_id: str, perc1: dict[str, Any], entity: str) -> list[dict[str, Any]]:
    """The record as rows: entity, bus, id, name, scenario key, value, unit, meaning."""
    return [{"entity": entity, "bus": bus, "id": device_id, "name": name, "key": key, "value": float(perc1[key]),
             "unit": unit, "meaning": meaning} for name, (key, unit, meaning) in PARAMS.items()]


def table_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["name"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def table_md(rows: list[dict[str, Any]]) -> str:
    lines = ["| entity | bus | id | name | scenario key | value | unit | meaning |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['entity']} | {r['bus']} | {r['id']} | {r['name']} | `{r['key']}` | {r['value']:.10g} | {r['unit']} | "
              f"{r['meaning']} |" for r in rows]
    return "\n".join(lines) + "\n"


def read_records(path: str | Path) -> list[tuple[str, str, dict[str, float]]]:
    """Every PERC1 record of a DYR file as ``(bus, id, {perc1 key: value})`` (other models skipped).

    Raises:
        ValueError: a PERC1 record with the wrong number of values, or one that is not a number.
    """
    text = Path(path).read_text()
    records, pending = [], []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("@!", "//")):
            continue
        if "/" not in line:
            pending.append(line)
            continue
        pending.append(line.split("/")[0])
        record, pending = " ".join(pending), []
        parts = record.split("'")
        if len(parts) < 3 or parts[1].strip().upper() != MODEL:
            continue
        bus = parts[0].strip()
        rest = parts[2:]
        if len(rest) >= 3 and not rest[0].strip():  # quoted id: '', id, values
            device_id, values_text = rest[1].strip(), " ".join(rest[2:])
        else:
            fields = " ".join(rest).split()
            device_id, values_text = (fields[0] if fields else ""), " ".join(fields[1:])
        cells = values_text.replace(",", " ").split()
        if len(cells) not in (len(PARAMS), N_BEFORE_TRIP):
            raise ValueError(f"{path}: the PERC1 record at bus {bus} id {device_id!r} has {len(cells)} values; a "
                             f"PERC1 record has {len(PARAMS)}: {', '.join(PARAMS)} (or the first {N_BEFORE_TRIP}, "
                             "without the frequency trip)")
        bad = next(((name, c) for name, c in zip(PARAMS, cells) if not _is_number(c)), None)
        if bad is not None:
            raise ValueError(f"{path}: the PERC1 record at bus {bus} id {device_id!r} has {bad[0]} = {bad[1]!r}, not a "
                             f"number; give {len(PARAMS)} numbers ({', '.join(PARAMS)})")
        values = [float(c) for c in cells]
        given = {key: v for (key, _u, _m), v in zip(PARAMS.values(), values)}
        records.append((bus, device_id, {**dict.fromkeys(TRIP_KEYS, 0.0), **given}))
    if any(f"'{MODEL}'" in line.upper().replace('"', "'") for line in pending):
        raise ValueError(f"{path}: a PERC1 record does not end with '/' ({' '.join(pending).strip()[:80]!r}); end "
                         "each record with ' /' (a record may run over several lines up to its '/')")
    return records


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def find_record(path: str | Path, bus: Any, device_id: str) -> dict[str, float]:
    """The ``perc1`` values of the record at ``bus`` with ``device_id``.

    Raises:
        ValueError: no such record (naming the records there are), or a malformed one.
    """
    records = read_records(path)
    for rec_bus, rec_id, values in records:
        if rec_bus == str(bus) and rec_id == str(device_id):
            return values
    have = ", ".join(f"bus {b} id {i!r}" for b, i, _v in records) or "none"
    raise ValueError(f"{path}: no PERC1 record at bus {bus} with id {device_id!r} (PERC1 records there: {have}); "
                     "write one with `cosim model-record`, or set perc1_id / the entity's bus to a record's")
