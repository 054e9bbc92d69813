"""Write the lightly damped IEEE 39-bus case of the resonance case (ieee39_resonance.toml).

Run: ``.venv/bin/python scenarios/published/make_ieee39_light_damping.py`` (writes
``scenarios/published/ieee39_light_damping.json`` beside this file; re-running it reproduces the
file byte for byte for the same ANDES version). ``--eig`` prints the electromechanical modes of
the shipped and the written case (ANDES's small-signal ``EIG`` routine at the power-flow point).

The case is ANDES's own ``ieee39/ieee39_full.xlsx`` (10 GENROU machines with IEEEX1 exciters,
IEEEST stabilisers and TGOV1N governors; machine damping ``D`` is 0 in it already) with one
change: every TGOV1N governor is switched off (``u = 0``, the mechanical power held at its
initial value). In the shipped data the governors (a 0.05 s valve, a 1 s / 2.1 s lead-lag,
5 % droop) are what damps the swing modes: the inter-area mode (machine 10, the equivalent of
the rest of the interconnection, against the other nine) is at 0.639 Hz with a damping ratio of
18.8 % with them and at 0.623 Hz with 5.7 % without; turning the stabilisers off changes neither
(they act on a 0.12 Hz mode only). What is left damps through the machines' damper windings and
their exciters.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "ieee39_light_damping.json"
SHIPPED = "ieee39/ieee39_full.xlsx"


def _andes():
    import andes  # noqa: PLC0415 — heavy (sympy, numba): only when this script runs
    andes.config_logger(stream_level=logging.CRITICAL)
    return andes


def write_case(path: Path = OUT) -> Path:
    """The shipped IEEE 39 case with every TGOV1N governor off, as ANDES JSON at ``path``."""
    andes = _andes()
    system = andes.load(andes.get_case(SHIPPED), setup=False, no_output=True, default_config=True)
    for i in range(system.TGOV1N.n):
        system.TGOV1N.u.v[i] = 0
    andes.io.json.write(system, str(path), overwrite=True)
    return path


def swing_modes(case: str) -> list[tuple[float, float]]:
    """``(f [Hz], damping ratio [-])`` of the modes whose participation is mostly rotor angle and speed."""
    andes = _andes()
    system = andes.load(case, setup=True, no_output=True, default_config=True)
    system.PFlow.run()
    system.TDS.init()
    system.EIG.run()
    names = list(system.EIG.x_name)
    mech = np.array([("delta GENROU" in n) or ("omega GENROU" in n) for n in names])
    modes = []
    for k, mu in enumerate(system.EIG.mu):
        share = system.EIG.pfactors[k, mech].sum() / system.EIG.pfactors[k].sum()
        if mu.imag > 1e-3 and share > 0.5:
            modes.append((float(mu.imag / (2 * np.pi)), float(-mu.real / abs(mu))))
    return sorted(modes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eig", action="store_true", help="print the swing modes of both cases")
    args = parser.parse_args()
    print(f"wrote {write_case()}")
    if args.eig:
        for label, case in (("shipped", _andes().get_case(SHIPPED)), ("governors off", str(OUT))):
            text = ", ".join(f"{f:.3f} Hz / {100 * z:.1f} %" for f, z in swing_modes(case))
            print(f"{label}: {text}")


if __name__ == "__main__":
    main()
