"""The run folder: the one place that reads and writes ``runs/<name>-<time>/`` (DESIGN.md).

A run folder holds ``scenario.toml`` (the file as given), ``timeseries.parquet``,
``metadata.json`` (status, reason, versions, roles...), ``kpis.json`` and ``report.html``.
The runner, the engines, sweeps, hosting studies, the report and ``cosim compare`` all go
through :class:`RunFolder`, so the keys and the file handling are defined once. JSON files
are replaced atomically (written beside, then renamed), so a reader never sees half a file.

This module sits below the run, KPI and report stages (it imports none of them), so each of
them can use it without an import cycle.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tomllib
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from cosim import registry
from cosim.roles import RunRoles
from cosim.scenario.schema import SIM_KEYS

SERIES = "timeseries.parquet"
METADATA = "metadata.json"
KPIS = "kpis.json"
SCENARIO = "scenario.toml"
REPORT = "report.html"


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``a.b.c`` keys."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def json_safe(value: Any) -> Any:
    """NaN and inf become None, recursively, so a JSON file stays strict JSON."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_json_checked(path: Path) -> tuple[dict[str, Any], str | None]:
    """``(object, problem)``: the JSON object, or ``{}`` and why it cannot be used (None: absent)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"{path.name} is unreadable: {exc}"
    try:
        value = json.loads(text)
    except ValueError as exc:
        return {}, f"{path.name} is not valid JSON: {exc}"
    if not isinstance(value, dict):
        return {}, f"{path.name} holds a JSON {type(value).__name__}, not an object: ignored"
    return value, None


def write_json(path: Path, value: dict[str, Any]) -> None:
    """Write ``value`` as indented strict JSON, atomically (a reader sees the old or the new file)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(json_safe(value), indent=2, default=str) + "\n")
    os.replace(tmp, path)


class RunFolder:
    """One run folder (it need not exist yet).

    Args:
        path: the folder, e.g. ``runs/default-20261201T090000Z``.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @classmethod
    def new(cls, out_dir: str | Path, name: str) -> "RunFolder":
        """A new ``<out_dir>/<name>-<UTC timestamp>`` folder, made unique with a counter."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        candidate = Path(out_dir) / f"{name}-{stamp}"
        n = 1
        while candidate.exists():
            n += 1
            candidate = Path(out_dir) / f"{name}-{stamp}-{n}"
        candidate.mkdir(parents=True)
        return cls(candidate)

    # -- files -------------------------------------------------------------------------------
    @property
    def series_path(self) -> Path:
        return self.path / SERIES

    @property
    def scenario_path(self) -> Path:
        return self.path / SCENARIO

    @property
    def report_path(self) -> Path:
        return self.path / REPORT

    # -- metadata and KPIs -------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """``metadata.json`` as a dict; ``{}`` when absent or damaged."""
        return read_json_checked(self.path / METADATA)[0]

    def metadata_checked(self) -> tuple[dict[str, Any], str | None]:
        return read_json_checked(self.path / METADATA)

    def kpis(self) -> dict[str, Any]:
        """``kpis.json`` as a dict; ``{}`` when absent or damaged."""
        return read_json_checked(self.path / KPIS)[0]

    def kpis_checked(self) -> tuple[dict[str, Any], str | None]:
        return read_json_checked(self.path / KPIS)

    def write_metadata(self, meta: dict[str, Any]) -> None:
        write_json(self.path / METADATA, meta)

    def write_kpis(self, kpis: dict[str, Any]) -> None:
        write_json(self.path / KPIS, kpis)

    @property
    def status(self) -> str | None:
        """The run's status (``ok``, ``failed``, ``interrupted``, ``running``…); None without metadata."""
        return self.metadata().get("status")

    def is_finished(self) -> bool:
        """The run finished ``ok`` and its KPIs are on disk."""
        return self.status == "ok" and (self.path / KPIS).is_file()

    def write_failed(self, reason: str) -> None:
        """Mark a run that never started (invalid variant, crash before the engine) as failed."""
        self.path.mkdir(parents=True, exist_ok=True)
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.write_metadata({"status": "failed", "reason": reason, "started_utc": started, "wall_s": None})

    def set_aside(self) -> Path | None:
        """Clear the folder for a new attempt without losing an earlier failed one.

        A folder whose run finished ``ok`` is removed (it is being redone on purpose); any other
        (failed, interrupted, unreadable) is renamed to ``<name>.failed-<n>``, the first free
        ``n``, and that path returned, so its log and partial series stay for diagnosis.
        """
        if not self.path.exists():
            return None
        if self.status == "ok":
            shutil.rmtree(self.path)
            return None
        n = 1
        while (target := self.path.with_name(f"{self.path.name}.failed-{n}")).exists():
            n += 1
        self.path.rename(target)
        return target

    def sweep_row(self) -> dict[str, Any]:
        """The run as a sweep row: status, reason, wall time, folder and flattened KPIs."""
        meta = self.metadata()
        row: dict[str, Any] = {"status": meta.get("status", "failed"),
                               "reason": meta.get("reason") if meta else "no metadata.json (the run did not finish)",
                               "wall_s": meta.get("wall_s"), "run_dir": str(self.path)}
        row.update({f"kpi.{k}": v for k, v in flatten(self.kpis()).items()})
        return row

    # -- what the run was ---------------------------------------------------------------------
    def roles(self) -> RunRoles:
        """The run's roles from ``metadata.json``; for a folder written before roles were
        recorded, from its ``scenario.toml`` and the adapters' METAs (empty when neither works)."""
        meta = self.metadata()
        if "roles" in meta:
            return RunRoles.from_json(meta.get("roles"))
        source = meta.get("scenario_file")
        return roles_from_scenario(self.scenario_raw(), Path(source).parent if isinstance(source, str) else None)

    def entity_info(self) -> dict[str, dict[str, Any]]:
        """Per entity: sim, adapter, model, role, bus (``metadata.json``'s ``entities``)."""
        info = self.metadata().get("entities")
        return info if isinstance(info, dict) else {}

    def scenario_raw(self) -> dict[str, Any]:
        """The run's ``scenario.toml`` as a table; ``{}`` when missing or unreadable."""
        return self.scenario_checked()[0]

    def scenario_checked(self) -> tuple[dict[str, Any], str | None]:
        """``(table, problem)`` of ``scenario.toml`` (problem None: fine or absent)."""
        try:
            raw = tomllib.loads(self.scenario_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}, None
        except (OSError, ValueError) as exc:
            return {}, f"{SCENARIO} is unreadable: {exc}"
        bad = [k for k in ("scenario", "sims", "entities") if k in raw and not isinstance(raw[k], dict)]
        if bad:
            return {}, f"{SCENARIO} is malformed ({', '.join(bad)} not a table)"
        return raw, None

    # -- the time series ----------------------------------------------------------------------
    def column_names(self) -> list[str]:
        """Recorded columns (``time_utc`` excluded); empty without a readable series."""
        try:
            return [c for c in pq.ParquetFile(self.series_path).schema_arrow.names if c != "time_utc"]
        except (OSError, ValueError, pa.ArrowException):
            return []

    def n_rows(self) -> int:
        """Rows in the series (0 when absent or unreadable)."""
        try:
            return pq.ParquetFile(self.series_path).metadata.num_rows
        except (OSError, ValueError, pa.ArrowException):
            return 0

    def timeseries(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The recorded time series, indexed by UTC time (``time_utc``)."""
        return read_timeseries(self.series_path, columns)

    def numeric_columns(self, columns: list[str]) -> pd.DataFrame:
        """Numeric columns as one float block, row group by row group (see :func:`read_numeric_columns`)."""
        return read_numeric_columns(self.series_path, columns)

    def numeric_reader(self) -> Callable[[list[str]], pd.DataFrame]:
        """Several :meth:`numeric_columns` reads of the series, opened once (see :func:`numeric_reader`)."""
        return numeric_reader(self.series_path)


def roles_from_scenario(raw: dict[str, Any], base_dir: Path | None = None) -> RunRoles:
    """Entity roles from a scenario table without validating it: each entity's ``role`` key, else
    its model's role in the adapter's META for the sim's params (``other`` where that cannot be
    told: an adapter gone, a data file moved)."""
    sims = raw.get("sims") if isinstance(raw.get("sims"), dict) else {}
    entities = raw.get("entities") if isinstance(raw.get("entities"), dict) else {}
    out = RunRoles()
    for eid, body in entities.items():
        if not isinstance(body, dict):
            continue
        roles = body.get("roles") if isinstance(body.get("roles"), dict) else {}
        out.columns.update({f"{eid}.{attr}": role for attr, role in roles.items() if isinstance(role, str)})
        sim = sims.get(body.get("sim")) if isinstance(body.get("sim"), str) else None
        adapter = sim.get("adapter") if isinstance(sim, dict) else None
        params = {k: v for k, v in sim.items() if k not in SIM_KEYS} if isinstance(sim, dict) else {}
        out.entities[eid] = body.get("role") or _model_role(adapter, params, body.get("model"), base_dir)
    return RunRoles.from_json(out.to_json())


def _model_role(adapter: Any, params: dict[str, Any], model: Any, base_dir: Path | None) -> str:
    try:
        cls = registry.adapter_class(str(adapter))
        meta = cls.META if model in cls.META.get("models", {}) else cls.meta_for(
            cls.SimParams.model_validate(params, context={"base_dir": base_dir}))
    except Exception:  # noqa: BLE001 — an adapter gone, params no longer valid, data moved: unknown role
        return "other"
    return meta.get("models", {}).get(str(model), {}).get("role", "other")


def read_parquet(path: Path | str, columns: list[str] | None = None) -> pd.DataFrame:
    """``pd.read_parquet`` of a local file, opened by pyarrow itself. Given a path alone, pandas opens the
    file as a Python object, and pyarrow's scan threads may drop their last reference to it after the
    interpreter began to exit: the process then aborts at its end ("terminate called without an active
    exception", exit code 134; apache/arrow#34314), seen in ~1 of 4 scripts that ran and read several runs."""
    return pd.read_parquet(str(path), columns=columns, filesystem=LOCAL_FILES)


#: pyarrow's own local file system (:func:`read_parquet`)
LOCAL_FILES = pafs.LocalFileSystem()


def read_timeseries(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Read ``timeseries.parquet`` with ``time_utc`` as the index."""
    wanted = None if columns is None else ["time_utc", *columns]
    return read_parquet(path, columns=wanted).set_index("time_utc")


def read_numeric_columns(path: Path, columns: list[str]) -> pd.DataFrame:
    """Read numeric columns of ``timeseries.parquet`` one row group at a time into one
    preallocated float block (flags become 0/1, nulls NaN), indexed by UTC time.

    For long runs: ``pd.read_parquet`` of a year's KPI columns peaked at ~5x their size
    (multi-threaded decode, then conversion); this stays near 2x.
    """
    return numeric_reader(path)(columns)


def numeric_reader(path: Path) -> Callable[[list[str]], pd.DataFrame]:
    """:func:`read_numeric_columns` for several reads of one file: ``columns -> frame``, the file
    opened (its footer parsed: ~10 ms for 200 columns) and its times read once, every frame on the
    same index (the KPIs read one block's columns at a time)."""
    pf = pq.ParquetFile(path)
    n_rows = pf.metadata.num_rows
    index: pd.DatetimeIndex | None = None

    def read(columns: list[str]) -> pd.DataFrame:
        nonlocal index
        times = np.empty(n_rows, "datetime64[ns]") if index is None else None
        block = np.empty((n_rows, len(columns)), float, order="F")
        if columns or times is not None:
            at = 0
            for group in range(pf.num_row_groups):
                first = ["time_utc"] if times is not None else []
                table = pf.read_row_group(group, columns=[*first, *columns], use_threads=False)
                rows = table.num_rows
                if times is not None:
                    times[at:at + rows] = table.column(0).cast(pa.timestamp("ns")).to_numpy()
                for i in range(len(columns)):
                    block[at:at + rows, i] = table.column(i + len(first)).cast(pa.float64()).to_numpy(zero_copy_only=False)
                at += rows
        if times is not None:
            index = pd.DatetimeIndex(times, name="time_utc").tz_localize("UTC")
        return pd.DataFrame(block, index=index, columns=list(columns), copy=False)

    return read
