"""Parameter types shared by adapters: data files resolved from the scenario's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, ValidationInfo


def _resolve_existing_file(value: Path, info: ValidationInfo) -> Path:
    base_dir = (info.context or {}).get("base_dir")
    path = Path(value).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    path = path.resolve()
    if not path.is_file():
        raise ValueError(f"data file not found: {path}")
    return path


#: A data file path. Relative paths resolve from the scenario file's folder (passed as
#: ``context={"base_dir": ...}`` to ``model_validate``); the file must exist.
DataFile = Annotated[Path, AfterValidator(_resolve_existing_file)]
