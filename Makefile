# ONNX, the PDF for neural networks — set-up and run targets.
#   make lab    set up (first time: ~5 min, ~8 GB) and open JupyterLab on notebooks/
#   make test   set up and run every test, executing every notebook
#   make run    set up and execute the whole series headlessly (no Jupyter UI)
# A second run reuses .venv (re-installed only when requirements.txt or pyproject.toml change)
# and the verified asset cache (.cache/, or $ONNX_PDF_CACHE).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
KERNEL := onnx-pdf

.PHONY: setup node browser lab test run clean-artifacts
.DEFAULT_GOAL := lab

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	$(BIN)/python -m pip install --disable-pip-version-check -q -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python 3.11 (onnx-pdf)"
	touch $@

# Node.js 18 or newer runs the JavaScript side (notebook 04); Debian's nodejs (18) is installed where we may (root).
node:
	@if node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
	else echo "Node.js 18 or newer is required (found: $$(node --version 2>/dev/null || echo none))"; exit 1; fi

# The JavaScript packages, exactly as package-lock.json pins them (integrity hashes checked by npm ci).
node_modules/.installed: package.json package-lock.json | node
	npm ci --no-audit --no-fund
	touch $@

setup: $(VENV)/.installed node_modules/.installed
	$(BIN)/python -m helpers.assets fetch
	$(BIN)/python -m helpers.mnist

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

# Notebooks first: they write the artifacts the unit tests and the browser test then reuse.
test: setup browser
	$(BIN)/python -m pytest notebooks tests --nbval-lax --nbval-current-env -v -rs

# Execute every notebook headlessly and write an HTML copy of the series with an index page.
run: setup
	$(BIN)/python -m helpers.series html --out build/html

clean-artifacts:
	rm -rf artifacts
