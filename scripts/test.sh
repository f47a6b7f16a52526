#!/usr/bin/env bash
# The whole suite: lint (ruff) and import contracts, then pytest (unit, end-to-end with real Daphne, backends,
# PostgreSQL and Redis, and the official MCP conformance suite through the gateway).
set -euo pipefail
export DJANGO_SETTINGS_MODULE=gatewaysite.settings.test
export PYTHONDONTWRITEBYTECODE=1
scripts/install-conformance.sh
export CONFORMANCE_DIR="$PWD/var/conformance"
ruff check .
lint-imports --no-cache
exec python -m pytest "$@"
