# ONNX, the PDF for neural networks — set-up and run targets.
#   make lab    set up (first time: ~5 min, ~8 GB) and open JupyterLab on notebooks/
#   make test   set up, lint (ruff) and run every test, executing every notebook once
#   make artifacts       run the notebooks that make the files others read (01, 02, 05; under a lock)
#   make test-fast       the development tier: tests/ without the slow, browser, llm, tensorflow and ray ones
#   make run    set up and execute the whole series headlessly (no Jupyter UI)
#   make bundle gather every package and asset the set-up downloads into bundle/ (or BUNDLE=dir), for a class
#               without network: copy that folder to each machine, then `make lab BUNDLE=dir` (or setup, test)
#               installs from it alone (pip --no-index, npm --offline, assets copied and verified).
# A second run reuses .venv (re-installed only when requirements.txt or pyproject.toml change)
# and the verified asset cache (.cache/, or $ONNX_PDF_CACHE).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
KERNEL := onnx-pdf
REQUIREMENTS ?= requirements.txt
BUNDLE ?=
BUNDLE_DIR  := $(abspath $(or $(BUNDLE),bundle))
ASSET_CACHE := $(or $(ONNX_PDF_CACHE),.cache)
# What `pip install -e .` needs to build the helpers package: pyproject.toml's [build-system] requires.
BUILD_REQUIRES := 'setuptools>=61' wheel
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
PIP_FROM := $(if $(BUNDLE),--no-index --find-links $(BUNDLE_DIR)/python)
NPM_FROM := $(if $(BUNDLE),--offline --cache $(BUNDLE_DIR)/npm)

.PHONY: setup node browser lab artifacts lint test test-fast run bundle clean-artifacts
.DEFAULT_GOAL := lab

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)

# pip compiles the installed modules to bytecode one file after another; compileall does the same on every
# core (a shorter set-up wherever there is more than one). torch ships one module written for Python 3.12, which
# 3.11 cannot compile (pip skips it silently): it is left out by name, so any other file that fails to compile
# fails the set-up.
$(VENV)/.installed: $(REQUIREMENTS) pyproject.toml | $(BIN)/python
	$(PIP) install $(PIP_FROM) --no-compile -r $(REQUIREMENTS)
	$(BIN)/python -m compileall -q -j 0 -x 'torch/testing/_internal/py312_intrinsics\.py' $(VENV)/lib/python3.11/site-packages
	$(PIP) install $(PIP_FROM) -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python 3.11 (onnx-pdf)"
	touch $@

# How nbgrader runs the course's notebooks from any folder (its per-cell timeout, the kernel's transport): a
# learner's `nbgrader validate` reads it from the venv's Jupyter config folder (TEACHING.md).
$(VENV)/etc/jupyter/nbgrader_config.py: classroom/execution_config.py | $(VENV)/.installed
	install -D -m 644 $< $@

# Node.js 18 or newer runs the JavaScript side (notebook 04); Debian's nodejs (18) is installed where we may (root).
node:
	@if node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	else echo "Node.js 18 or newer is required (found: $$(node --version 2>/dev/null || echo none))"; exit 1; fi

# The JavaScript packages, exactly as package-lock.json pins them (integrity hashes checked by npm ci).
node_modules/.installed: package.json package-lock.json | node
	npm ci --no-audit --no-fund $(NPM_FROM)
	touch $@

setup: $(VENV)/.installed $(VENV)/etc/jupyter/nbgrader_config.py node_modules/.installed
	$(if $(BUNDLE),mkdir -p $(ASSET_CACHE) && cp -R $(BUNDLE_DIR)/cache/. $(ASSET_CACHE)/)
	$(BIN)/python -m helpers.data.assets fetch
	$(BIN)/python -m helpers.data.mnist

# (--allow-root only when run as root, e.g. in a container, where Jupyter refuses to start without it)
lab: setup
	$(BIN)/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

# The browser test needs Debian's chromium + chromedriver; installed where we may (root), else it is skipped
# with the reason printed in the test summary.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
		|| echo "could not install chromium: the JupyterLab browser test will be skipped"; \
	else echo "no chromium/chromedriver and not root: the JupyterLab browser test will be skipped"; fi

# The files the notebooks declare in notebooks/series.json ("makes"), each built once by its notebook.
artifacts: setup
	$(BIN)/python -m helpers.pipeline.artifacts build

# ruff over the code and the notebooks (configured in pyproject.toml): the rules, then the layout.
lint: $(VENV)/.installed
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .

# Plain `pytest notebooks tests` in three parts (every option is in pyproject.toml; conftest.py marks the items;
# -v lists each test): the notebooks that make the artifacts, each run once under the build lock; the rest on
# $(WORKERS) cores, a file (a notebook's cells) to a worker; then the "solo" tests alone: the notebooks that
# measure speed, the LLM, Ray and TensorFlow tests. Every part runs; any failure fails.
WORKERS ?= 2
test: setup browser lint
	status=0; \
	$(BIN)/python -m pytest -v -m artifacts notebooks tests || status=1; \
	$(BIN)/python -m pytest -v -n $(WORKERS) --dist loadfile -m "not artifacts and not solo" notebooks tests || status=1; \
	$(BIN)/python -m pytest -v -m solo notebooks tests || status=1; \
	exit $$status

test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest tests -m "not slow and not browser and not llm and not tensorflow and not ray"

# Execute every notebook headlessly and write an HTML copy of the series with an index page.
run: setup
	$(BIN)/python -m helpers.series html --out build/html

# Set up from the index first (BUNDLE= empties it there), so the assets are fetched and verified, then gather
# the pinned wheels (about 8 GB), npm's cache for package-lock.json and the verified assets.
bundle:
	$(MAKE) setup BUNDLE=
	$(BIN)/python -m pip --disable-pip-version-check download -d $(BUNDLE_DIR)/python -r $(REQUIREMENTS) $(BUILD_REQUIRES)
	npm ci --no-audit --no-fund --cache $(BUNDLE_DIR)/npm
	mkdir -p $(BUNDLE_DIR)/cache/mnist/MNIST && cp -R $(ASSET_CACHE)/wheels $(BUNDLE_DIR)/cache/ && cp -R $(ASSET_CACHE)/mnist/MNIST/raw $(BUNDLE_DIR)/cache/mnist/MNIST/

clean-artifacts:
	rm -rf artifacts
