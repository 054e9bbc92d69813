"""The checks shared by the controllers that steer a campus through its knobs (voltage_aware, ofo)."""

from __future__ import annotations

from typing import Any


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
