"""Regulator taps and capacitor steps are read again only when something could have moved them.

A static solve that settles in one control iteration moves no tap and switches no capacitor, so the
OpenDSS engine keeps the last reading; a control action, a failed solve or one of its own commands
(tap and capacitor inputs) makes it read them. Checked against a flow forced to read every step, on
IEEE 13 (three regulators, two capacitors) with a load that moves the taps on some steps and not others.
"""

from __future__ import annotations

import numpy as np

from cosim import grid_models
from cosim.adapters.grid.opendss_flow import OpenDssFlow

LOAD_MW = [0.2, 0.2, 1.5, 1.5, 1.6, 3.0, 3.0, 0.4, 0.4, 2.0, 2.0]


def run(forced: bool, commands: dict[int, tuple[str, int, float]] | None = None) -> list[tuple]:
    flow = OpenDssFlow(grid_models.dss_file("ieee13"))
    flow.attach("load", "671", 0.0, 0.0, name="campus")
    seen = []
    for k, p_mw in enumerate(LOAD_MW):
        what, pos, value = (commands or {}).get(k, (None, 0, 0.0))
        if what == "tap":
            flow.set_tap_count(pos, value)
        elif what == "cap":
            flow.set_cap_count(pos, value)
        if forced:
            flow._devices_stale = True
        assert flow.solve({"load": np.array([p_mw]), "sgen": np.zeros(0), "storage": np.zeros(0)},
                          {"load": np.array([0.3 * p_mw]), "sgen": np.zeros(0), "storage": np.zeros(0)})
        seen.append((tuple(flow.tap_count), tuple(flow.tap_pu), tuple(flow.cap_in_service), flow.n_tap_changes,
                     tuple(flow.cap_q_mvar)))
    flow.close()
    return seen


def test_the_taps_kept_between_settled_solves_are_those_a_reading_finds():
    seen = run(forced=False)
    assert seen == run(forced=True)
    assert len({s[0] for s in seen}) > 2  # the load moved the taps, more than once


def test_tap_and_capacitor_commands_are_read_back_at_the_next_solve():
    commands = {3: ("tap", 0, 5.0), 6: ("tap", 0, float("nan")), 8: ("cap", 0, 0.0)}
    seen = run(forced=False, commands=commands)
    assert seen == run(forced=True, commands=commands)
    assert seen[3][0][0] == 5 and seen[8][2][0] is False
