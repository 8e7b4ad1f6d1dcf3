# ranklog — every target sets up what it needs (Debian packages when run as root, a venv) so that
# `make demo` and `make test` work on a fresh Debian machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Debian packages: real peers and services the tests run (Prometheus, Alertmanager, rsyslog, dockerd,
# debootstrap for the containerized nodes, Chromium for the HTML report check, OpenJDK for Spark,
# libfuse2 for the FUSE mount that hangs in the agent's stuck-read test).
APT_PACKAGES ?= python3-venv python3-dev gcc git curl ca-certificates iproute2 procps \
	docker.io debootstrap prometheus prometheus-alertmanager rsyslog chromium faketime util-linux \
	openjdk-17-jre-headless victoria-metrics libfuse2
VENV_STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: help system venv demo test test-fast bench soak lint dashboards scenarios corpus clean

help:
	@echo "make demo        run the whole pipeline on this machine (archive, agent, a failing 16-rank job, triage)"
	@echo "make test        set everything up and run the whole test suite (what CI runs)"
	@echo "make test-fast   only the tests not marked slow or container"
	@echo "make bench       run the benchmarks in tests/benchmarks and print their tables"
	@echo "make soak        the long reliability soak (not part of make test)"
	@echo "make lint        ruff, yamllint and ansible-lint"
	@echo "make dashboards  regenerate dashboards/ and rules from code"
	@echo "make scenarios   regenerate tests/scenarios/*/out by running the real tools (torchrun, Ray, verl)"
	@echo "make corpus      regenerate the format corpus tests/corpus/*/ (real libraries under real launchers)"

# Installs the Debian packages that are missing (only as root; others must have them already).
system:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "missing Debian packages (run as root or install them): $$missing"; fi; \
	fi

$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip wheel setuptools
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e '.[all]'
	$(PY) -m pip install -q --no-deps hydra-core==1.3.8  # the corpus's hydra entry; see the corpus extra
	$(PY) -m pip install -q --no-deps verl==0.9.1  # the scenario library's verl loggers; deps: the verl extra
	rm -f $(VENV)/.installed-* && touch $@

venv: $(VENV_STAMP)

demo: system venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/ranklog demo

# pytest's exit status 5 ("no tests collected") is a failure here, never a silent pass.
# The suite runs as three pytest runs at once (Docker/Ansible and fault injection; scenarios, triage and benchmarks; the rest): tests/run-suite.sh.
test: system venv
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" tests/run-suite.sh $(PY) $(PYTEST_ARGS)

test-fast: venv
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -m "not slow and not container" $(PYTEST_ARGS) tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-fast: pytest collected no tests — failing"; exit 1; fi; exit $$rc

bench: system venv
	@set -e; for b in tests/benchmarks/bench_*.py; do echo "== $$b"; PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) $$b; done

soak: system venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" RANKLOG_SOAK=1 $(PY) -m pytest tests/reliability -m slow

lint: venv
	$(VENV)/bin/ruff check .
	@if [ -d roles ] && ls roles/*/tasks >/dev/null 2>&1; then PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/yamllint -s galaxy.yml meta roles playbooks dashboards && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/ansible-lint --profile production roles playbooks; fi

dashboards: venv
	$(PY) -m dashboards.generate

# Runs every tests/scenarios/<name>/gen/generate.py (real torchrun/Ray/verl jobs); NAMES="a b" for some.
scenarios: system venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) tests/scenarios/generate.py $(NAMES)

# Runs every tests/corpus/<name>/gen/generate.py (transformers, DeepSpeed, Lightning, Ray Train, …); NAMES="a b" for some.
corpus: system venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) tests/corpus/generate.py $(NAMES)

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache
