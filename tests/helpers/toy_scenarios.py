"""Scenario texts over the toy adapters (tests/helpers/toy_sims.py), shared by the core tests."""

from __future__ import annotations

TEMPLATE = """
[scenario]
name = "{name}"
start = 2024-07-15T00:00:00Z
duration_s = {duration_s}
step_s = {step_s}
seed = 1

[sims]
src = {{ adapter = "toy_ramp"{src_step} }}
sink = {{ adapter = "toy_sink"{sink_step} }}

[entities]
a = {{ sim = "src", model = "Ramp", p0_mw = 1.0 }}
b = {{ sim = "src", model = "Ramp", p0_mw = 2.0, slope_mw_h = 0.0 }}
s = {{ sim = "sink", model = "Sink" }}

[[connect]]
src = "a"
dst = "s"
attrs = ["p_mw"]

[[connect]]
src = "b"
dst = "s"
attrs = ["p_mw"]
"""


def ramp_sink(duration_s: int = 3600, step_s: int = 60, src_step_s: int | None = None,
              sink_step_s: int | None = None, name: str = "toy", extra: str = "") -> str:
    """Two ramps (``a`` rising from 1 MW at 1 MW/h, ``b`` flat at 2 MW) summed by a sink ``s``."""
    return TEMPLATE.format(name=name, duration_s=duration_s, step_s=step_s,
                           src_step=f", step_s = {src_step_s}" if src_step_s else "",
                           sink_step=f", step_s = {sink_step_s}" if sink_step_s else "") + extra


#: the sink's cap fed back to ramp ``a`` one step late (append to :func:`ramp_sink`'s text)
FEEDBACK = """
[[connect]]
src = "s"
dst = "a"
attrs = ["p_cap_mw"]
time_shifted = true
initial_data = { p_cap_mw = 100.0 }
"""
