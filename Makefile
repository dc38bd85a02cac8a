# Entry points: `make run`, `make test` (the whole suite) and `make test-fast` (unit tests on
# fakes: no model loads, no Milvus Lite; tests that need them are marked `slow`). All create
# .venv/ on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test test-fast lint install clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q --upgrade pip
	# torch first and pinned: 2.13.0 is a local CPU build; anything else pulls CUDA wheels.
	$(BIN)/pip install --disable-pip-version-check -q torch==2.13.0
	$(BIN)/pip install --disable-pip-version-check -q -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/liminalis ingest --campaign emberfall
	$(BIN)/liminalis chat --campaign emberfall

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict liminalis

test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc

test-fast: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc

clean:
	rm -rf $(VENV) data
