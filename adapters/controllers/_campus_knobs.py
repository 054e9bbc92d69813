"""The checks shared by the controllers that steer a campus through its knobs (voltage_aware, ofo)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from cosim.sdk import Params


def check_band_and_knobs(params: Any) -> None:
    """Raise ValueError when a band's low end is above its high end: the voltage band, batch size,
    GPU cap and (when given, both ends) the facility limit.

    ``params`` has ``v_low_pu``/``v_high_pu``, ``n_batch_min``/``n_batch_max``,
    ``p_cap_min_w``/``p_cap_max_w`` and the optional ``p_limit_min_mw``/``p_limit_max_mw``.
    """
    pairs = [("v_low_pu", "v_high_pu"), ("n_batch_min", "n_batch_max"), ("p_cap_min_w", "p_cap_max_w")]
    if (params.p_limit_min_mw is None) != (params.p_limit_max_mw is None):
        raise ValueError("set both p_limit_min_mw and p_limit_max_mw, or neither (no facility limit)")
    if params.p_limit_min_mw is not None:
        pairs.append(("p_limit_min_mw", "p_limit_max_mw"))
    for low, high in pairs:
        if getattr(params, low) > getattr(params, high):
            raise ValueError(f"{low} = {getattr(params, low):g} is above {high} = {getattr(params, high):g}")


class CampusKnobParams(Params):
    """The voltage band and the knob ranges a campus controller maps its allowance onto
    (voltage_aware, ofo), checked by :func:`check_band_and_knobs`.

    Attributes:
        v_low_pu, v_high_pu: the voltage band. [pu]
        u_min_frac: the lowest allowance (keeps a floor of service). [-]
        n_batch_min, n_batch_max: batch cap at allowance 0 and 1. [-]
        p_cap_min_w, p_cap_max_w: per-GPU cap at allowance 0 and 1 (H100: 200-700 W). [W]
        p_limit_min_mw, p_limit_max_mw: facility limit at allowance 0 and 1; unset = none. [MW]
    """

    v_low_pu: float = Field(default=0.95, gt=0)
    v_high_pu: float = Field(default=1.05, gt=0)
    u_min_frac: float = Field(default=0.0, ge=0, le=1)
    n_batch_min: float = Field(default=8.0, ge=1)
    n_batch_max: float = Field(default=256.0, ge=1)
    p_cap_min_w: float = Field(default=200.0, gt=0)
    p_cap_max_w: float = Field(default=700.0, gt=0)
    p_limit_min_mw: float | None = Field(default=None, ge=0)
    p_limit_max_mw: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _knob_ranges(self):
        check_band_and_knobs(self)
        return self
