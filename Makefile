# Two commands do all the set-up on a fresh machine:
#   make run    virtual env + install + portable llama.cpp build (wheel cached) + model pull + a small real search
#   make test   virtual env + install + the same local model + the whole test suite
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
CACHE ?= $(HOME)/.cache/masforge
WHEELS := $(CACHE)/wheels
LLAMA_VERSION ?= 0.3.36
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test venv llama model lint docs bench clean-venv chromium bubblewrap postgres llama-server

$(BIN)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,data,ray,postgres,docs]"
	touch $@

venv: $(BIN)/.installed

# llama-cpp-python compiles llama.cpp (5-8 min on 2 cores); GGML_NATIVE=OFF keeps the wheel portable,
# and the wheel is cached so the build happens once per machine.
$(BIN)/.llama: $(BIN)/.installed
	@mkdir -p $(WHEELS)
	@if ! ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
		echo "building llama-cpp-python $(LLAMA_VERSION) (portable, about 5-8 minutes, once)"; \
		CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip wheel -q --no-deps -w $(WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"; \
	fi
	$(BIN)/pip install -q --find-links $(WHEELS) "llama-cpp-python[server]==$(LLAMA_VERSION)"
	touch $@

llama: $(BIN)/.llama

# Optional: llama.cpp's own server with parallel slots, built once from the llama.cpp source llama-cpp-python
# vendors (about 12 minutes on 2 cores); the embedded model then answers several requests at once.
llama-server: $(BIN)/.llama
	$(BIN)/masforge models build-server

model: $(BIN)/.llama
	$(BIN)/masforge models pull

run: model bubblewrap
	@echo "make run: a small real search on the embedded model, about 9 minutes on a quiet 2-core machine;"
	@echo "  other work on the machine (another model server, a build) slows it in proportion. It prints its own"
	@echo "  estimate before it starts, a progress line at least every minute, and Ctrl-C stops it within seconds."
	$(BIN)/masforge search --config examples/quickstart.yaml

test: model chromium bubblewrap postgres
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# The HTML report is checked in a real headless browser; without chromium that one test is skipped.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		( [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ) || \
		echo "chromium could not be installed: the report's browser test will be skipped"

# The sandbox puts generated code in its own namespaces with bubblewrap (read-only file system view, private
# /tmp, dies with masforge); without it generated code refuses to run, in one line that says how to get it (or to
# accept less with MASFORGE_SANDBOX=unshare).
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || \
		( [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null ) || \
		echo "bubblewrap could not be installed: generated code will refuse to run (MASFORGE_SANDBOX=unshare accepts less)"

# Shared tune studies are tested against a real PostgreSQL server, which the tests start on loopback from the
# Debian package's programs (a throwaway cluster; the system's own cluster is not touched).
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		( [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null ) || \
		echo "postgresql could not be installed: the shared-study tests on PostgreSQL will be skipped"

lint: venv
	$(BIN)/ruff check .

# The documentation site, built offline into site/ (the test suite builds it with --strict too).
docs: venv
	$(BIN)/mkdocs build --strict

clean-venv:
	rm -rf $(VENV)
