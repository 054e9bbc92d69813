# cosim — the two commands: `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test setup build bench clean docs

run: setup build
	$(PY) -m cosim run scenarios/default.toml

# one worker per core, each test file on one worker (its module fixtures run once); the C parts must be in use
# (COSIM_REQUIRE_C_PARTS: a C-part test fails rather than skips where its library is not)
test: setup build
	COSIM_REQUIRE_C_PARTS=1 $(PY) -m pytest -q -n auto --dist loadfile

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing cosim and its dependencies into $(VENV) (log: $(VENV)/install.log)"
	@$(PY) -m pip install --upgrade pip > $(VENV)/install.log 2>&1 || (cat $(VENV)/install.log; exit 1)
	@$(PY) -m pip install -e '.[test]' >> $(VENV)/install.log 2>&1 || (tail -50 $(VENV)/install.log; exit 1)
	@touch $(STAMP)

# The cooling FMUs: compiled from thermal_fmus/<Model>/ C sources with gcc, only when missing or stale;
# and each adapter's C part (adapters/<package>/_*.c: the grid engines' per-step arithmetic, the FMU adapter's
# one-call FMI 2.0 step, the datacenter's per-job progress; without one, numpy, Python or OpenDSS do the same).
# No fast-math and no FMA contraction: the C code must round as numpy's loops and Python round. The source's SHA-256
# goes into the library (cosim_source_sha256): cosim.sdk.load_library trusts no library built from another text.
KERNELS := $(patsubst %.c,%.so,$(wildcard adapters/*/_*.c)) $(patsubst %.c,%.so,$(wildcard cosim/run/_*.c))
CFLAGS_C_PART = -O2 -fPIC -shared -std=c11 -ffp-contract=off -fno-fast-math -Wall \
	-DCOSIM_SOURCE_SHA256='"'"$$($(PY) -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' $<)"'"'

build: setup $(KERNELS)
	@$(PY) thermal_fmus/build.py

adapters/%.so: adapters/%.c
	gcc $(CFLAGS_C_PART) -o $@ $< -lm

# the core's C parts (cosim/run/_engine.c: the direct engine's bookkeeping) are CPython extension code: built with
# the headers of the venv's Python, loaded as the adapters' are (the same SHA-256 check)
cosim/run/%.so: cosim/run/%.c | setup
	gcc $(CFLAGS_C_PART) -I"$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" -o $@ $<

# The manual: reference pages generated from the schema and the registry, the gallery drawn from runs of the
# catalogue's scenarios (a few minutes), then mkdocs (no network).
docs: setup
	$(PY) docs/gen_reference.py
	$(PY) docs/gen_gallery.py
	$(VENV)/bin/mkdocs build --strict --site-dir site

bench: setup build
	$(PY) bench/bench_default.py

clean:
	rm -rf $(VENV) runs .pytest_cache build *.egg-info $(KERNELS)
