"""The submittal bundle: a battery folder or a set of run folders packed for a planner, and its check.

``cosim bundle DIR`` writes one zip with:

* ``README.md``: what was run, the verdicts, how to re-run and check it;
* ``manifest.json``: the SHA-256 of every other file, each run's scenario, overrides and
  *result hash* (:func:`result_hash`: the time series' values, not its file), status, the software
  and data versions, and whether failed runs were let in (``allow_failed``);
* ``inputs/``: every scenario file the runs read and the data files they name, in their layout;
* ``runs/<name>/``: per run ``poc.csv`` (the point-of-connection channels at the solver's step),
  ``timeseries.csv`` (every recorded column), ``kpis.json`` and ``metadata.json``;
* ``model/``: the campus's ride-through / PERC1 parameters as a table, and the DYR-style record
  (:data:`DYR_RECORD`, the writer ``cosim model-record`` uses);
* from a battery: ``battery.html``, ``battery.json``, ``verdicts.csv`` and ``plots/``;
* ``versions.txt``: Python, the packages the runs use, the git commit of the cosim source.

``cosim bundle --verify FILE.zip`` unpacks it into a temporary folder, checks every file against
the manifest (naming the first that differs, or is missing, or is not listed), re-runs every run from
the bundled inputs and compares its result hash with the manifest's: the determinism rule (same
scenario and seed, identical results) makes them equal.
"""

from __future__ import annotations

import hashlib
import os
import json
import platform
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cosim.adapters.andes_grid.perc1_record import record_line
from cosim.adapters.ride_through import Perc1Params
from cosim.errors import Problem, ScenarioError
from cosim.folder import RunFolder
from cosim.scenario import read_toml
from cosim.studies.battery import BATTERY_FILE, PAGE_FILE, VERDICTS_FILE, find_site, read_battery
from cosim.studies.battery_criteria import poc_channels
from cosim.studies.sweep import run_variant

MANIFEST = "manifest.json"
README = "README.md"
#: the packages whose versions a bundle records
PACKAGES = ("cosim", "mosaik", "mosaik-api-v3", "andes", "pandapower", "lightsim2grid", "opendssdirect.py",
            "dss-python", "numpy", "scipy", "pandas", "pyarrow", "pydantic", "matplotlib", "dask", "distributed")
#: the scenario keys of a ride-through entity written to the parameter table
PERC1_KEYS = ("vt0_pu", "vt1_pu", "vt2_pu", "vt3_pu", "fcease_frac", "frecon_frac", "t_recon_delay_s", "t_recon_s",
              "tap_s", "tbp_s", "taq_s", "tbq_s", "dbfl_hz", "dbfh_hz", "kpf_frac_per_hz")
#: The PSS/E DYR-style PERC1 record: ``f(bus, load_id, perc1_params) -> str`` with every ``perc1``
#: key (defaults filled in); ``cosim model-record``'s writer. None: the bundle writes
#: ``model/perc1_dyr.txt`` saying the record is not included (the parameter table is).
DYR_RECORD: Callable[[Any, str, dict[str, Any]], str] | None = record_line


class BundleError(ScenarioError):
    """A bundle that cannot be written or does not verify."""


# -- what goes in ------------------------------------------------------------------------------
def runs_of(source: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The runs of a battery folder (from its record) or of a folder of run folders (or one run
    folder): ``[{name, dir, scenario, overrides}]``, and the battery record (None otherwise)."""
    if (source / BATTERY_FILE).is_file():
        record = read_battery(source)
        runs = [{"name": f"{c['test']}-{k}", "dir": source / c["run_dir"], "scenario": Path(record["scenario"]),
                 "overrides": c["overrides"], "label": f"{c['test']}: {c['case']}"}
                for k, c in enumerate(record["cases"]) if c.get("run_dir")]
        return runs, record
    dirs = [source] if (source / "metadata.json").is_file() else sorted(
        p for p in source.iterdir() if p.is_dir() and (p / "metadata.json").is_file())
    if not dirs:
        raise BundleError(source, [Problem("DIR", "neither a battery folder (battery.json) nor a run folder nor a "
                                                  "folder of run folders (metadata.json); give one", str(source))])
    runs = []
    for d in dirs:
        meta = RunFolder(d).metadata()
        # the file where it was (its relative data paths resolve there), else the run's copy of it
        original = Path(meta.get("scenario_file") or d / "scenario.toml")
        runs.append({"name": d.name, "dir": d, "scenario": original if original.is_file() else d / "scenario.toml",
                     "overrides": meta.get("overrides") or {}, "label": d.name})
    return runs, None


def data_files(scenario: Path) -> list[Path]:
    """Files a scenario names by a relative or absolute path (its data traces, case files, envelopes)."""
    found: list[Path] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and ("/" in value or "." in value) and len(value) < 400:
            path = (scenario.parent / value)
            if path.is_file():
                found.append(path.resolve())

    walk(read_toml(scenario))
    return list(dict.fromkeys(found))


def result_hash(ts: pd.DataFrame) -> str:
    """SHA-256 of a time series' values: the index (as nanoseconds) and each column (sorted by name)
    as float64 bytes (text columns as UTF-8), so files with other timestamps or compression hash alike."""
    digest = hashlib.sha256()
    index = ts.index.asi8 if isinstance(ts.index, pd.DatetimeIndex) else np.asarray(ts.index, dtype=float)
    digest.update(np.ascontiguousarray(index).tobytes())
    for name in sorted(ts.columns):
        digest.update(name.encode())
        column = ts[name]
        try:
            values = np.ascontiguousarray(column.to_numpy(dtype=float))
            digest.update(values.tobytes())
        except (TypeError, ValueError):
            digest.update("\x1f".join(map(str, column.tolist())).encode())
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def versions() -> dict[str, Any]:
    """Python, the packages of :data:`PACKAGES` that are installed, and the git commit of the source."""
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"python": platform.python_version(), "platform": platform.platform(), "packages": packages,
            "git_commit": commit, "git_dirty": dirty}


def perc1_table(scenario: Path) -> pd.DataFrame:
    """Every ride-through entity's parameters as rows ``entity, key, value, given``: its ``perc1``
    block with the defaults filled in (``given`` false for a default) and the trip logic as written."""
    raw = read_toml(scenario)
    sims = raw.get("sims", {})
    rows = []
    for eid, body in raw.get("entities", {}).items():
        if sims.get(body.get("sim"), {}).get("adapter") != "ride_through":
            continue
        for key, value in body.items():
            if key in ("sim", "model"):
                continue
            if key == "perc1" and isinstance(value, dict):
                full = Perc1Params(**value).model_dump()
                rows += [{"entity": eid, "key": f"perc1.{k}", "value": v, "given": k in value} for k, v in full.items()]
            else:
                rows.append({"entity": eid, "key": key, "value": value, "given": True})
    return pd.DataFrame(rows, columns=["entity", "key", "value", "given"])


# -- packing -----------------------------------------------------------------------------------
def make_bundle(source: str | Path, out: str | Path | None = None, allow_failed: bool = False) -> Path:
    """Pack ``source`` (a battery folder, a run folder or a folder of run folders) into ``out``.

    Raises:
        BundleError: no runs, or a run not ``ok`` (failed, degraded, interrupted) without ``allow_failed``.
    """
    source = Path(source)
    if not source.is_dir():
        raise BundleError(source, [Problem("DIR", "no such folder; give a battery folder or run folders", str(source))])
    runs, record = runs_of(source)
    statuses = {r["name"]: RunFolder(r["dir"]).status or "missing" for r in runs}
    bad = {n: s for n, s in statuses.items() if s != "ok"}
    if bad and not allow_failed:
        listed = ", ".join(f"{n} ({s})" for n, s in bad.items())
        raise BundleError(source, [Problem("runs", f"not every run finished ok: {listed}; a planner's bundle holds "
                                                   "finished runs: fix and re-run them, or give --allow-failed to "
                                                   "pack them marked as such", len(bad))])
    out = Path(out) if out else source.with_suffix(".zip")
    with tempfile.TemporaryDirectory(prefix="cosim-bundle-") as tmp:
        stage = Path(tmp)
        entries = _stage(stage, source, runs, record, statuses)
        manifest = {"created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "kind": "battery" if record else "runs", "allow_failed": bool(bad), "failed_runs": bad,
                    "versions": versions(), "runs": entries,
                    "files": {str(p.relative_to(stage)): sha256_file(p)
                              for p in sorted(stage.rglob("*")) if p.is_file()}}
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
        (stage / "versions.txt").write_text(_versions_text(manifest["versions"]), encoding="utf-8")
        manifest["files"]["versions.txt"] = sha256_file(stage / "versions.txt")
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(stage.rglob("*")):
                if path.is_file():
                    zf.write(path, str(path.relative_to(stage)))
    return out


def _stage(stage: Path, source: Path, runs: list[dict[str, Any]], record: dict[str, Any] | None,
           statuses: dict[str, str]) -> list[dict[str, Any]]:
    scenarios = list(dict.fromkeys(r["scenario"].resolve() for r in runs))
    inputs = {s: [s, *data_files(s)] for s in scenarios}
    every = [p for files in inputs.values() for p in files]
    root = Path(_common_root(every))
    for path in every:
        target = stage / "inputs" / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    entries = []
    for run in runs:
        folder = RunFolder(run["dir"])
        dest = stage / "runs" / run["name"]
        dest.mkdir(parents=True)
        entry = {"name": run["name"], "label": run["label"], "status": statuses[run["name"]],
                 "scenario": str(Path("inputs") / run["scenario"].resolve().relative_to(root)),
                 "overrides": run["overrides"], "result_sha256": None}
        for name in ("kpis.json", "metadata.json"):
            if (folder.path / name).is_file():
                (dest / name).write_bytes((folder.path / name).read_bytes())
        if folder.series_path.is_file():
            ts = folder.timeseries()
            entry["result_sha256"] = result_hash(ts)
            ts.to_csv(dest / "timeseries.csv")
            where = _poc_of(run["scenario"], record)
            if where is not None:
                poc_channels(ts, *where).to_csv(dest / "poc.csv", index=False)
        entries.append(entry)
    _model(stage, scenarios, record)
    if record is not None:
        for name in (BATTERY_FILE, VERDICTS_FILE, PAGE_FILE):
            (stage / name).write_bytes((source / name).read_bytes())
        for png in sorted((source / "plots").glob("*.png")):
            (stage / "plots").mkdir(exist_ok=True)
            (stage / "plots" / png.name).write_bytes(png.read_bytes())
    (stage / README).write_text(_readme(entries, record), encoding="utf-8")
    return entries


def _poc_of(scenario: Path, record: dict[str, Any] | None) -> tuple[str, str | None] | None:
    """The point of connection and ride-through entity of a run (None: its scenario has no point of connection)."""
    if record is not None:
        return record["poc"], record["ride_through"]
    try:
        site = find_site(scenario)
    except ScenarioError:
        return None
    return site.poc, site.ride_through


def _common_root(paths: list[Path]) -> str:
    return os.path.commonpath([str(p.parent) for p in paths])


def _model(stage: Path, scenarios: list[Path], record: dict[str, Any] | None) -> None:
    (stage / "model").mkdir()
    tables = [perc1_table(s) for s in scenarios]
    columns = ["entity", "key", "value", "given"]
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=columns)
    table.to_csv(stage / "model" / "perc1_parameters.csv", index=False)
    if DYR_RECORD is None:
        text = ("The PSS/E DYR-style PERC1 record is not included: this cosim has no DYR writer "
                "(cosim.studies.bundle.DYR_RECORD is None). The parameters are in perc1_parameters.csv.\n")
    else:
        raw = read_toml(scenarios[0])
        where = _poc_of(scenarios[0], record)
        bus = raw["entities"][where[0]].get("bus") if where else None
        lines = []
        for eid in table["entity"].unique():
            mine = table[table["entity"] == eid]
            params = {k.removeprefix("perc1."): v for k, v in zip(mine["key"], mine["value"]) if k.startswith("perc1.")}
            if params:
                lines.append(DYR_RECORD(bus, str(eid), params))
        text = "\n".join(lines) + "\n"
    (stage / "model" / "perc1_dyr.txt").write_text(text, encoding="utf-8")


def _versions_text(v: dict[str, Any]) -> str:
    lines = [f"python {v['python']} ({v['platform']})", f"cosim git commit {v['git_commit']}"
             + (" (with uncommitted changes)" if v.get("git_dirty") else "")]
    lines += [f"{name}=={version}" for name, version in v["packages"].items()]
    return "\n".join(lines) + "\n"


def _readme(entries: list[dict[str, Any]], record: dict[str, Any] | None) -> str:
    failed = [e for e in entries if e["status"] != "ok"]
    lines = ["# cosim submittal bundle", ""]
    if failed:
        lines += ["**WARNING: this bundle holds runs that did not finish ok (packed with --allow-failed):** "
                  + ", ".join(f"{e['name']} ({e['status']})" for e in failed), ""]
    if record:
        lines += [f"A model-quality test battery of `{record['scenario_name']}` at the point of connection "
                  f"`{record['poc']}` on the {record['engine']} engine (steps of {record['step_s']:g} s). Verdicts: "
                  "`verdicts.csv` and `battery.html` (with the plots in `plots/`).", "",
                  "| test | case | verdict |", "|---|---|---|"]
        lines += [f"| {c['test']} | {c['case']} | {c['verdict']} |" for c in record["cases"]]
        lines.append("")
    lines += ["## Contents", "",
              "- `inputs/`: the scenario files and the data files they name, in their layout",
              "- `runs/<name>/`: `poc.csv` (P, Q, V, f at the point of connection at the solver's step), "
              "`timeseries.csv` (every recorded column), `kpis.json`, `metadata.json`",
              "- `model/`: `perc1_parameters.csv` (the ride-through / PERC1 parameters) and `perc1_dyr.txt`",
              "- `versions.txt`: Python, packages and the cosim git commit the bundle was made with (each run's "
              "own commit and versions are in its `metadata.json`)",
              "- `manifest.json`: SHA-256 of every file, and per run its scenario, overrides and result hash", "",
              "## Runs", "", "| run | what | status | scenario |", "|---|---|---|---|"]
    lines += [f"| {e['name']} | {e['label']} | {e['status']} | `{e['scenario']}` |" for e in entries]
    lines += ["", "## Re-run and check", "",
              "With cosim installed at the commit in `versions.txt`:", "",
              "```", "cosim bundle --verify THIS.zip", "```",
              "", "checks every file's SHA-256 and re-runs every run from `inputs/` with its overrides "
              "(`manifest.json`), comparing the SHA-256 of its time series' values with the recorded one. One run by "
              "hand: `cosim run inputs/<scenario> --set KEY=VALUE ...` with the run's overrides.", ""]
    return "\n".join(lines)


# -- checking ----------------------------------------------------------------------------------
def verify_bundle(path: str | Path, rerun: bool = True) -> list[dict[str, Any]]:
    """Check ``path``'s files against its manifest and re-run its runs; returns one row per run
    (``name``, ``expected``, ``got``, ``match``).

    Raises:
        BundleError: not a bundle, a file whose hash differs (named), missing or unlisted, or a run
            whose result hash differs.
    """
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise BundleError(path, [Problem("FILE", "not a zip file; give a bundle written by cosim bundle", str(path))])
    with tempfile.TemporaryDirectory(prefix="cosim-verify-") as tmp:
        stage = Path(tmp)
        with zipfile.ZipFile(path) as zf:
            zf.extractall(stage)
        if not (stage / MANIFEST).is_file():
            raise BundleError(path, [Problem(MANIFEST, "missing: not a cosim bundle, or its manifest was removed")])
        manifest = json.loads((stage / MANIFEST).read_text(encoding="utf-8"))
        _check_files(path, stage, manifest["files"])
        rows = []
        if rerun:
            for entry in manifest["runs"]:
                rows.append(_rerun(stage, entry))
        bad = [r for r in rows if not r["match"]]
        if bad:
            raise BundleError(path, [Problem(f"runs/{r['name']}", f"re-run result differs: recorded {r['expected']}, "
                                                                  f"re-run {r['got']} ({r['reason']})") for r in bad])
        return rows


def _check_files(path: Path, stage: Path, files: dict[str, str]) -> None:
    problems = []
    present = {str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file()} - {MANIFEST}
    for name, digest in sorted(files.items()):
        if name not in present:
            problems.append(Problem(name, "listed in the manifest but missing from the bundle"))
        elif sha256_file(stage / name) != digest:
            problems.append(Problem(name, "SHA-256 differs from the manifest's: the file was changed after packing",
                                    sha256_file(stage / name)[:16]))
    problems += [Problem(name, "in the bundle but not in the manifest: added after packing") for name in
                 sorted(present - set(files))]
    if problems:
        raise BundleError(path, problems)


def _rerun(stage: Path, entry: dict[str, Any]) -> dict[str, Any]:
    row = {"name": entry["name"], "expected": entry["result_sha256"], "got": None, "reason": ""}
    run_dir = stage / "rerun" / entry["name"]
    result = run_variant(str(stage / entry["scenario"]), entry["overrides"], str(run_dir))
    folder = RunFolder(run_dir)
    if folder.series_path.is_file():
        row["got"] = result_hash(folder.timeseries())
    row["reason"] = f"re-run {result['status']}" + (f": {result.get('reason')}" if result.get("reason") else "")
    row["match"] = row["got"] == row["expected"]
    return row


def print_rows(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if r["expected"] is None:  # a run packed with --allow-failed that recorded nothing
            print(f"{r['name']}: no recorded result to compare ({r['reason']})", file=sys.stdout)
        else:
            verdict = "identical" if r["match"] else "DIFFERS"
            print(f"{r['name']}: {verdict} ({(r['got'] or '-')[:16]})", file=sys.stdout)
