#!/usr/bin/env bash
# The whole suite: lint (ruff) and import contracts, then pytest (unit, end-to-end with real Daphne, backends,
# PostgreSQL and Redis, the official MCP conformance suite through the gateway, console pages in
# headless Chromium, and three gateway instances behind nginx).
set -euo pipefail
export DJANGO_SETTINGS_MODULE=gatewaysite.settings.test
export PYTHONDONTWRITEBYTECODE=1
scripts/install-conformance.sh
scripts/install-browser.sh
scripts/install-nginx.sh
scripts/install-compose.sh
export CONFORMANCE_DIR="$PWD/var/conformance"
ruff check .
lint-imports --no-cache
exec python -m pytest "$@"
