"""Package layout: the repository's top-level ``adapters/``, ``grid_models/`` and ``thermal_fmus/``
folders are installed as ``cosim.adapters``, ``cosim.grid_models`` and ``cosim.thermal_fmus``, so
nothing with a generic name lands in site-packages. Every other setting is in pyproject.toml;
this file exists because pyproject's ``packages.find`` cannot map folders into another package.
Subpackages are found on every build: a new folder needs no edit here.
"""

from setuptools import find_packages, setup

MAPPED = {"cosim.adapters": "adapters", "cosim.grid_models": "grid_models", "cosim.thermal_fmus": "thermal_fmus"}


def packages() -> list[str]:
    found = [p for p in find_packages(include=["cosim", "cosim.*"])]
    for name, folder in MAPPED.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(where=folder)]
    return sorted(set(found))


setup(packages=packages(), package_dir=MAPPED)
