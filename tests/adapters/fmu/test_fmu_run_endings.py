"""How a run with an FMU ends when the FMU cannot start or stops on its own, on both engines,
and what the first recorded row holds."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import cosim
from cosim.adapters.fmu import FmuInstance, describe

FOREIGN = Path(__file__).resolve().parent / "foreign"
ENGINES = ["mosaik", "direct"]

SCENARIO = """
[scenario]
name = "{name}"
start = 2024-07-15T00:00:00Z
duration_s = 600
step_s = 60
engine = "{engine}"

[sims.model]
adapter = "fmu"
fmu = "{fmu}"
{sim_keys}

[entities.unit]
sim = "model"
model = "{model}"
{entity_keys}

[record]
include = ["*"]
"""


def _run(tmp_path: Path, fmu: Path, model: str, engine: str, sim_keys: str = "", entity_keys: str = ""):
    path = tmp_path / f"{fmu.stem}_{engine}.toml"
    path.write_text(SCENARIO.format(name=f"{fmu.stem}_{engine}", engine=engine, fmu=fmu, model=model,
                                    sim_keys=sim_keys, entity_keys=entity_keys))
    return cosim.run(path, out_dir=tmp_path / "runs")


# -- a binary that does not load ------------------------------------------------------------------------
def _broken_binaries(folder: Path) -> dict[str, tuple[bytes, str]]:
    """rc_room.fmu's binary replaced by junk, and by a library that needs one the FMU lacks:
    ``{case: (binary, what the OS says)}``."""
    from thermal_fmus.build import fmi_headers_dir

    dep = folder / "libcosimdep.so"
    (folder / "dep.c").write_text("int cosim_dep(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(dep), str(folder / "dep.c")], check=True, capture_output=True)
    needs = folder / "needs_dep.so"
    subprocess.run(["gcc", "-std=c99", "-fPIC", "-shared", f"-I{fmi_headers_dir()}", "-o", str(needs),
                    str(FOREIGN / "rc_room.c"), f"-L{folder}", "-Wl,--no-as-needed", "-lcosimdep", "-lm"],
                   check=True, capture_output=True)
    return {"junk": (b"\0" * 64 + b"not a shared library" * 50, "invalid ELF header"),
            "missing_dependency": (needs.read_bytes(), "libcosimdep.so: cannot open shared object file")}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["junk", "missing_dependency"])
def test_binary_that_does_not_load_fails_the_run_with_one_message(tmp_path, case, engine, monkeypatch):
    """fmpy changes into the binary's folder to load it and stayed there when loading failed; the
    folder is deleted when the simulator ends, and the process was left in a deleted directory:
    the run then died on "[Errno 2] No such file or directory" with no metadata written."""
    binary, os_says = _broken_binaries(tmp_path)[case]
    fmu = tmp_path / f"{case}.fmu"
    with zipfile.ZipFile(fmu, "w") as zf:
        zf.write(FOREIGN / "modelDescription.xml", "modelDescription.xml")
        zf.writestr("binaries/linux64/rc_room.so", binary)
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    result = _run(tmp_path, fmu, "RC_Room", engine, sim_keys='attrs = { R = "skip" }')
    assert Path(os.getcwd()) == workdir
    assert result.status == "failed"
    assert f"{case}.fmu (unit): its binary binaries/linux64/rc_room.so does not load: " in result.reason
    assert os_says in result.reason and str(tmp_path) not in result.reason  # the path inside the FMU, not the temp folder's
    meta = json.loads((result.run_dir / "metadata.json").read_text())
    assert meta["status"] == "failed" and meta["reason"] == result.reason


# -- an FMU that ends the simulation --------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fmu_name, model, sim_keys, t_stop_s, rows, why", [
    # FMI 2.0 co-simulation: fmi2DoStep returns discard inside the step from 120 s, fmi2Terminated
    ("vdp", "VanDerPol", 'interface = "cs"', 150.0, 2, "asked to terminate the simulation (fmi2DoStep from t = 120 s returned discard)"),
    # FMI 2.0 model exchange: the time event at t_stop says terminateSimulation
    ("vdp", "VanDerPol", 'interface = "me"', 150.0, 2, "asked to terminate the simulation (in its event iteration)"),
    # at the end of a step: that step's outputs are still recorded
    ("vdp", "VanDerPol", 'interface = "me"', 180.0, 3, "asked to terminate the simulation (in its event iteration)"),
    # FMI 3.0 co-simulation: fmi3DoStep's terminateSimulation
    ("arrays3", "Zones", "", 150.0, 2, "asked to terminate the simulation (fmi3DoStep)"),
])
def test_fmu_that_ends_the_simulation_ends_the_run_cleanly(tmp_path, request, engine, fmu_name, model, sim_keys,
                                                          t_stop_s, rows, why):
    fmu = request.getfixturevalue({"vdp": "vdp_fmu", "arrays3": "arrays_fmu3"}[fmu_name])
    result = _run(tmp_path, fmu, model, engine, sim_keys, f"t_stop_s = {t_stop_s}")
    assert result.status == "ok", result.reason
    assert result.reason.startswith(f"{fmu_name}.fmu (unit) ended the run at t = {t_stop_s:g} s: it ") and why in result.reason
    ts = result.timeseries()
    assert len(ts) == rows and ts.notna().all().all()  # the rows before the end are kept, complete
    meta = json.loads((result.run_dir / "metadata.json").read_text())
    assert meta["status"] == "ok" and meta["reason"] == result.reason and meta["steps"] == rows


def test_discard_without_terminate_also_ends_cleanly(vdp_fmu, unzip, monkeypatch):
    """A discarded step (fmi2Terminated false) cannot go on either: it ends the run, saying so."""
    from cosim.adapters.fmu.description import FmuEnded

    iface = describe(str(vdp_fmu), interface="cs")
    inst = FmuInstance(iface, unzip(iface.path), "osc", {"t_stop_s": 90.0})
    monkeypatch.setattr(inst.fmu, "getBooleanStatus", lambda kind: False)
    inst.step(0.0, 60.0)
    with pytest.raises(FmuEnded, match=r"vdp.fmu \(osc\) ended the run at t = 90 s: it could not complete the step"):
        inst.step(60.0, 60.0)
    inst.close()


# -- the first row ----------------------------------------------------------------------------------
def _room(t_s: float, t0_c: float = 40.0, ta_c: float = 10.0, p_w: float = 100.0, r=0.05, c=1e5) -> float:
    """The foreign room's analytic temperature for constant inputs (its own equation). [°C]"""
    t_inf = ta_c + p_w * r
    return t_inf + (t0_c - t_inf) * np.exp(-t_s / (r * c))


@pytest.mark.parametrize("interface, atol_k", [("cs", 1e-8), ("me", 2e-3)])
@pytest.mark.parametrize("outputs_at, first_s", [("step_end", 60.0), ("step_start", 0.0)])
def test_which_time_a_row_holds(foreign_fmu, tmp_path, outputs_at, first_s, interface, atol_k):
    """By default the row at t holds the values after the step from t (so the initial 40 °C is
    never recorded); with outputs_at = "step_start" it holds those at t, the row at 0 the initial ones."""
    result = _run(tmp_path, foreign_fmu, "RC_Room", "direct", f'outputs_at = "{outputs_at}"\ninterface = "{interface}"',
                  "t0_c = 40.0\nta_c = 10.0")
    assert result.ok, result.reason
    got = result.timeseries()["unit.t_room_c"].to_numpy()
    want = [_room(first_s + 60.0 * k) for k in range(10)]
    np.testing.assert_allclose(got, want, rtol=0, atol=atol_k)
    if outputs_at == "step_start":
        assert got[0] == pytest.approx(40.0, abs=1e-12)
