#!/usr/bin/env bash
# The whole suite: lint (ruff) and import contracts, then pytest (unit, end-to-end with real Daphne, backends,
# PostgreSQL and Redis, the official MCP conformance suite through the gateway, console pages in
# headless Chromium, and three gateway instances behind nginx).
set -euo pipefail
export DJANGO_SETTINGS_MODULE=gatewaysite.settings.test
export PYTHONDONTWRITEBYTECODE=1
scripts/install-node-parts.sh
scripts/install-browser.sh
scripts/install-nginx.sh
scripts/install-compose.sh
scripts/install-kustomize.sh
export CONFORMANCE_DIR="$PWD/var/conformance"
ruff check .
lint-imports --no-cache
if [ $# -gt 0 ]; then
    exec python -m pytest "$@"
fi
# The pure core's tests first, with neither Redis nor PostgreSQL reachable: they must need no service.
PURE_CORE=(tests/kernel tests/gateway/protocol tests/gateway/pipeline tests/catalog/openapi)
GATEWAY_TEST_REDIS_URL=redis://127.0.0.1:1/0 DATABASE_URL=postgresql://nobody@127.0.0.1:1/none \
    python -m pytest -q "${PURE_CORE[@]}"
exec python -m pytest "${PURE_CORE[@]/#/--ignore=}"
