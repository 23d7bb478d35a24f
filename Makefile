# The two set-up commands of the README. Each works on a fresh machine with
# only Python (>= 3.11) and make: the virtualenv is created when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_STAMP := $(VENV)/.sealeval-run
DEV_STAMP := $(VENV)/.sealeval-dev

.PHONY: demo test lint types docs unit bench clean contracts interop unicode15

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "sealeval needs Python >= 3.11 (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(RUN_STAMP)

## make demo: create .venv if missing, install, run the end-to-end walkthrough into ./demo-out/
demo: $(RUN_STAMP)
	$(BIN)/sealeval demo --out demo-out

## make test: install the dev extras, then lint, types and the whole suite with branch coverage
test: lint types docs unit

## make docs: the API reference from the docstrings (mkdocs --strict: warnings are errors)
docs: $(DEV_STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir .docs-site

lint: $(DEV_STAMP)
	$(BIN)/ruff check --no-cache src tests bench scripts
	$(BIN)/ruff format --no-cache --check src tests bench scripts

types: $(DEV_STAMP)
	$(BIN)/mypy --strict src

unit: $(DEV_STAMP)
	$(BIN)/python -m pytest --cov=sealeval --cov-branch --cov-report=term:skip-covered --cov-fail-under=95

## make interop: check documents both ways against the reference openmed 3.1.0 and
## invarlock 0.17.1 (each in its own venv; invarlock needs Python 3.12, from pyenv)
INTEROP_OPENMED := .interop/openmed-venv
INTEROP_INVARLOCK := .interop/invarlock-venv
INTEROP_PYTHON312 ?= /root/.pyenv/versions/3.12.1/bin/python
$(INTEROP_OPENMED)/bin/python:
	$(PYTHON) -m venv $(INTEROP_OPENMED)
	$(INTEROP_OPENMED)/bin/python -m pip install --quiet --no-deps openmed==3.1.0 pyyaml faker

$(INTEROP_INVARLOCK)/bin/python:
	$(INTEROP_PYTHON312) -m venv $(INTEROP_INVARLOCK)
	$(INTEROP_INVARLOCK)/bin/python -m pip install --quiet invarlock==0.17.1

interop: $(RUN_STAMP) $(INTEROP_OPENMED)/bin/python $(INTEROP_INVARLOCK)/bin/python
	$(BIN)/python scripts/interop/openmed_interop.py --reference-python $(INTEROP_OPENMED)/bin/python
	$(BIN)/python scripts/interop/invarlock_interop.py --reference-python $(INTEROP_INVARLOCK)/bin/python

## make unicode15: the overlap-forensics tests (every openmed vector) under CPython 3.12,
## whose Unicode tables are 15.0.0: the contract's 14.0.0 normalization must not change
PY312_VENV := .interop/py312-venv
$(PY312_VENV)/bin/python:
	$(INTEROP_PYTHON312) -m venv $(PY312_VENV)
	$(PY312_VENV)/bin/python -m pip install --quiet -e '.[dev]'

unicode15: $(PY312_VENV)/bin/python
	$(PY312_VENV)/bin/python -m pytest -q -p no:cacheprovider --no-cov tests/test_session_forensics.py

bench: $(RUN_STAMP)
	$(BIN)/python bench/digest_throughput.py

clean:
	rm -rf $(VENV) .interop demo-out .pytest_cache .mypy_cache .ruff_cache .coverage build src/*.egg-info

## make contracts: copy contracts/*.schema.json into the package data (a test checks they match)
contracts:
	rm -f src/sealeval/_data/contracts/*.schema.json
	cp contracts/*.schema.json src/sealeval/_data/contracts/
