"""PV: a photovoltaic plant modelled with pvlib from the weather signal (PVWatts chain).

The chain is pvlib's, function by function, as its ``ModelChain`` runs it with PVWatts
parameters: solar position (``Location.get_solarposition``, NREL SPA), plane-of-array
irradiance (the steps of ``irradiance.get_total_irradiance``: sky diffuse, Hay-Davies by
default, ground diffuse, ``poa_components``), the incidence-angle modifier on the beam
(``iam.physical``), cell temperature (``temperature.sapm_cell``), DC power with its
temperature coefficient (``pvsystem.pvwatts_dc``), DC losses (one lumped fraction,
PVWatts' 14 % by default: Dobos 2014, NREL/TP-6A20-62641) and the inverter with its
part-load efficiency and clipping at the AC rating (``inverter.pvwatts``). Mounting is
fixed tilt/azimuth or a single-axis tracker (``tracking.singleaxis`` with backtracking).

Sign: generator convention, ``p_mw > 0`` is production (pandapower's ``sgen``).

Time: the power at step time t is held over [t, t + step_s), so the sun is placed at the
middle of the step. What depends on time only (sun, surface, angles of incidence, Hay-Davies
projection ratio) is computed once for the whole run, vectorised (a year at 1-minute steps:
~3 s, ~40 MiB per plant); each step runs only the weather-dependent rest of the chain, and
while the weather holds (hourly TMY3 under 1-minute steps) that rest is evaluated once for the
steps ahead, as arrays, each step's row being the number the chain gives for it alone
(``PvSim._lit``). The weather inputs are those of the signals adapter (``ghi_w_m2``, ``dni_w_m2``, ``dhi_w_m2``,
``t_dry_c``, ``wind_m_s``; hourly TMY3 values held over their hour give the hour's
irradiation). Missing irradiance is read as 0; a missing air temperature or wind speed takes
ModelChain's defaults, 20 °C and 0 m/s.

An optional input ``p_limit_mw`` curtails the AC output (a controller or grid operator);
``p_avail_mw`` is what the plant could have produced and ``p_curtailed_mw`` the
difference. ``p_clip_mw`` estimates the power lost to inverter clipping
(``p_dc * eta_inv_nom - p_ac_max``, when positive).

Example ``[entities]`` entry::

    pv = { sim = "solar", model = "PvPlant", latitude_deg = 36.1, longitude_deg = -79.95,
           p_dc_mw = 3.0, p_ac_mw = 2.5, tilt_deg = 25, azimuth_deg = 180 }
"""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import datetime
from typing import Any, Literal

import numpy as np
import pandas as pd
from pvlib import iam, inverter, irradiance, location, pvsystem, temperature, tools, tracking
from pydantic import BaseModel, Field

from cosim.sdk import Params, SingleModelSim

INPUTS = ("ghi_w_m2", "dni_w_m2", "dhi_w_m2", "t_dry_c", "wind_m_s", "p_limit_mw")
OUTPUTS = ("p_mw", "p_avail_mw", "p_curtailed_mw", "p_dc_mw", "p_clip_mw", "poa_w_m2", "t_cell_c")
#: ModelChain's defaults when the weather has no air temperature or wind speed.
DEFAULT_T_AIR_C = 20.0
DEFAULT_WIND_M_S = 0.0


class PvPlantParams(Params):
    """Params of one ``PvPlant`` entity.

    Attributes:
        latitude_deg, longitude_deg: site, north and east positive. [deg]
        altitude_m: site elevation (sets the air pressure for refraction). [m]
        p_dc_mw: DC nameplate at standard test conditions. [MW]
        p_ac_mw: inverter AC rating; the DC/AC ratio is ``p_dc_mw / p_ac_mw``. [MW]
        tracking: ``fixed`` or ``single_axis`` (horizontal N-S axis by default).
        tilt_deg, azimuth_deg: fixed mounting, azimuth clockwise from north (180 = south). [deg]
        axis_tilt_deg, axis_azimuth_deg, max_angle_deg, gcr_frac: single-axis tracker
            geometry and ground coverage ratio. [deg, deg, deg, -]
        gamma_pdc_per_c: DC power temperature coefficient (PVWatts default -0.0035 for
            premium modules is typical; -0.004 standard). [1/°C]
        dc_loss_frac: lumped DC losses (soiling, mismatch, wiring, ...). [-]
        eta_inv_nom_frac: inverter nominal efficiency (PVWatts 0.96). [-]
        racking: SAPM temperature-model racking (``pvlib.temperature.TEMPERATURE_MODEL_PARAMETERS['sapm']``).
        transposition: sky diffuse model for ``get_total_irradiance``.
        albedo_frac: ground reflectance. [-]
    """

    latitude_deg: float = Field(ge=-90, le=90)
    longitude_deg: float = Field(ge=-180, le=180)
    altitude_m: float = 0.0
    p_dc_mw: float = Field(gt=0)
    p_ac_mw: float = Field(gt=0)
    tracking: Literal["fixed", "single_axis"] = "fixed"
    tilt_deg: float = Field(default=25.0, ge=0, le=90)
    azimuth_deg: float = Field(default=180.0, ge=0, lt=360)
    axis_tilt_deg: float = Field(default=0.0, ge=0, le=90)
    axis_azimuth_deg: float = Field(default=180.0, ge=0, lt=360)
    max_angle_deg: float = Field(default=60.0, gt=0, le=90)
    gcr_frac: float = Field(default=0.35, gt=0, lt=1)
    gamma_pdc_per_c: float = Field(default=-0.0035, ge=-0.01, le=0)
    dc_loss_frac: float = Field(default=0.14, ge=0, lt=1)
    eta_inv_nom_frac: float = Field(default=0.96, gt=0, le=1)
    racking: Literal["open_rack_glass_glass", "close_mount_glass_glass",
                     "open_rack_glass_polymer", "insulated_back_glass_polymer"] = "open_rack_glass_polymer"
    transposition: Literal["isotropic", "haydavies", "reindl", "perez", "klucher"] = "haydavies"
    albedo_frac: float = Field(default=0.25, ge=0, le=1)


class PvPlant:
    """A PV plant: solar geometry for given times, then power from weather (no mosaik).

    Args:
        params: ratings, site and mounting (:class:`PvPlantParams`).
    """

    def __init__(self, params: PvPlantParams):
        self.p = params
        self.site = location.Location(params.latitude_deg, params.longitude_deg, "UTC", params.altitude_m)
        self.temp_params = temperature.TEMPERATURE_MODEL_PARAMETERS["sapm"][params.racking]

    def geometry(self, times: pd.DatetimeIndex) -> pd.DataFrame:
        """Sun and surface angles at ``times``: the weather-independent half of the chain.

        Returns:
            columns ``apparent_zenith``, ``azimuth``, ``surface_tilt``, ``surface_azimuth``,
            ``aoi`` [deg] (of the incidence-angle modifier: 90 for a stowed tracker at night),
            ``dni_extra`` [W/m²], ``airmass``, ``iam`` [-], and the two terms the irradiance
            on the plane needs: ``poa_aoi`` [deg] (the angle of incidence of the beam as
            ``get_total_irradiance`` computes it) and ``projection_ratio`` [-] (Hay-Davies
            ``Rb``).
        """
        sun = self.site.get_solarposition(times)
        geo = pd.DataFrame({"apparent_zenith": sun["apparent_zenith"], "azimuth": sun["azimuth"]}, index=times)
        if self.p.tracking == "fixed":
            geo["surface_tilt"] = self.p.tilt_deg
            geo["surface_azimuth"] = self.p.azimuth_deg
            geo["aoi"] = irradiance.aoi(self.p.tilt_deg, self.p.azimuth_deg, sun["apparent_zenith"], sun["azimuth"])
        else:
            track = tracking.singleaxis(sun["apparent_zenith"], sun["azimuth"], axis_tilt=self.p.axis_tilt_deg,
                                        axis_azimuth=self.p.axis_azimuth_deg, max_angle=self.p.max_angle_deg,
                                        backtrack=True, gcr=self.p.gcr_frac)
            # At night the tracker stows flat; pvlib reports NaN angles there.
            geo["surface_tilt"] = track["surface_tilt"].fillna(0.0)
            geo["surface_azimuth"] = track["surface_azimuth"].fillna(self.p.axis_azimuth_deg)
            geo["aoi"] = track["aoi"].fillna(90.0)
        geo["dni_extra"] = irradiance.get_extra_radiation(times)
        geo["airmass"] = self.site.get_airmass(times, solar_position=sun)["airmass_relative"]
        geo["iam"] = iam.physical(geo["aoi"])
        geo["poa_aoi"] = (geo["aoi"] if self.p.tracking == "fixed" else irradiance.aoi(
            geo["surface_tilt"], geo["surface_azimuth"], sun["apparent_zenith"], sun["azimuth"]))
        geo["projection_ratio"] = _projection_ratio(geo["surface_tilt"], geo["surface_azimuth"],
                                                    sun["apparent_zenith"], sun["azimuth"])
        return geo

    def power(self, geo: pd.DataFrame | dict, ghi_w_m2, dni_w_m2, dhi_w_m2,
              t_air_c=DEFAULT_T_AIR_C, wind_m_s=DEFAULT_WIND_M_S) -> dict[str, Any]:
        """AC power and its intermediate quantities (arrays or scalars alike).

        Args:
            geo: rows of :meth:`geometry` (a frame, or one row as a mapping).
            ghi_w_m2, dni_w_m2, dhi_w_m2: global horizontal, direct normal and diffuse
                horizontal irradiance. [W/m²]
            t_air_c: air temperature. [°C]
            wind_m_s: wind speed. [m/s]

        Returns:
            ``p_ac_mw``, ``p_dc_mw``, ``p_clip_mw`` [MW], ``poa_w_m2`` [W/m²], ``t_cell_c`` [°C].
        """
        poa = self.poa_irradiance(geo, ghi_w_m2, dni_w_m2, dhi_w_m2)
        poa_global = _nan_to_num(np.asarray(poa["poa_global"], dtype=float))
        effective = _nan_to_num(np.asarray(poa["poa_direct"], dtype=float) * np.asarray(geo["iam"], dtype=float)
                                + np.asarray(poa["poa_diffuse"], dtype=float))
        t_cell = temperature.sapm_cell(poa_global, t_air_c, wind_m_s, **self.temp_params)
        p_dc = pvsystem.pvwatts_dc(effective, t_cell, self.p.p_dc_mw, self.p.gamma_pdc_per_c)
        p_dc = np.maximum(p_dc * (1.0 - self.p.dc_loss_frac), 0.0)
        pdc0_inverter = self.p.p_ac_mw / self.p.eta_inv_nom_frac
        p_ac = inverter.pvwatts(p_dc, pdc0_inverter, eta_inv_nom=self.p.eta_inv_nom_frac)
        p_clip = np.maximum(p_dc * self.p.eta_inv_nom_frac - self.p.p_ac_mw, 0.0)
        return {"p_ac_mw": p_ac, "p_dc_mw": p_dc, "p_clip_mw": p_clip, "poa_w_m2": poa_global, "t_cell_c": t_cell}

    def poa_irradiance(self, geo: pd.DataFrame | dict, ghi_w_m2, dni_w_m2, dhi_w_m2) -> dict[str, Any]:
        """``irradiance.get_total_irradiance``'s steps, with the time-only terms taken from ``geo``.

        The same pvlib calls in the same order as ``get_total_irradiance`` makes them, except
        that the angle of incidence (``poa_aoi``) and, for Hay-Davies, the projection ratio
        come precomputed for the run instead of being recomputed every step.

        Returns:
            pvlib's ``poa_global``, ``poa_direct``, ``poa_diffuse``, ... [W/m²]
        """
        tilt, azimuth = geo["surface_tilt"], geo["surface_azimuth"]
        if self.p.transposition == "haydavies":
            sky = irradiance.haydavies(tilt, azimuth, dhi_w_m2, dni_w_m2, geo["dni_extra"],
                                       projection_ratio=geo["projection_ratio"])
        else:
            sky = irradiance.get_sky_diffuse(tilt, azimuth, geo["apparent_zenith"], geo["azimuth"], dni_w_m2,
                                             ghi_w_m2, dhi_w_m2, dni_extra=geo["dni_extra"], airmass=geo["airmass"],
                                             model=self.p.transposition)
        ground = irradiance.get_ground_diffuse(tilt, ghi_w_m2, self.p.albedo_frac)
        return irradiance.poa_components(geo["poa_aoi"], dni_w_m2, sky, ground)

    def simulate(self, weather: pd.DataFrame) -> pd.DataFrame:
        """Run the chain over a weather frame indexed by UTC time (columns as the inputs)."""
        geo = self.geometry(weather.index)
        out = self.power(geo, weather["ghi_w_m2"], weather["dni_w_m2"], weather["dhi_w_m2"],
                         weather.get("t_dry_c", DEFAULT_T_AIR_C), weather.get("wind_m_s", DEFAULT_WIND_M_S))
        return pd.DataFrame({k: np.asarray(v, dtype=float) for k, v in out.items()}, index=weather.index)


def _projection_ratio(surface_tilt, surface_azimuth, solar_zenith, solar_azimuth):
    """Hay-Davies ``Rb``: beam on the plane over beam on the horizontal. [-]

    ``irradiance.haydavies``'s own expression (with its guards, GH 526 and GH 432), so passing
    it as ``projection_ratio`` gives the values haydavies computes from the angles.
    """
    cos_tt = np.maximum(irradiance.aoi_projection(surface_tilt, surface_azimuth, solar_zenith, solar_azimuth), 0)
    return cos_tt / np.maximum(tools.cosd(solar_zenith), 0.01745)


def _real(value: Any) -> bool:
    kind = type(value)
    if kind is float or kind is int:  # the usual case, without isinstance's two calls
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _lit_weather(inputs: dict[str, Any]) -> tuple | None:
    """The weather (value and type of ghi, dni, dhi, air temperature, wind) of a step that
    :meth:`PvSim.advance` evaluates through :meth:`PvSim._lit`; None for one it does not (dark,
    or a value that is not a finite real number)."""
    ghi, dni, dhi = inputs.get("ghi_w_m2", 0.0), inputs.get("dni_w_m2", 0.0), inputs.get("dhi_w_m2", 0.0)
    t_air, wind = inputs.get("t_dry_c", DEFAULT_T_AIR_C), inputs.get("wind_m_s", DEFAULT_WIND_M_S)
    if ghi == 0 and dni == 0 and dhi == 0 and _real(t_air) and _real(wind) and math.isfinite(wind):
        return None
    if not _finite_reals(ghi, dni, dhi, t_air, wind):
        return None
    return (ghi, type(ghi)), (dni, type(dni)), (dhi, type(dhi)), (t_air, type(t_air)), (wind, type(wind))


def _nan_to_num(values: np.ndarray):
    """``np.nan_to_num``, with a shortcut for the finite scalar of a step (same value and type).

    ``np.nan_to_num`` costs ~10 µs on a 0-d array; a step calls it twice.
    """
    if values.ndim == 0 and math.isfinite(values):
        return values[()]
    return np.nan_to_num(values)


#: Longest run of steps one weather value is evaluated for at once (an hour of 1-minute steps). [-]
N_BLOCK_STEPS_MAX = 64
#: What :meth:`PvSim._lit` keeps of the chain's outputs, per step.
_CHAIN_OUT = ("p_ac_mw", "p_dc_mw", "p_clip_mw", "poa_w_m2", "t_cell_c")


class _Geometry:
    """Sun and array geometry of one plant for every step of the run, computed on first use,
    and the chain's outputs of the steps ahead while the weather holds (:meth:`PvSim._lit`)."""

    def __init__(self, plant: PvPlant):
        self.plant = plant
        self.names: list[str] = []
        self.rows = np.empty((0, 0))  # step x column
        self.weather: tuple | None = None  # the weather (value and type of each input) the block is for
        self.block_start, self.block_end = 0, 0  # its steps [start, end)
        self.block: list[tuple[float, ...]] = []  # per step: p_ac, p_dc, p_clip, poa, t_cell
        self.run_start_step, self.n_held_steps = 0, 0  # where this weather value began; the run of the one before [steps]
        #: step index -> (weather, chain outputs) of the steps the look-ahead hint announced (PvSim.look_ahead)
        self.ahead: dict[int, tuple[tuple, tuple[float, ...]]] = {}


def _first_time(start_utc, step_s: float) -> pd.Timestamp:
    """The middle of a run's first step, where its geometry's first row places the sun."""
    return pd.Timestamp(start_utc) + pd.Timedelta(seconds=step_s / 2.0)


def _times(first: pd.Timestamp, n_steps: int, step_s: float) -> pd.DatetimeIndex:
    return pd.date_range(first, periods=n_steps, freq=pd.Timedelta(seconds=step_s))


class _GeometryAhead:
    """Geometry rows of runs to come (:meth:`PvSim.prepare_starts`), shared by the PvSims of this
    process: plant, step and run length -> {first time [ns]: (column names, rows)}.

    The runs' times on one grid (start days a whole number of steps apart) are computed in one
    :meth:`PvPlant.geometry` call and each run takes its slice. The rows are the same, to the
    bit, as a run's own call gives: every function of the geometry works time by time (sun
    position, angles, extraterrestrial radiation, air mass, incidence modifier), so a time's row
    does not depend on the times around it (tests/adapters/test_pv.py checks every start day of
    rl_site's window, both mountings). A start more than a run's length after the previous run's
    end begins a call of its own; the calls for one plant, step and run length cover at most
    :data:`MAX_ROWS` times in all (the starts beyond are left to compute their own).
    """

    MAX_ROWS = 200_000  # times kept per plant, step and run length (at 5-minute steps, 694 days; ~16 MiB)
    MAX_KEYS = 8  # plants, steps and run lengths kept (the least recently used dropped)

    def __init__(self):
        self._runs: OrderedDict[tuple, dict[int, tuple[list[str], np.ndarray]]] = OrderedDict()
        self._n_rows: dict[tuple, int] = {}  # times computed per key

    @staticmethod
    def _key(plant: PvPlant, step_s: float, n_steps: int) -> tuple:
        return type(plant), plant.p.model_dump_json(), float(step_s), int(n_steps)

    def get(self, plant: PvPlant, step_s: float, n_steps: int, first: pd.Timestamp):
        """``(column names, rows)`` of the run from ``first``, or None when not prepared."""
        key = self._key(plant, step_s, n_steps)
        runs = self._runs.get(key)
        if runs is None:
            return None
        self._runs.move_to_end(key)
        return runs.get(first.value)

    def prepare(self, plant: PvPlant, firsts: list[pd.Timestamp], step_s: float, n_steps: int) -> None:
        """Compute the rows of the runs from each of ``firsts`` (that are not kept yet)."""
        key = self._key(plant, step_s, n_steps)
        runs = self._runs.setdefault(key, {})
        self._runs.move_to_end(key)
        while len(self._runs) > self.MAX_KEYS:
            self._n_rows.pop(self._runs.popitem(last=False)[0], None)
        step_ns = pd.Timedelta(seconds=step_s).value
        stamps = {first.value: first for first in firsts}
        todo = sorted(set(stamps) - set(runs))
        room = self.MAX_ROWS - self._n_rows.get(key, 0)
        while todo:
            base, group = todo[0], [todo[0]]
            for value in todo[1:]:
                offset, gap = divmod(value - base, step_ns)
                if gap or offset + n_steps > room or value - group[-1] > 2 * n_steps * step_ns:
                    break
                group.append(value)
            total = (group[-1] - base) // step_ns + n_steps
            if total > room:
                return
            room -= total
            self._n_rows[key] = self.MAX_ROWS - room
            frame = plant.geometry(_times(stamps[base], total, step_s))
            rows = frame.to_numpy(dtype=float)
            rows.setflags(write=False)
            for value in group:
                offset = (value - base) // step_ns
                runs[value] = (list(frame.columns), rows[offset:offset + n_steps])
            todo = todo[len(group):]


#: The geometry prepared for runs to come, shared by every PvSim of this process.
GEOMETRY_AHEAD = _GeometryAhead()


class PvSim(SingleModelSim):
    """PV plants (model ``PvPlant``) driven by weather inputs."""

    MODEL, PARAMS, ROLE = "PvPlant", PvPlantParams, "clean_gen"
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {
        "models": {"PvPlant": {"latitude_deg": 36.1, "longitude_deg": -79.95, "p_dc_mw": 1.2, "p_ac_mw": 1.0}},
    }

    @classmethod
    def input_bounds(cls, model, params, sim_params=None):
        """A curtailment limit is a power from 0 up (its top: the unit's plausible range). [MW]"""
        return {"p_limit_mw": (0.0, float("inf"))}

    def build(self, eid: str, params: PvPlantParams) -> _Geometry:
        return _Geometry(PvPlant(params))

    def setup_done(self) -> None:
        """Each plant's geometry over the run now, not at its first lit step (the same rows: they
        depend on the step times only), so that a set-up copy carries it (:meth:`built_from`)."""
        for geo in self.entities.values():
            self._step_index(geo)

    def built_from(self) -> frozenset[str] | None:
        """The geometry is that of the run's times: it depends on the start, not on the seed."""
        return frozenset({"start_utc", "duration_s"}) if type(self) is PvSim else None

    def prepare_starts(self, starts_utc: list[datetime]) -> None:
        """Each plant's geometry for runs of this length starting at ``starts_utc``, in as few
        pvlib calls as the start days allow (:class:`_GeometryAhead`): a run built later for one
        of them takes its rows from there instead of computing them."""
        n_steps = self._n_run_steps()
        for geo in self.entities.values():
            GEOMETRY_AHEAD.prepare(geo.plant, [_first_time(s, self.step_s) for s in starts_utc], self.step_s,
                                   n_steps)

    def _n_run_steps(self) -> int:
        """Steps of the run (the last one possibly cut short by its end)."""
        return -(-self.duration_s * self.ticks_per_s // self.step_ticks)

    def _step_index(self, geo: _Geometry) -> int:
        """This step's index (exact), with the run's geometry computed on first use."""
        k = self.time_ticks // self.step_ticks
        self._compute_geometry(geo, k)
        return k

    def _compute_geometry(self, geo: _Geometry, k: int) -> None:
        """The run's geometry (all steps, at least to step ``k``), unless computed already."""
        if k >= len(geo.rows):  # first step (or, defensively, one past the scenario's end)
            n_steps = max(self._n_run_steps(), k + 1)
            first = _first_time(self.utc(0), self.step_s)
            prepared = GEOMETRY_AHEAD.get(geo.plant, self.step_s, n_steps, first)
            if prepared is not None:
                geo.names, geo.rows = list(prepared[0]), prepared[1]
            else:
                frame = geo.plant.geometry(_times(first, n_steps, self.step_s))
                geo.names, geo.rows = list(frame.columns), frame.to_numpy(dtype=float)

    def _geometry_row(self, geo: _Geometry, time_s: float) -> dict[str, float]:
        """Geometry at the middle of the step starting at ``time_s`` (the run's computed on first use)."""
        k = self._step_index(geo)  # (before geo.rows is read: it computes them on first use)
        return dict(zip(geo.names, geo.rows[k].tolist()))

    def _lit(self, geo: _Geometry, weather: tuple) -> tuple[float, ...]:
        """The chain's ``p_ac, p_dc, p_clip, poa, t_cell`` of this step under ``weather`` (finite
        numbers, each with its type: ghi, dni, dhi, air temperature, wind).

        Weather often holds over many steps (hourly TMY3 under 1-minute steps), so the chain is
        evaluated once for the steps ahead with this weather, as arrays, and those steps read
        their row while the weather stays the same (same values of the same types). Every
        function of the chain works element by element, so a row is the number the chain gives
        for that step alone (tests/adapters/test_pv.py checks this bit for bit on six days of
        TMY3 hours, both mountings and every transposition model; ``bench/bench_pv_block.py
        --year-check`` over the whole year). A block is as long as the
        weather held before (the previous value's run, or this one's so far; at most
        :data:`N_BLOCK_STEPS_MAX`): weather changing every step is evaluated step by step. The weather
        goes in as arrays, so numpy's rules apply where the chain divides by it (klucher's
        ``dhi / ghi`` at ``ghi = 0``: 0 / 0 is NaN, which pvlib takes as 0, as ModelChain does on
        a series; as Python floats it raised ZeroDivisionError at dusk in TMY3 hours with
        ``ghi = 0 < dni``).
        """
        k = self._step_index(geo)
        ahead = geo.ahead.get(k)
        if ahead is not None and ahead[0] == weather:
            return ahead[1]
        if weather == geo.weather:
            if geo.block_start <= k < geo.block_end:
                return geo.block[k - geo.block_start]
        else:
            geo.n_held_steps, geo.run_start_step = k - geo.run_start_step, k
        n = min(max(geo.n_held_steps, k - geo.run_start_step, 1), N_BLOCK_STEPS_MAX, len(geo.rows) - k)
        ghi, dni, dhi, t_air, wind = (np.full(n, value) for value, _ in weather)  # numpy's division rules
        cols = {name: np.ascontiguousarray(geo.rows[k:k + n, j]) for j, name in enumerate(geo.names)}
        with np.errstate(divide="ignore", invalid="ignore"):  # klucher's dhi / ghi at ghi = 0, as over a series
            out = geo.plant.power(cols, ghi, dni, dhi, t_air, wind)
        block = list(zip(*(np.broadcast_to(np.asarray(out[key], dtype=float), (n,)).tolist() for key in _CHAIN_OUT)))
        geo.weather, geo.block_start, geo.block_end, geo.block = weather, k, k + len(block), block
        return block[0]

    def look_ahead(self, steps: list[tuple[int, dict[str, dict[str, Any]]]]) -> None:
        """Evaluate the chain for the lit steps ahead at once, as arrays (one call per set of
        input types), for :meth:`_lit` to serve as the steps come with the same weather.

        Each step's row is the number the chain gives for that step alone, as :meth:`_lit`'s
        blocks are (every function of the chain works element by element; a step is evaluated
        on arrays either way); tests/adapters/test_pv_look_ahead.py checks a run with the hint
        against one without, bit for bit.
        """
        for eid, geo in self.entities.items():
            geo.ahead = {}
            groups: dict[tuple[type, ...], list[tuple[int, tuple]]] = {}
            for when, inputs in steps:
                weather = _lit_weather(inputs.get(eid, {}))
                if weather is not None:
                    groups.setdefault(tuple(kind for _, kind in weather), []).append((when // self.step_ticks, weather))
            for rows in groups.values():
                ks = [k for k, _ in rows]
                self._compute_geometry(geo, ks[-1])
                n = len(rows)
                index = np.array(ks)
                cols = {name: geo.rows[index, j] for j, name in enumerate(geo.names)}
                ghi, dni, dhi, t_air, wind = (np.array([w[i][0] for _, w in rows]) for i in range(5))
                with np.errstate(divide="ignore", invalid="ignore"):  # as in _lit
                    out = geo.plant.power(cols, ghi, dni, dhi, t_air, wind)
                block = zip(*(np.broadcast_to(np.asarray(out[key], dtype=float), (n,)).tolist() for key in _CHAIN_OUT))
                for (k, weather), values in zip(rows, block):
                    geo.ahead[k] = (weather, values)

    def advance(self, geo: _Geometry, time_s: float, inputs: dict[str, Any]) -> dict[str, float]:
        ghi, dni, dhi = inputs.get("ghi_w_m2", 0.0), inputs.get("dni_w_m2", 0.0), inputs.get("dhi_w_m2", 0.0)
        t_air, wind = inputs.get("t_dry_c", DEFAULT_T_AIR_C), inputs.get("wind_m_s", DEFAULT_WIND_M_S)
        if ghi == 0 and dni == 0 and dhi == 0 and _real(t_air) and _real(wind) and math.isfinite(wind):
            # Dark (night): the chain gives exactly 0 W and a cell at air temperature (SAPM:
            # 0 * exp(a + b*ws) + T_air + 0); skip its ~20 pvlib calls (tests/adapters/test_pv.py
            # checks this against the full chain for every tracking mode and transposition model).
            p_ac, p_dc, p_clip, poa, t_cell = 0.0, 0.0, 0.0, 0.0, float(t_air)
        elif _finite_reals(ghi, dni, dhi, t_air, wind):
            weather = ((ghi, type(ghi)), (dni, type(dni)), (dhi, type(dhi)), (t_air, type(t_air)), (wind, type(wind)))
            p_ac, p_dc, p_clip, poa, t_cell = self._lit(geo, weather)  # floats (tolist)
        else:
            out = geo.plant.power(self._geometry_row(geo, time_s), ghi, dni, dhi, t_air, wind)
            p_ac, p_dc, p_clip, poa, t_cell = (float(out[key]) for key in _CHAIN_OUT)
        p_mw = min(p_ac, max(float(inputs["p_limit_mw"]), 0.0)) if "p_limit_mw" in inputs else p_ac
        return {"p_mw": p_mw, "p_avail_mw": p_ac, "p_curtailed_mw": p_ac - p_mw, "p_dc_mw": p_dc,
                "p_clip_mw": p_clip, "poa_w_m2": poa, "t_cell_c": t_cell}


def _finite_reals(*values: Any) -> bool:
    """Every value a finite real number (:func:`_real`)."""
    for value in values:
        if not (_real(value) and math.isfinite(value)):
            return False
    return True
