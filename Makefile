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
	$(BIN)/pip install -q -e '.[dev,ray]'

demo: install
	$(BIN)/toktok train data_fixtures/ --out out/demo --merges 2000 --special-token '<|endoftext|>' --force

test: dev
	$(BIN)/python -m pytest

# slow mode: the slow tests and the whole suite again, every hypothesis budget times 10
test-slow: dev
	TOKTOK_FUZZ=10 $(BIN)/python -m pytest -m "slow or not slow"

bench: $(BIN)/python
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) out
