# One-command entry points. `make demo` and `make test` work on a fresh machine:
# they create .venv, install curator_dask with its extras, and run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch==2.13.0 is pinned in the `models` extra so pip takes the CPU wheel.
EXTRAS ?= dev,s3,models,monitoring

.PHONY: install demo test test-gpu lint bench clean

$(VENV)/.installed-$(subst ,,$(EXTRAS)): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

install: $(VENV)/.installed-$(subst ,,$(EXTRAS))

demo: install
	$(VENV)/bin/curator-dask demo --output out/demo

test: install
	$(PY) -m pytest -q -p no:cacheprovider

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
