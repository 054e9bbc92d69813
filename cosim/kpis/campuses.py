"""Several campuses, one disturbance: who ceased, when each came back, and the system's swing.

For every entity recording ``p_connected_frac`` (a Load with PERC1 on andes_grid, a
``RideThrough`` of adapters/ride_through.py, or any load reporting its connected share),
``campuses.<entity>``:

* ``ceased``: its connected share fell below ``1 − TOL_FRAC`` at some sample; ``ceased_max_frac``
  = 1 − the lowest share; ``t_cease_s``: the first such sample (from the start).
* ``t_recon_start_s``: the first sample after the lowest share where the share rises (reconnection
  starts); ``t_back_s``: the first sample after the lowest share where it is back within
  ``TOL_FRAC`` of its last value (its settled level: below 1 when only ``frecon`` of it returns).
* ``p_pre_mw``: its draw before ceasing (``p_served_mw``, else ``p_mw``: a ride_through's grid draw; the sample before
  ``t_cease_s``), ``p_min_mw``, and ``t_recover_s``: the time from ``t_cease_s`` until the draw is
  back to ``(1 − TOL_FRAC)`` of ``p_pre_mw`` (None when it never is: ``recovered`` false).

and ``campuses_total``: ``n_campuses``, ``n_ceased``, ``p_pre_mw`` / ``p_min_mw`` (the sum over
campuses), ``p_lost_max_mw``, ``t_first_cease_s`` and ``t_recover_s`` (the sum back to
``(1 − TOL_FRAC)`` of its pre-disturbance value, from the first cease), ``recovered``.

With the system's frequency recorded (an entity with both ``f_hz`` and ``f_nadir_hz``: the Grid of
andes_grid, whose ``f_hz`` is the centre-of-inertia frequency), ``campuses_total`` also has
``f_coi_nadir_hz`` / ``f_coi_zenith_hz`` (the lowest and highest COI frequency, the Grid's own
sub-step extremes included) and the dominant electromechanical mode of the post-disturbance COI
frequency: ``mode_freq_hz``, ``mode_damping_frac`` (the damping ratio ζ), ``mode_amplitude_hz`` and
``mode_window_s`` (the samples fitted). The window starts at the first sample after the
disturbance's voltage dip (every campus's ``vm_min_pu`` back at or above ``dip_pu``, 0.9 pu; without
voltages, the sample after the first cease) and runs to the end. The mode is estimated by the matrix
pencil method (:func:`matrix_pencil`): the mode with the largest amplitude whose frequency lies in
``mode_band_hz`` (0.1-2.5 Hz). A scenario sets both: ``[kpis.campuses] mode_band_hz = [lo, hi]``,
``dip_pu = x``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from cosim.kpis._block import BandHz, Block, KpiInput, KpiParams, ending, finite
from cosim.roles import RunRoles

#: a share or a power within this fraction of its reference counts as back (and below 1 − it, as ceased) [-]
TOL_FRAC = 0.01
#: a campus voltage below this is inside the disturbance's dip (the default; ``[kpis.campuses] dip_pu``) [pu]
DIP_PU = 0.9
#: the electromechanical band: inter-area (~0.1-1 Hz) and local (~1-2.5 Hz) modes (the default;
#: ``[kpis.campuses] mode_band_hz``) [Hz]
MODE_BAND_HZ = (0.1, 2.5)


class CampusesParams(KpiParams):
    """``[kpis.campuses]``: the band of the dominant post-fault mode and the voltage that ends the dip.

    Attributes:
        mode_band_hz: the frequencies the dominant mode of the COI frequency is picked from. [Hz]
        dip_pu: the post-fault window starts at the first sample with every campus's ``vm_min_pu``
            back at or above it. [pu]
    """

    mode_band_hz: BandHz = MODE_BAND_HZ
    dip_pu: float = Field(default=DIP_PU, gt=0, lt=1)
#: singular values below this share of the largest are noise (the model order of the pencil) [-]
SV_TOL_FRAC = 0.03
#: the fewest post-disturbance samples a mode is fitted to [-]
MIN_MODE_SAMPLES = 12
SITE_ATTRS = ("p_connected_frac", "p_served_mw", "p_mw", "vm_min_pu")


def matrix_pencil(y: np.ndarray, dt_s: float, order: int | None = None,
                  sv_tol_frac: float = SV_TOL_FRAC) -> list[dict[str, float]]:
    """The modes of a uniformly sampled signal as a sum of damped exponentials, by the matrix pencil method.

    Hua & Sarkar, "Matrix pencil method for estimating parameters of exponentially damped/undamped
    sinusoids in noise", IEEE Trans. Acoustics, Speech, and Signal Processing 38(5):814-824, 1990;
    the SVD-filtered form of Sarkar & Pereira, "Using the matrix pencil method to estimate the
    parameters of a sum of complex exponentials", IEEE Antennas and Propagation Magazine 37(1):48-55,
    1995. With ``y[k] = Σ_i R_i z_i^k`` and the pencil parameter ``L = N // 3`` (N samples, between
    N/3 and N/2 for the least noise sensitivity), the Hankel matrix ``Y`` ((N − L) × (L + 1)) is
    decomposed ``Y = U Σ Vᴴ``; the model order M is ``order`` or one more than the number of singular values
    above ``sv_tol_frac`` of the largest (the extra pole takes the small offset a window's mean leaves); with ``V'`` the first M right singular vectors, ``V1`` / ``V2``
    ``V'`` without its last / first row, the poles ``z_i`` are the eigenvalues of ``V1⁺ V2``; the
    residues ``R_i`` the least-squares fit of ``y`` to ``z_i^k``. Each pole gives
    ``λ = ln(z) / Δt = σ + jω``, a frequency ``f = |ω| / 2π`` and a damping ratio
    ``ζ = −σ / √(σ² + ω²)``.

    Returns:
        one entry per mode (complex pairs once, ``ω ≥ 0``): ``freq_hz``, ``damping_frac``,
        ``sigma_1_s`` (σ) and ``amplitude`` (the mode's peak at the first sample: 2 |R| for a pair,
        |R| for a real pole), largest amplitude first.
    """
    y = np.asarray(y, float)
    n = len(y)
    if n < 4 or not np.isfinite(y).all():
        return []
    pencil = max(2, n // 3)
    hankel = np.lib.stride_tricks.sliding_window_view(y, pencil + 1)  # (N − L) × (L + 1)
    _u, sv, vh = np.linalg.svd(hankel, full_matrices=False)
    if not sv[0] > 0:
        return []
    m = order if order is not None else int(np.sum(sv > sv_tol_frac * sv[0])) + 1  # + the offset a mean leaves
    m = max(1, min(m, pencil))
    v = vh[:m].conj().T  # (L + 1) × M
    z = np.linalg.eigvals(np.linalg.pinv(v[:-1]) @ v[1:])
    z = z[np.abs(z) > 1e-12]
    powers = z[np.newaxis, :] ** np.arange(n)[:, np.newaxis]
    residues = np.linalg.lstsq(powers, y.astype(complex), rcond=None)[0]
    modes = []
    for zi, ri in zip(z, residues, strict=True):
        lam = np.log(zi) / dt_s
        if lam.imag < -1e-9:  # the conjugate of a pair: counted with its partner
            continue
        pair = lam.imag > 1e-9
        sigma, omega = float(lam.real), float(lam.imag)
        modes.append({"freq_hz": omega / (2.0 * np.pi), "sigma_1_s": sigma,
                      "damping_frac": -sigma / float(np.hypot(sigma, omega)) if np.hypot(sigma, omega) > 0 else 0.0,
                      "amplitude": float((2.0 if pair else 1.0) * abs(ri))})
    return sorted(modes, key=lambda mode: -mode["amplitude"])


def dominant_mode(y: np.ndarray, dt_s: float, band_hz: tuple[float, float] = MODE_BAND_HZ) -> dict[str, float] | None:
    """The largest-amplitude mode of ``y`` (its mean removed) with a frequency in ``band_hz``, or None."""
    y = np.asarray(y, float)
    inside = [m for m in matrix_pencil(y - np.mean(y), dt_s) if band_hz[0] <= m["freq_hz"] <= band_hz[1]]
    return inside[0] if inside else None


def _sites(columns) -> list[str]:
    return [c.rpartition(".")[0] for c in ending(columns, ".p_connected_frac")]


def _systems(columns) -> list[str]:
    names = set(columns)
    return [c.rpartition(".")[0] for c in ending(columns, ".f_nadir_hz") if f"{c.rpartition('.')[0]}.f_hz" in names]


def _columns(columns: list[str], roles: RunRoles) -> list[str]:
    names = set(columns)
    sites = _sites(columns)
    if not sites:
        return []
    wanted = [f"{s}.{a}" for s in sites for a in SITE_ATTRS if f"{s}.{a}" in names]
    return wanted + [f"{g}.{a}" for g in _systems(columns) for a in ("f_hz", "f_nadir_hz", "f_zenith_hz")
                     if f"{g}.{a}" in names]


def _first(mask: np.ndarray, start: int = 0) -> int | None:
    hits = np.flatnonzero(mask[start:])
    return int(hits[0]) + start if len(hits) else None


def _draw_mw(inp: KpiInput, site: str) -> np.ndarray:
    """Its grid draw: ``p_served_mw`` (andes_grid's Load: PERC1's constant power times its share), else
    ``p_mw`` (ride_through's grid draw, its share already applied), else the share itself."""
    for attr in ("p_served_mw", "p_mw"):
        column = inp.col(site, attr)
        if column is not None:
            return inp.ts[column].to_numpy(float)
    return inp.ts[f"{site}.p_connected_frac"].to_numpy(float)


def _recovery(p: np.ndarray, start: int, seconds: np.ndarray) -> tuple[float, float, float | None]:
    """``(pre-disturbance draw, lowest draw after it, time from ``start`` back to (1 − TOL_FRAC) of it)``."""
    pre = float(p[max(start - 1, 0)])
    low = int(start + np.nanargmin(p[start:]))
    back = _first(p >= (1.0 - TOL_FRAC) * pre, low)
    return pre, float(p[low]), (None if back is None else float(seconds[back] - seconds[start]))


def site_kpis(inp: KpiInput, site: str, seconds: np.ndarray) -> dict[str, Any]:
    share = inp.ts[f"{site}.p_connected_frac"].to_numpy(float)
    cease = _first(share < 1.0 - TOL_FRAC)
    out: dict[str, Any] = {"ceased": cease is not None}
    if cease is None:
        return out
    low = int(cease + np.nanargmin(share[cease:]))
    rise = _first(np.diff(share[low:]) > 1e-4)
    back = _first(np.abs(share - share[-1]) <= TOL_FRAC, low)
    p = _draw_mw(inp, site)
    pre, p_min, recover = _recovery(p, cease, seconds)
    out.update({"ceased_max_frac": finite(1.0 - share[low]), "t_cease_s": finite(seconds[cease]),
                "t_recon_start_s": None if rise is None else finite(seconds[low + rise + 1]),
                "t_back_s": None if rise is None or back is None else finite(seconds[back]),
                "settled_frac": finite(share[-1]), "p_pre_mw": finite(pre), "p_min_mw": finite(p_min),
                "t_recover_s": finite(recover), "recovered": recover is not None})
    return out


def system_kpis(inp: KpiInput, system: str, start: int | None,
                band_hz: tuple[float, float] = MODE_BAND_HZ) -> dict[str, Any]:
    f = inp.ts[f"{system}.f_hz"].to_numpy(float)
    out: dict[str, Any] = {"f_coi_nadir_hz": finite(np.nanmin(f)), "f_coi_zenith_hz": finite(np.nanmax(f))}
    for attr, key, pick in (("f_nadir_hz", "f_coi_nadir_hz", min), ("f_zenith_hz", "f_coi_zenith_hz", max)):
        column = inp.col(system, attr)
        if column is not None and inp.ts[column].notna().any():
            out[key] = finite(pick(out[key], float(inp.ts[column].dropna().iloc[-1])))
    if start is None or len(f) - start < MIN_MODE_SAMPLES or not np.isfinite(f[start:]).all():
        return out
    dt_s = inp.dt_h * 3600.0
    mode = dominant_mode(f[start:], dt_s, band_hz)
    out["mode_window_s"] = finite((len(f) - start) * dt_s)
    if mode is not None:
        out.update({"mode_freq_hz": finite(mode["freq_hz"]), "mode_damping_frac": finite(mode["damping_frac"]),
                    "mode_amplitude_hz": finite(mode["amplitude"])})
    return out


def _post_dip(inp: KpiInput, sites: list[str], first_cease: int | None, dip_pu: float = DIP_PU) -> int | None:
    """The first sample after the disturbance's voltage dip (or after the first cease)."""
    volts = [c for c in (inp.col(s, "vm_min_pu") for s in sites) if c is not None]
    if volts:
        v = np.nanmin(inp.ts[volts].to_numpy(float), axis=1)
        dip = _first(v < dip_pu)
        if dip is not None:
            return _first(v >= dip_pu, dip)
    return None if first_cease is None else first_cease + 1


def _compute(inp: KpiInput) -> dict[str, Any]:
    sites = _sites(inp.ts.columns)
    if not sites or not len(inp.ts):
        return {}
    seconds = (inp.ts.index - inp.ts.index[0]).total_seconds().to_numpy()
    found = {site: site_kpis(inp, site, seconds) for site in sites}
    ceases = [int(np.argmin(np.abs(seconds - v["t_cease_s"]))) for v in found.values() if v["ceased"]]
    first = min(ceases) if ceases else None
    total: dict[str, Any] = {"n_campuses": len(sites), "n_ceased": len(ceases)}
    p = np.sum([_draw_mw(inp, s) for s in sites], axis=0)
    if first is not None:
        pre, p_min, recover = _recovery(p, first, seconds)
        total.update({"t_first_cease_s": finite(seconds[first]), "p_pre_mw": finite(pre), "p_min_mw": finite(p_min),
                      "p_lost_max_mw": finite(pre - p_min), "t_recover_s": finite(recover),
                      "recovered": recover is not None})
    params = inp.params.get("campuses") or {}
    band = tuple(params.get("mode_band_hz", MODE_BAND_HZ))
    systems = _systems(inp.ts.columns)
    if systems:
        total.update(system_kpis(inp, systems[0], _post_dip(inp, sites, first, params.get("dip_pu", DIP_PU)), band))
    return {"campuses": found, "campuses_total": total}


BLOCK = Block("campuses", "Campuses through a disturbance (PERC1)", 86, _columns, _compute,
              headline=("n_ceased", "t_recover_s", "f_coi_nadir_hz", "mode_freq_hz", "mode_damping_frac",
                        "ceased_max_frac", "t_back_s"), params=CampusesParams)
