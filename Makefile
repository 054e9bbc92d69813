# cosim — the two commands: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test setup build bench clean

run: setup build
	$(PY) -m cosim run scenarios/default.toml

test: setup build
	$(PY) -m pytest -q

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# Things that need building before a run (the FMUs, once they exist).
build: setup

bench: setup build
	$(PY) bench/bench_default.py

clean:
	rm -rf $(VENV) runs .pytest_cache build *.egg-info
