"""GridLAB-D as a HELICS value federate, through GridLAB-D's Python bindings (the `gridlabd` package).

Each minute: take cosim's P and Q of that minute, set them on the GridLAB-D load (a third per phase,
in VA), let GridLAB-D solve the feeder at that time, and publish the load's voltage magnitude over its
nominal voltage. The `gridlabd` 6.0 wheel has no HELICS inside its `connection` module (no
`helics_msg` class), so this script is the coupling: the `helics` package on one side, GridLAB-D's
`set_property`, `step_to` and `get_property` on the other.

    python examples/helics/gridlabd/gld_federate.py --broker 127.0.0.1:23500 --until 3600
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from pathlib import Path

import gridlabd
import helics as h

GLM = Path(__file__).with_name("feeder.glm")


def run(broker: str, until_s: float, step_s: float = 60.0, glm: Path = GLM, load: str = "campus",
        core_type: str = "zmq") -> list[tuple[float, float, float, float]]:
    """Join the federation and answer each P, Q with a voltage until ``until_s``.

    Returns (time [s], p_mw, q_mvar, vm_pu) for every step GridLAB-D solved.
    """
    gld = gridlabd.GridLabD()
    if gld.load(str(glm)) != 0 or gld.setup_after_load() != 0:
        errors = "; ".join(m["message"] for m in gld.get_messages() if m["type"] in ("ERROR", "FATAL"))
        raise SystemExit(f"{glm}: GridLAB-D could not load the model: {errors}")
    start = datetime.fromisoformat(gld.get_starttime())
    _, v_nominal = gld.get_property(load, "nominal_voltage")

    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://{broker}")
    h.helicsFederateInfoSetCoreTypeFromString(info, core_type)
    # granted a time only once cosim has finished it: the P and Q of that time have arrived
    h.helicsFederateInfoSetFlagOption(info, h.HELICS_FLAG_WAIT_FOR_CURRENT_TIME_UPDATE, True)
    fed = h.helicsCreateValueFederate("gld", info)
    p_in = h.helicsFederateRegisterSubscription(fed, "cosim/campus_p_mw", "")
    q_in = h.helicsFederateRegisterSubscription(fed, "cosim/campus_q_mvar", "")
    v_out = h.helicsFederateRegisterGlobalPublication(fed, "gld/campus_vm_pu", h.HELICS_DATA_TYPE_DOUBLE, "")
    h.helicsFederateEnterExecutingMode(fed)
    solved, t = [], 0.0
    try:
        while t + step_s < until_s:
            t = h.helicsFederateRequestTime(fed, t + step_s)
            if not h.helicsInputIsUpdated(p_in):
                continue
            p_mw, q_mvar = h.helicsInputGetDouble(p_in), h.helicsInputGetDouble(q_in)
            s_phase_va = complex(p_mw, q_mvar) * 1e6 / 3.0  # consumer sign: a positive P is drawn
            for phase in "ABC":
                if gld.set_property(load, f"constant_power_{phase}", f"{s_phase_va.real}{s_phase_va.imag:+}j") != 0:
                    raise SystemExit(f"{glm}: GridLAB-D refused {load}.constant_power_{phase} = {s_phase_va} VA")
            code, _ = gld.step_to((start + timedelta(seconds=t)).isoformat())
            if code != 0:
                raise SystemExit(f"{glm}: GridLAB-D failed to solve at t = {t:g} s (code {code})")
            _, v_a = gld.get_property(load, "voltage_A")
            vm_pu = abs(v_a) / v_nominal
            solved.append((t, p_mw, q_mvar, vm_pu))
            h.helicsPublicationPublishDouble(v_out, vm_pu)
    finally:
        h.helicsFederateDisconnect(fed)  # pyhelics frees it when `fed` is collected
    return solved


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", default="127.0.0.1:23500", help="host:port of the HELICS broker")
    parser.add_argument("--until", type=float, default=3600.0, help="the scenario's duration [s]")
    parser.add_argument("--glm", type=Path, default=GLM, help="the GridLAB-D model (a load named 'campus')")
    args = parser.parse_args()
    rows = run(args.broker, args.until, glm=args.glm)
    for t, p_mw, q_mvar, vm_pu in rows:
        print(f"{t:g},{p_mw!r},{q_mvar!r},{vm_pu!r}")
    print(f"gridlabd: solved {len(rows)} steps", file=sys.stderr)
