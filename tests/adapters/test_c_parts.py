"""Every compiled C part (the adapters' ``adapters/<package>/_*.c`` and the core's ``cosim/run/_*.c``, built by ``make build``) is loaded only when it
was built from its source as it is now (:func:`cosim.sdk.load_library`: the SHA-256 compiled into it), so a
library of another text (an edited source, a copy from another checkout) never runs, whatever the files' times.
One that is not used warns once per process, naming the file and ``make build``; what became of each (and of the
pandapower engine's kept solver analysis) is in the run's ``metadata.json``, so a last-bit difference between
two machines can be traced to it."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from c_part_marks import missing_c_part

import cosim
from cosim import adapters, sdk
from cosim.sdk import CPartWarning, load_library

#: every C part's source: the adapters' (adapters/<package>/_*.c), then the core's (cosim/run/_*.c)
SOURCES = sorted(Path(adapters.__path__[0]).glob("*/_*.c")) + sorted(Path(cosim.__file__).parent.glob("run/_*.c"))
#: the module of each C part whose import loads it (and runs the adapter's own check of its numbers)
LOADERS = {"cosim/run/_engine.so": "cosim.sdk", "datacenter/_inference.so": "cosim.adapters.datacenter.inference_kernel",
           "datacenter/_kernels.so": "cosim.adapters.datacenter.kernels",
           "datacenter/_scheduler.so": "cosim.adapters.datacenter.scheduler_kernel", "fmu/_exchange.so": "cosim.adapters.fmu.calls",
           "grid/_kernels.so": "cosim.adapters.grid.pandapower_flow",
           "grid/_opendss_kernels.so": "cosim.adapters.grid.opendss_reads"}


def test_every_c_part_is_found():
    assert len(SOURCES) >= 7, SOURCES  # the grid's two, the FMU exchange, the datacenter's three, the engine's
    assert sorted(LOADERS) == sorted(sdk._c_part_name(s.with_suffix(".so")) for s in SOURCES)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: sdk._c_part_name(p))
def test_loaded_only_when_built_from_its_source_as_it_is(source, tmp_path):
    built = source.with_suffix(".so")
    if not built.is_file():
        missing_c_part(str(built))
    assert load_library(built) is not None, f"{built} is stale: run make build"
    lib, copy = tmp_path / built.name, tmp_path / source.name
    shutil.copy(built, lib)
    copy.write_text(source.read_text() + "\n/* edited */\n")
    os.utime(lib, (copy.stat().st_mtime + 10, copy.stat().st_mtime + 10))  # the library the newer file
    with pytest.warns(CPartWarning, match="another text"):
        assert load_library(lib) is None
    with pytest.warns(CPartWarning, match="not built"):
        assert load_library(tmp_path / "missing.so") is None


def test_a_library_not_used_warns_once_naming_the_file_and_the_fix(tmp_path):
    """Missing, stale or not a library: one :class:`CPartWarning` per library and process, with the path and
    ``make build``; a second load of the same file is silent, and each outcome is recorded."""
    missing, broken = tmp_path / "_gone.so", tmp_path / "_broken.so"
    broken.write_bytes(b"not a shared library")
    broken.with_suffix(".c").write_text("/* its source */\n")
    with pytest.warns(CPartWarning) as caught:
        for _ in range(3):
            assert load_library(missing) is None and load_library(broken) is None
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2, messages
    assert all("make build" in m for m in messages)
    assert f"{broken} is not a library" in messages[0] and f"{missing} is not built" in messages[1]
    parts = sdk.c_parts()
    assert parts[str(missing.resolve())] == {"used": False, "status": "not built", "source_sha256": None,
                                             "built_from_sha256": None}
    assert parts[str(broken.resolve())]["status"] == "not loadable"
    assert parts[str(broken.resolve())]["source_sha256"] == hashlib.sha256(b"/* its source */\n").hexdigest()


def test_a_library_its_adapter_refuses_is_recorded_as_not_used(tmp_path):
    """A library built from its source but whose numbers its adapter's check found not numpy's on this machine
    (:func:`cosim.sdk.library_agrees`) is not used, and the record says why."""
    source = SOURCES[0]
    if not source.with_suffix(".so").is_file():
        missing_c_part(str(source.with_suffix(".so")))
    shutil.copy(source, tmp_path / source.name)
    shutil.copy(source.with_suffix(".so"), tmp_path / source.with_suffix(".so").name)
    lib = load_library(tmp_path / source.with_suffix(".so").name)
    name = str((tmp_path / source.with_suffix(".so").name).resolve())
    assert lib is not None and sdk.c_parts()[name]["used"]
    assert sdk.library_agrees(lib, True) is lib and sdk.c_parts()[name]["used"]
    assert sdk.library_agrees(lib, False) is None
    assert sdk.c_parts()[name] == {"used": False, "status": "disagrees",
                                   "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
                                   "built_from_sha256": hashlib.sha256(source.read_bytes()).hexdigest()}


def test_built_c_parts_load_silently_and_are_used():
    """In a new process, importing every adapter module that loads a C part warns nothing and uses each one
    (skipped where one is not built, failed under COSIM_REQUIRE_C_PARTS)."""
    script = ("import importlib, json, warnings\nfrom cosim import sdk\nwarnings.simplefilter('error', sdk.CPartWarning)\n"
              f"for module in {sorted(LOADERS.values())!r}:\n    importlib.import_module(module)\n"
              "from cosim.adapters.grid import opendss_reads\nopendss_reads._library()\n"
              "print(json.dumps(sdk.c_parts()))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    if "CPartWarning" in done.stderr:
        missing_c_part(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr
    parts = json.loads(done.stdout)
    assert sorted(parts) == sorted(LOADERS)
    refused = [name for name, part in parts.items() if not part["used"]]
    if refused:
        missing_c_part(f"{refused} (refused by their adapters' checks)")


GRID_ONLY = """
[scenario]
name = "feeder"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 300

[sims]
grid = { adapter = "grid", network = "ieee33" }

[entities]
feeder = { sim = "grid", model = "Grid" }
"""


def test_the_run_folder_says_which_c_parts_and_accelerations_ran(write_scenario, tmp_path):
    """metadata.json keeps its keys and adds ``c_parts`` (each library this process loaded: used or not, why, the
    SHA-256 of its source and of the text it was built from) and ``accelerations`` (the pandapower engine's kept
    solver analysis: on or off, with lightsim2grid's version)."""
    flow = importlib.import_module(LOADERS["grid/_kernels.so"])
    result = cosim.run(write_scenario(GRID_ONLY), out_dir=tmp_path / "runs")
    meta = result.folder.metadata()
    assert meta["status"] == "ok" and {"versions", "git_commit", "platform", "seed"} <= set(meta)
    source = Path(flow.__file__).with_name("_kernels.c")
    part = meta["c_parts"]["grid/_kernels.so"]
    assert part["used"] == (flow._KERNELS is not None)
    assert part["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    if part["used"]:
        assert part == {"used": True, "status": "used", "source_sha256": part["source_sha256"],
                        "built_from_sha256": part["source_sha256"]}
    keep = meta["accelerations"]["pandapower_keep_analysis"]
    assert keep["on"] is flow._KEEP_ANALYSIS
    assert keep["detail"].startswith(f"lightsim2grid {flow.lightsim2grid.__version__}")



@pytest.mark.parametrize("engine", ["direct", "mosaik", "direct, worker process"])
def test_a_runs_accelerations_are_its_own_not_those_of_an_earlier_run_of_the_process(write_scenario, tmp_path, engine):
    """An OpenDSS feeder's read path (``opendss_yprim_reads``) is said by that run's grid, also when a worker
    process steps it (a grid without inputs is in the head): a pandapower run made after it in the same process
    (a sweep's worker thread, a notebook) does not carry it; a Session says it too."""
    opendss = GRID_ONLY.replace('network = "ieee33"', 'engine = "opendss", network = "ieee13"')
    overrides = {"scenario.engine": engine.split(",")[0], "scenario.ahead": "on" if "worker" in engine else "off"}
    first = cosim.run(write_scenario(opendss, "opendss.toml"), out_dir=tmp_path / "runs", overrides=overrides)
    meta = first.folder.metadata()
    said = meta["accelerations"]
    assert first.ok and said["opendss_yprim_reads"]["on"] is False  # IEEE 13: too few elements to pay
    assert "power-delivery elements, fewer than" in said["opendss_yprim_reads"]["detail"]
    if "worker" in engine:
        assert meta["ahead"]["sims"] == ["grid"]  # (stepped in the worker: what it said came back)
    second = cosim.run(write_scenario(GRID_ONLY, "pandapower.toml"), out_dir=tmp_path / "runs", overrides=overrides)
    said = second.folder.metadata()["accelerations"]
    assert second.ok and "opendss_yprim_reads" not in said
    assert "pandapower_keep_analysis" in said  # the process's own note (made when pandapower's flow was imported)
    if engine == "direct":
        with cosim.Session(write_scenario(opendss, "opendss.toml"), out_dir=tmp_path / "runs") as session:
            session.run_until(600)
        assert "opendss_yprim_reads" in session.result.metadata["accelerations"]


def test_what_several_simulators_say_of_one_path_is_merged_and_a_failing_say_does_not_fail_the_run():
    """Two feeders: the path is on only where both took it, each one's detail by sid; an adapter whose
    ``accelerations()`` raises warns and its entry says so."""
    from cosim.sdk import run_accelerations, said_accelerations

    class Says:
        def __init__(self, entries):
            self.entries = entries

        def accelerations(self):
            if isinstance(self.entries, Exception):
                raise self.entries
            return self.entries

    on = Says({"opendss_yprim_reads": {"on": True, "detail": "Yprims"}})
    off = Says({"opendss_yprim_reads": {"on": False, "detail": "seasonal ratings"}})
    with pytest.warns(RuntimeWarning, match="simulator 'broken': accelerations\\(\\) raised KeyError"):
        said = said_accelerations([("big", on), ("small", off), ("plain", object()), ("broken", Says(KeyError("x")))])
    merged = run_accelerations(said)
    assert merged["opendss_yprim_reads"] == {"on": False, "detail": "big: Yprims; small: seasonal ratings"}
    assert merged["broken.accelerations"] == {"on": False, "detail": "KeyError: 'x'"}
    assert run_accelerations(said_accelerations([("big", on)])) == {"opendss_yprim_reads": {"on": True,
                                                                                           "detail": "Yprims"}}
