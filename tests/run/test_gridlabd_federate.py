"""GridLAB-D beside ``cosim run --helics``: a real broker on loopback, GridLAB-D (the ``gridlabd``
package's Python bindings, driven by examples/helics/gridlabd/gld_federate.py) in a process of its own,
and cosim running examples/helics/campus.toml with examples/helics/gridlabd/federate.toml::

    cosim campus.p_mw, q_mvar  --cosim/campus_p_mw, campus_q_mvar-->  GridLAB-D load `campus` (feeder.glm)
    cosim vctl.vm_min_pu, vm_max_pu  <--gld/campus_vm_pu--  GridLAB-D's |voltage_A| / 7,200 V

Checks: every P and Q cosim published reached GridLAB-D's load; GridLAB-D's voltage falls as the campus
draws more and stays below the substation's 0.96 pu; and the voltages GridLAB-D solved reached the
controller, i.e. the coupled run equals a Session fed those voltages one step late, and they throttled it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

h = pytest.importorskip("helics")
pytest.importorskip("gridlabd", reason="GridLAB-D's Python bindings are not installed (pip install 'cosim[gridlabd]')")

from cosim.cli import main  # noqa: E402
from cosim.run.session import Session  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "helics"
FEDERATE = EXAMPLE / "gridlabd" / "gld_federate.py"
DURATION_S = 900
V_SUBSTATION_PU = 0.96  # feeder.glm's swing bus


def _loopback():
    spec = importlib.util.spec_from_file_location("helics_loopback_broker", EXAMPLE / "loopback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LOOPBACK = _loopback()


@pytest.fixture
def broker():
    """A HELICS broker for two federates on a free loopback port; its ``host:port``."""
    brk, address = LOOPBACK.start_broker(2)
    yield address
    h.helicsBrokerDisconnect(brk)


@pytest.mark.parametrize("engine", ["direct", "mosaik"])
def test_cosim_and_gridlabd_exchange_power_and_voltage(broker, tmp_path, engine):
    config = tmp_path / "federate.toml"
    config.write_text((EXAMPLE / "gridlabd" / "federate.toml").read_text()
                      .replace('"127.0.0.1:23500"', f'"{broker}"').replace("timeout_s = 30", "timeout_s = 20"))
    gld = subprocess.Popen([sys.executable, str(FEDERATE), "--broker", broker, "--until", str(DURATION_S)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        code = main(["run", str(EXAMPLE / "campus.toml"), "--helics", str(config), "--out", str(tmp_path / "runs"),
                     "--set", f"scenario.duration_s={DURATION_S}", "--engine", engine, "--no-report", "--quiet"])
        out, err = gld.communicate(timeout=60)
    finally:
        gld.kill()
    assert code == 0
    assert gld.returncode == 0, err
    solved = pd.DataFrame([[float(x) for x in line.split(",")] for line in out.splitlines()],
                          columns=["t_s", "p_mw", "q_mvar", "vm_pu"]).set_index("t_s")
    (run_dir,) = (tmp_path / "runs").iterdir()
    series = pd.read_parquet(run_dir / "timeseries.parquet")
    times = series["time_utc"].map(lambda t: (t - series["time_utc"][0]).total_seconds())

    # the campus's P and Q reached GridLAB-D's load, at every step after its first grant (t = 60 s)
    assert list(solved.index) == list(times[1:])
    sent = series.set_index(times)
    assert (solved["p_mw"] == sent.loc[solved.index, "campus.p_mw"]).all()
    assert (solved["q_mvar"] == sent.loc[solved.index, "campus.q_mvar"]).all()

    # GridLAB-D's physics: a load drawing power lowers its bus below the substation's voltage, and more
    # power lowers it further (constant-power load on a radial line: the voltage is monotone in the load)
    assert (solved["p_mw"] > 0.2).all() and (solved["vm_pu"] < V_SUBSTATION_PU).all()
    by_p = solved.sort_values("p_mw")
    steps = by_p[by_p["p_mw"].diff() > 0.005]  # GridLAB-D reports volts to ~0.01 V: compare distinct loads
    assert len(steps) >= 3
    for (p_lo, v_lo), (p_hi, v_hi) in zip(by_p[["p_mw", "vm_pu"]].values, by_p[["p_mw", "vm_pu"]].values[1:]):
        if p_hi - p_lo > 0.005:
            assert v_hi < v_lo, (p_lo, v_lo, p_hi, v_hi)

    # the voltage GridLAB-D solved at t reached the controller at cosim's next step, and acted on it
    with Session(EXAMPLE / "campus.toml", {"scenario.duration_s": DURATION_S}, out_dir=tmp_path / "inside",
                 report=False) as s:
        while not s.done:
            if s.time_s >= 120:
                for attr in ("vm_min_pu", "vm_max_pu"):
                    s.set("vctl", attr, solved.loc[s.time_s - 60, "vm_pu"])
            s.step()
    inside = pd.read_parquet(s.result.run_dir / "timeseries.parquet")
    pd.testing.assert_frame_equal(series, inside)
    assert series["vctl.throttle_frac"].max() > 0.1
