# make run  — set up everything, seed a demo tenant, serve the gateway (Ctrl-C stops it all)
# make test — set up everything, run the whole suite (unit, end-to-end, conformance, import contracts)
# make screenshots — retake docs/screenshots/*.png with the browser tests that take them (a plain test
#   run writes them to var/test-artifacts/screenshots/ instead, leaving the tracked pictures alone)
# make cluster — three gateway instances behind nginx round robin on :8100, stateful replicated backends (Ctrl-C stops it all)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export XDG_RUNTIME_DIR ?= $(CURDIR)/var/run

.PHONY: run test screenshots venv services stop-services conformance bench cluster

run: venv services
	@scripts/run.sh

test: venv services
	@scripts/test.sh

screenshots: venv services
	@scripts/install-browser.sh
	GATEWAY_UPDATE_SCREENSHOTS=1 DJANGO_SETTINGS_MODULE=gatewaysite.settings.test \
		$(PY) -m pytest -q $$(grep -rl --include='*_browser.py' docs_screenshot tests)

cluster: venv services
	@scripts/cluster.sh

venv: $(VENV)/.installed

$(VENV)/.installed: requirements/base.txt requirements/dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	@touch $@

services: venv
	@mkdir -p var/run && chmod 700 var/run
	@scripts/services.sh start

stop-services:
	@scripts/services.sh stop

bench: venv services
	$(PY) -m bench.proxy_latency
