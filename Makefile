# One venv for everything; `make demo` and `make test` work on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install dev demo test test-slow bench lock clean
AZURITE := .ci/node/node_modules/.bin/azurite-blob

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# setuptools says on every editable install of a flat layout that a folder named like the package in
# the current folder would shadow it: a notice (toktok has none), not a problem, so not shown
EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

install: $(BIN)/python
	$(EDITABLE) $(BIN)/pip install -q -e .

dev: $(BIN)/python
	$(EDITABLE) $(BIN)/pip install -q -e '.[dev,ray]' -c constraints.txt

demo: install
	$(BIN)/toktok train data_fixtures/corpus/ --out out/demo --merges 2000 --special-token '<|endoftext|>' --force

# Azurite (Azure Blob's emulator, for tests/test_stores.py) from npm, as .ci/node/package-lock.json pins it
$(AZURITE): .ci/node/package.json .ci/node/package-lock.json
	npm ci --prefix .ci/node --no-audit --no-fund --loglevel=error
	touch $@

# Debian's chromium for tests/test_report.py (Playwright drives it; no browser is downloaded)
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(CHROMIUM):
	$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium

test: dev $(AZURITE) $(CHROMIUM)
	$(BIN)/python -m pytest

# slow mode: the slow tests and the whole suite again, every hypothesis budget times 10
test-slow: dev $(AZURITE) $(CHROMIUM)
	TOKTOK_FUZZ=10 $(BIN)/python -m pytest -m "slow or not slow"

bench: $(BIN)/python
	$(BIN)/pip install -q -e '.[bench]' -c constraints.txt
	$(BIN)/python bench/run.py
	$(BIN)/python bench/run.py --slice-mb 100 --only toktok,hf,rustbpe,bpeasy,ffbpe
	$(BIN)/python bench/fixed_costs.py
	$(BIN)/python bench/report.py --write

# pin what a working dev venv holds (dev, ray and bench extras) for the next fresh install
lock: dev
	$(BIN)/pip install -q -e '.[bench]'
	{ sed -n '/^#/p' constraints.txt; $(BIN)/pip freeze --exclude-editable; } > constraints.txt.new && mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) out .ci/node/node_modules
