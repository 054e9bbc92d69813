"""An FMU's zip archive read within bounds: checked before anything is parsed or extracted.

An FMU is a zip archive a user brings. Its entries' sizes, as the archive declares them, are
checked before anything is read: the whole archive unpacks to at most :data:`MAX_UNPACKED_BYTES`
(a 2 MB FMU with a 2 GB zero-filled entry is refused before extraction), no entry expands more
than :data:`MAX_RATIO` times beyond a few MiB (the signature of a zip bomb),
``modelDescription.xml`` is at most :data:`MAX_DESCRIPTION_BYTES` and has no DTD (an FMI model
description needs none; a DTD is how XML entities expand), and no entry may land outside the
folder it is extracted to (``../`` or absolute names, symbolic links). Python's zip reader
never returns more bytes than an entry declares, so the declared sizes bound what is written.

The limits can be raised for a genuinely large FMU with the environment variables
``COSIM_FMU_MAX_UNPACKED_MB`` and ``COSIM_FMU_MAX_DESCRIPTION_MB``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

MiB = 1024 * 1024
#: Everything an FMU unpacks to. [bytes]
MAX_UNPACKED_BYTES = 1024 * MiB
#: Its model description (the largest FMI model descriptions of big Modelica models are ~20 MB). [bytes]
MAX_DESCRIPTION_BYTES = 64 * MiB
#: Uncompressed / compressed size above which an entry larger than :data:`RATIO_FLOOR_BYTES` is refused. [-]
MAX_RATIO = 200
RATIO_FLOOR_BYTES = 16 * MiB


def _limit(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    try:
        return int(float(text) * MiB) if text else default
    except ValueError:
        return default


def max_unpacked_bytes() -> int:
    return _limit("COSIM_FMU_MAX_UNPACKED_MB", MAX_UNPACKED_BYTES)


def max_description_bytes() -> int:
    return _limit("COSIM_FMU_MAX_DESCRIPTION_MB", MAX_DESCRIPTION_BYTES)


def _mb(n: int) -> str:
    return f"{n / MiB:,.0f} MiB" if n >= MiB else f"{n:,} bytes"


def _unsafe_name(name: str) -> bool:
    posix = PurePosixPath(name.replace("\\", "/"))
    return posix.is_absolute() or ".." in posix.parts or (len(name) > 1 and name[1] == ":")


def archive_problem(path: Path) -> str:
    """Why the FMU ``path`` must not be read or extracted (the limit it exceeds), or ``""``. Not a zip
    archive is left to the caller's own message."""
    try:
        with zipfile.ZipFile(path) as zf:
            entries = zf.infolist()
            description = next((e for e in entries if e.filename == "modelDescription.xml"), None)
            head = b""
            if description is not None and description.file_size <= max_description_bytes():
                with zf.open(description) as handle:
                    head = handle.read(64 * 1024)
    except (zipfile.BadZipFile, OSError, NotImplementedError, RuntimeError, EOFError, ValueError):
        return ""  # not a (readable) zip archive: the describer names it
    total = 0
    for entry in entries:
        name = entry.filename
        if _unsafe_name(name):
            return f"the entry {name!r} would be extracted outside the FMU's folder; export the FMU again"
        if stat.S_ISLNK(entry.external_attr >> 16):
            return f"the entry {name!r} is a symbolic link; an FMU holds files only: export the FMU again"
        if name == "modelDescription.xml" and entry.file_size > max_description_bytes():
            return (f"modelDescription.xml is {_mb(entry.file_size)}, over the limit of "
                    f"{_mb(max_description_bytes())}; set COSIM_FMU_MAX_DESCRIPTION_MB to raise it for an FMU you trust")
        if (entry.file_size > RATIO_FLOOR_BYTES and entry.compress_size > 0
                and entry.file_size / entry.compress_size > MAX_RATIO):
            return (f"the entry {name!r} expands {entry.file_size / entry.compress_size:,.0f} times "
                    f"({_mb(entry.compress_size)} to {_mb(entry.file_size)}; the limit is {MAX_RATIO} times for entries "
                    f"over {_mb(RATIO_FLOOR_BYTES)}): not an FMU a modelling tool writes")
        total += entry.file_size
    if total > max_unpacked_bytes():
        return (f"it unpacks to {_mb(total)}, over the limit of {_mb(max_unpacked_bytes())}; set "
                "COSIM_FMU_MAX_UNPACKED_MB to raise it for an FMU you trust")
    if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
        return "modelDescription.xml declares a DTD or entities, which an FMI model description never needs"
    return ""


def extract(path: Path) -> str:
    """Extract the FMU ``path`` into a new temporary folder (its path is returned) after
    :func:`archive_problem` passed; raises ValueError naming the limit otherwise."""
    problem = archive_problem(path)
    if problem:
        raise ValueError(problem)
    folder = tempfile.mkdtemp(prefix="cosim-fmu-")
    root = Path(folder).resolve()
    try:
        with zipfile.ZipFile(path) as zf:
            for entry in zf.infolist():
                target = (root / entry.filename).resolve()
                if target != root and root not in target.parents:
                    raise ValueError(f"the entry {entry.filename!r} would be extracted outside the FMU's folder")
                if entry.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(entry) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1024 * 1024)  # bounded by the entry's declared size
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder
