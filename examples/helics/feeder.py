"""A feeder federate of a few lines: the campus's bus voltage sags with the power it draws.

``vm_pu = 1.0 - sens_pu_mw * p_mw`` (a stiff source behind a line; sens_pu_mw [pu/MW]), published at
each minute after the campus's P of that minute arrives. Stands in for GridLAB-D or OpenDSS.

    python examples/helics/feeder.py --broker 127.0.0.1:23500 --until 3600
"""

from __future__ import annotations

import argparse

import helics as h


def vm_pu(p_mw: float, sens_pu_mw: float = 0.08) -> float:
    """The bus voltage under a load of ``p_mw``. [pu]"""
    return 1.0 - sens_pu_mw * p_mw


def run(broker: str, until_s: float, step_s: float = 60.0, sens_pu_mw: float = 0.08) -> list[tuple[float, float]]:
    """Join the federation, answer each P with a voltage until ``until_s``; the (time, P) received."""
    info = h.helicsCreateFederateInfo()
    h.helicsFederateInfoLoadFromString(info, "--force_new_core")  # not another federate's core of this process
    h.helicsFederateInfoSetCoreInitString(info, f"--federates=1 --broker_address=tcp://{broker}")
    h.helicsFederateInfoSetCoreTypeFromString(info, "zmq")
    # granted a time only once cosim has finished it: the P of that time has arrived
    h.helicsFederateInfoSetFlagOption(info, h.HELICS_FLAG_WAIT_FOR_CURRENT_TIME_UPDATE, True)
    fed = h.helicsCreateValueFederate("feeder", info)
    p_in = h.helicsFederateRegisterSubscription(fed, "cosim/campus_p_mw", "")
    v_out = h.helicsFederateRegisterGlobalPublication(fed, "feeder/bus_vm_pu", h.HELICS_DATA_TYPE_DOUBLE, "")
    h.helicsFederateEnterExecutingMode(fed)
    seen, t = [], 0.0
    while t + step_s < until_s:
        t = h.helicsFederateRequestTime(fed, t + step_s)
        if h.helicsInputIsUpdated(p_in):
            p_mw = h.helicsInputGetDouble(p_in)
            seen.append((t, p_mw))
            h.helicsPublicationPublishDouble(v_out, vm_pu(p_mw, sens_pu_mw))
    h.helicsFederateDisconnect(fed)  # pyhelics frees it when `fed` is collected (a second, explicit free
    return seen                       # would destroy whichever federate reuses its address by then)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", default="127.0.0.1:23500", help="host:port of the HELICS broker")
    parser.add_argument("--until", type=float, default=3600.0, help="the scenario's duration [s]")
    parser.add_argument("--sens", type=float, default=0.08, help="voltage drop per MW [pu/MW]")
    args = parser.parse_args()
    received = run(args.broker, args.until, sens_pu_mw=args.sens)
    print(f"feeder: answered {len(received)} values of P")
