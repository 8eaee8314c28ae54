# Command 1: `make quick`  — set up .venv and run the quick study-S reproduction with a report.
# Command 2: `make test`   — set up .venv with test extras and run the test suite.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup setup-test quick quick-m test lint bench

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e .

setup-test: $(BIN)/python
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'

quick: setup
	$(BIN)/rulelab reproduce shortcut-saturation --scale quick --out reports/shortcut-saturation-quick.html

# Study M's quick reproduction (modular arithmetic with label noise).
quick-m: setup
	$(BIN)/rulelab reproduce coexistence --scale quick --out reports/coexistence-quick.html

test: setup-test
	$(BIN)/python -m pytest

lint: setup-test
	$(BIN)/ruff check src tests bench

# Benchmarks (DESIGN §6, issue 13), on an idle machine: the machine first (CPU, extensions,
# measured peaks), then every ratio — rulelab vs a naive loop in-process (fp32, bf16 where
# native), where a step's time goes (engine 10's parts, engine 11's split), the whole command vs a plain script and vs its training
# alone, study M's ensemble vs single runs and its roofline, tracking overhead.
bench: setup
	$(BIN)/python bench/machine.py
	$(BIN)/python bench/train_throughput.py
	$(BIN)/python bench/step_parts.py
	$(BIN)/python bench/step_parts.py --size ladder
	$(BIN)/python bench/tile_profile.py
	$(BIN)/python bench/native_pieces.py --size ladder
	$(BIN)/python bench/cold_kernels.py
	$(BIN)/python bench/command_throughput.py
	$(BIN)/python bench/modular_throughput.py
	$(BIN)/python bench/tracking_overhead.py --epochs 100 --seeds 4 --reps 1
