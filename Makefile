# Two commands do all the set-up: `make train` and `make test` (see `make help`).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=
# make tensorboard PORT=6007: another port (two boards at once, or a taken one)
PORT ?= 6006

.DEFAULT_GOAL := help
.PHONY: help setup scale data train sweep inspect validate pipeline-report cache shards bench bench-growth bench-ab bench-guard bench-compile bench-decode bench-parquet bench-sampling bench-start bench-threads bench-totals bench-peers stress-torchrun gpu-check new-project upgrade-engine docs docs-outputs FORCE test test-fast test-slow lint format tensorboard clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# Where the engine comes from: here, its source in engine/ (editable). A project made by `make
# new-project` installs the version its pyproject.toml pins from the wheel in vendor/, that
# file alone first (ENGINE_FIRST: tools/upgrade_engine.py --setup, which also undoes or finishes
# an upgrade that was killed, so pip never sees two engine wheels).
ENGINE_INSTALL := -e ./engine
ENGINE_FILES := engine/pyproject.toml
ENGINE_FIRST :=

# The stamp records where .venv was set up: a venv's scripts run the python of that path (#!),
# so one that came along when the project was moved or copied is not this folder's. Set up
# elsewhere, it stops the set-up with what to do (a stamp of before holds no path: trusted).
# Where it is: its real path, so a .venv that is a link (to another disk, or a checkout's)
# is where its scripts run from.
VENV_AT := $(or $(realpath $(CURDIR)/$(VENV)),$(CURDIR)/$(VENV))
SET_UP_AT := $(shell cat $(STAMP) 2>/dev/null)
MOVED := $(subst $(VENV_AT),,$(SET_UP_AT))

$(STAMP): pyproject.toml $(ENGINE_FILES) $(if $(MOVED),FORCE)
	$(if $(MOVED),$(error $(VENV) was set up at $(SET_UP_AT), and this project is now at $(CURDIR) (moved or copied): its scripts still run from there; rm -rf $(VENV), then make setup))
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(ENGINE_FIRST)
	$(BIN)/python -m pip install --quiet $(ENGINE_INSTALL) -e '.[dev]'
	printf '%s' $(call quoted,VENV_AT) > $@

FORCE:

setup: $(STAMP)  ## create .venv, install the engine and the pinned dependencies

scale: $(STAMP)  ## install the SLURM launcher and Optuna sweeper plugins (the `scale` extra; `make test` has them)
	$(BIN)/python -m pip install --quiet -e '.[scale]'

data: $(STAMP)  ## generate the demo data in data/demo (skipped when up to date)
	$(BIN)/python -m engine_dev.demo --out data/demo

train: data  ## train with the default config; pass overrides as ARGS="dataset=csv ..."
	$(BIN)/python train.py $(ARGS)

sweep: data  ## benchmark 24 loader settings on the demo data and print them ranked
	$(BIN)/python train.py +sweep=loader $(ARGS)

inspect: data  ## report shapes, ranges, labels and pitfalls of the first batches (no training)
	$(BIN)/python train.py mode=inspect $(ARGS)

validate: data  ## decode every train/val file once, list unreadable ones in bad_samples.csv (no training)
	$(BIN)/python train.py mode=validate $(ARGS)

pipeline-report: $(STAMP)  ## one PNG of a training's input pipeline over time, per worker and the main process: RUN=<run dir> (default outputs/latest_train) -> RUN/pipeline.png
	$(BIN)/python -m engine.modes.pipeline_report $(RUN)

cache: data  ## pre-resize every train/val image once into data/cache (resumable); train with dataset=cache
	$(BIN)/python train.py mode=cache $(ARGS)

shards: data  ## write the train/val images into WebDataset tar shards in data/shards; train with dataset=iterable (the engine manual's streaming.md: make docs)
	$(BIN)/python train.py mode=shards $(ARGS)

bench: $(STAMP)  ## side-by-side input-pipeline benchmark vs the tutorial (and peers if installed), shards, growth to 1M files; writes BENCHMARKS.md
	$(BIN)/python -m bench $(ARGS)

bench-growth: $(STAMP)  ## the `make bench` section on start-up and memory for 10k-1M files alone (minutes; ~100 MB of disk)
	$(BIN)/python -m bench --only growth $(ARGS)

bench-ab: $(STAMP)  ## this checkout against another commit (REF=..., default the engine's last release), mode=benchmark rows alternating, ratios into BENCHMARKS.md
	$(BIN)/python -m bench.ab --against "$(REF)" $(ARGS)

bench-guard: $(STAMP)  ## before a change to decode, transforms, collate or the loader lands: bench-ab against the last release (or REF), failing on a row under 0.95x
	$(BIN)/python -m bench.ab --against "$(REF)" --guard 0.95 $(ARGS)

bench-compile: data  ## trainer.compile=default against eager on this machine (small_cnn, resnet18): step ms, compile s, the checkpoint's keys; into BENCHMARKS.md
	$(BIN)/python -m bench.compile $(ARGS)

bench-decode: $(STAMP)  ## each image format's decoders on one thread, side by side: torchvision.io, TorchCodec, Pillow, the engine's choice; into BENCHMARKS.md
	$(BIN)/python -m bench.decode $(ARGS)

gpu-check: $(STAMP)  ## on CUDA: ResNet-50's ceiling, then data wait and its fraction fed by cpu workers (4/8/12/auto) and the batched cuda decode, compiled too, per stage; writes BENCHMARKS.md (tiny smoke run without CUDA)
	$(BIN)/python -m bench.gpu_check $(ARGS)

bench-parquet: $(STAMP)  ## dataset=parquet beside tar shards and the image folder, the same 500x375 JPEGs, train and val; into BENCHMARKS.md
	$(BIN)/python -m bench --only parquet $(ARGS)

bench-sampling: data  ## dataset=mix, trainer.record_samples=true and trainer.pipeline_timing=false against the plain loader in the training loop, side by side; into BENCHMARKS.md
	$(BIN)/python -m bench.sampling $(ARGS)

bench-start: $(STAMP)  ## loader workers started by forkserver (the default under torchrun) against fork: first batch, epoch, re-entry; into BENCHMARKS.md
	$(BIN)/python -m bench.start_methods $(ARGS)

bench-threads: data  ## the main process's torch threads on a CPU, auto against torch's default, quiet and beside a busy process; into BENCHMARKS.md
	$(BIN)/python -m bench.threads $(ARGS)

bench-totals: $(STAMP)  ## the engine's pass totals against torchmetrics' metrics, update cost per batch side by side; into BENCHMARKS.md
	$(BIN)/python -m bench.totals $(ARGS)

stress-torchrun: data  ## RUNS (default 20) consecutive 2-rank torchrun jobs with 2 workers each over images, local and HTTP shards; counts hangs
	$(BIN)/python -m tests.torchrun_stress $(or $(RUNS),20) $(METHOD)

bench-peers: $(STAMP)  ## install timm and NVIDIA DALI (CPU-capable) into .venv for `make bench` (the `peers` extra)
	$(BIN)/python -m pip install --quiet -e '.[peers]'

docs: $(STAMP)  ## where the docs are: the engine's manual (installed with the engine, upgraded with it) and this project's docs/
	@$(BIN)/python -m engine.docs
	@echo "This project's own docs (train.py, conf/, src/): docs/README.md"

docs-outputs: data  ## rerun the commands README.md, docs/ and the engine's manual show, and write their real output into them (NAMES="debug-fast ..." for some)
	$(BIN)/python docs/regenerate.py $(NAMES)

# DEST=, ENGINE= and WHEEL= are handed over as written, single-quoted: make never expands them (a
# $(shell ...) in one stays text) and the shell never reads them as code; nor are they exported.
# One holding a newline is refused: make splits a recipe at it, whatever the quotes.
define newline


endef
quoted = $(if $(findstring $(newline),$(value $(1))),$(error $(1) holds a newline, which would split the command make runs: give $(1) on one line))'$(subst ','\'',$(value $(1)))'
unexport DEST ENGINE WHEEL
new-project: $(STAMP)  ## copy the template to DEST=../my-project with the engine's wheel in vendor/ (or ENGINE=git+URL@TAG or a path)
	$(BIN)/python -m tools.new_project $(call quoted,DEST) $(call quoted,ENGINE)

upgrade-engine: $(STAMP)  ## move this project to another engine: WHEEL=path/to/hydra_torch_data_engine-X.Y.Z-py3-none-any.whl, or ENGINE=git+URL@TAG or a path
	$(BIN)/python -m tools.upgrade_engine --wheel $(call quoted,WHEEL) --engine $(call quoted,ENGINE)

# What a lint finding does to `make test`: the tests always run first, then the findings are
# listed. `fail` (the template repo, and so its CI): `make test` then exits non-zero, as `make
# lint` does. A project made by `make new-project` is given `report`: listed, not failing.
LINT_IN_TEST ?= fail

# Each pytest run goes over the template's suite (tests/, ARGS) and then, in the template repo,
# the engine's own (engine/tests/, ENGINE_ARGS; its config in engine/pyproject.toml); it fails
# when either fails.
# PYTEST_WORKERS: pytest-xdist processes per suite, each pinned to its share of the cores
# (engine_dev/fixtures.py says why); auto = one per core, 0 = the tests in this one process.
# worksteal: an idle worker takes queued tests from a busy one, so the long child-process
# tests do not leave one core idle at the end.
PYTEST_WORKERS ?= auto
ENGINE_SUITE := $(wildcard engine/tests)
define suites
status=0; $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal $(1) $(ARGS) || status=1; \
$(if $(ENGINE_SUITE),(cd engine && $(abspath $(BIN))/pytest -n $(PYTEST_WORKERS) --dist worksteal $(1) $(ENGINE_ARGS)) || status=1;)
endef

test: data  ## both test suites, then the lint findings listed (offline; README.md gives its measured time)
	@$(call suites,-m "not slow" --durations=25) \
	echo "== lint: ruff, the formatter, the import contracts (make format fixes most) =="; \
	$(MAKE) --no-print-directory lint; lint=$$?; \
	if [ $$lint -ne 0 ] && [ "$(LINT_IN_TEST)" = report ]; then \
	  echo "lint: the findings above are listed, not failing the tests (LINT_IN_TEST=report); make format fixes most"; lint=0; fi; \
	[ $$status -eq 0 ] && [ $$lint -eq 0 ]

test-fast: data  ## the quick loop while coding: no lint, no slow tests, nothing run in child processes
	@$(call suites,-m "not slow and not process") exit $$status

test-slow: data  ## the longer end-to-end checks (full demo training runs)
	@$(call suites,-m slow) exit $$status

lint: $(STAMP)  ## ruff lint and format check, then the import contracts; fails on any finding (each names its file)
	@status=0; \
	$(BIN)/ruff check --output-format=concise . || status=1; \
	$(BIN)/ruff format --check . || status=1; \
	$(BIN)/lint-imports --no-cache --no-logo || status=1; \
	if [ -f engine/pyproject.toml ]; then $(BIN)/lint-imports --no-cache --no-logo engine/pyproject.toml || status=1; fi; \
	exit $$status

# The formatter first (it fixes long lines, which `ruff check --fix` cannot), then the linter's
# safe fixes (import order, ...) and the formatter again over what they changed; the last
# command lists what is left to fix by hand and never fails.
format: $(STAMP)  ## format, apply ruff's safe fixes, then list what is left to fix by hand (exits 0)
	@$(BIN)/ruff format --quiet .
	@$(BIN)/ruff check --fix --exit-zero --quiet . > /dev/null
	@$(BIN)/ruff format .
	@echo "Left to fix by hand (ruff check):"; $(BIN)/ruff check --exit-zero --output-format=concise .

tensorboard: $(STAMP)  ## serve TensorBoard over every run in outputs/, each named by what it was (engine/src/engine/runs/tensorboard_index.py); PORT=6006
	$(BIN)/tensorboard --logdir outputs/tensorboard --port $(PORT)

clean:  ## remove run outputs, caches and the demo data (keeps .venv)
	find outputs -mindepth 1 ! -name .gitkeep -exec rm -rf {} +
	rm -rf data/demo .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -exec rm -rf {} +
