"""The FMU adapter's parameters: the ``[sims.<id>]`` keys (:class:`SimParams`) and the start
values of an instance (:class:`EntityParams`), checked when the scenario is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from cosim.sdk import ROLES, Params
from cosim.adapters.fmu.description import AttrMap, is_path

__all__ = ["EntityParams", "EveryModel", "SimParams"]


class SimParams(Params):
    """Params of one FMU simulator (the ``[sims.<id>]`` keys besides ``adapter`` and ``step_s``).

    Attributes:
        fmu: a shipped model name (``ChillerPlant``, see ``thermal_fmus/``) or a ``.fmu`` path;
            relative paths resolve from the scenario's folder.
        attrs: FMU variable -> scenario attribute (or ``"skip"``); overrides the sidecar file.
        interface: ``auto`` prefers co-simulation when the FMU offers both; ``cs`` or ``me``
            forces one.
        solver: model-exchange integrator: ``CVode`` (variable step, fmpy's SUNDIALS) or
            ``Euler`` (fixed step of ``solver_step_s``).
        solver_step_s: Euler step, or the largest CVode step; default ``step_s / 10``. [s]
        rtol: CVode relative tolerance. [-]
        log: pass the FMU's debug log messages on (errors are always kept). [-]
        role: the model's role (``cosim.roles``); default from its outputs: ``air_handler``
            with ``p_fans_mw``, ``cooling`` with ``p_cooling_mw``, else ``other``.
        outputs_at: ``step_end`` reports at ``t`` the outputs at the end of the step from ``t``;
            ``step_start`` those at ``t`` (the row at 0 holds the initial values; see sim.py's docstring).
    """

    fmu: str
    attrs: AttrMap = {}
    interface: Literal["auto", "cs", "me"] = "auto"
    solver: Literal["CVode", "Euler"] = "CVode"
    solver_step_s: float | None = Field(default=None, gt=0)
    rtol: float = Field(default=1e-6, gt=0, lt=1)
    log: bool = False
    role: Literal[ROLES] | None = None
    outputs_at: Literal["step_end", "step_start"] = "step_end"

    @field_validator("fmu")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        if not is_path(value):
            return value  # a shipped model: resolved (and built) when first used
        path = Path(value).expanduser()
        base_dir = (info.context or {}).get("base_dir")
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        try:
            found = (path := path.resolve()).is_file()
        except OSError as exc:  # a name too long for the file system
            raise ValueError(f"not a usable FMU path ({exc.strerror or exc})") from None
        if not found:
            raise ValueError(f"FMU file not found: {path}")
        return str(path)


class EntityParams(BaseModel):
    """Start values of one instance: ``<scenario attribute> = value`` for any input or
    parameter, in scenario units (checked against the model description by validation)."""

    model_config = ConfigDict(extra="allow")


class EveryModel(dict):
    """``ModelParams`` for an adapter whose model names come from the FMU it runs."""

    def get(self, key, default=None):
        return EntityParams

    def __getitem__(self, key):
        return EntityParams

    def __contains__(self, key):
        return True
