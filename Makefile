# One venv for everything; `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install dev demo test test-slow bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

dev: $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'

demo: install
	$(BIN)/toktok train data_fixtures/ --out out/demo --merges 2000 --special-token '<|endoftext|>' --force

test: dev
	$(BIN)/python -m pytest

test-slow: dev
	$(BIN)/python -m pytest -m slow

bench: $(BIN)/python
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) out
