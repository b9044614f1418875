# One-command entry points. `make demo` and `make test` work on a fresh machine:
# they create .venv, install curator_dask with its extras, and run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
EXTRAS ?= dev,s3,models,monitoring,pii
# setup.cfg asks for torch>=2.5; this constraint makes pip take the CPU build of 2.13.0.
CONSTRAINTS ?= constraints/cpu.txt
# `make test-min`: its own venv with the lowest versions setup.cfg allows, for the core and
# the extras that take them (the `models` extra needs pandas 3, see setup.cfg).
MIN_VENV ?= .venv-min
MIN_EXTRAS ?= dev,s3,monitoring
MIN_PY := $(MIN_VENV)/bin/python
# `make test` runs the tests in this many processes (pytest-xdist; 0: in this one)
TEST_PROCS ?= 2

.PHONY: install demo test test-min test-gpu lint bench clean

$(VENV)/.installed-$(subst ,,$(EXTRAS)): setup.cfg pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	touch $@

$(MIN_VENV)/.installed: setup.cfg pyproject.toml constraints/min.txt
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_PY) -m pip install -q --upgrade pip
	$(MIN_PY) -m pip install -q -c constraints/min.txt -e ".[$(MIN_EXTRAS)]"
	touch $@

install: $(VENV)/.installed-$(subst ,,$(EXTRAS))

demo: install
	$(VENV)/bin/curator-dask demo --output out/demo

test: install
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_PROCS)

test-min: $(MIN_VENV)/.installed
	$(MIN_PY) -m pip list --format=freeze | grep -iE '^(dask|distributed|pandas|pyarrow|numpy|numba)=='
	$(MIN_PY) -m pytest -q -p no:cacheprovider

test-gpu: install
	$(PY) -m pytest -q -m gpu

lint: install
	$(VENV)/bin/ruff check curator_dask tests bench
	$(VENV)/bin/ruff format --check curator_dask tests bench
	$(VENV)/bin/mypy curator_dask

bench: install
	$(PY) -m bench

clean:
	rm -rf out bench/results .pytest_cache
