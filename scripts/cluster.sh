#!/usr/bin/env bash
# `make cluster`: migrate, then run the scale-out topology (bench/cluster/serve.py) — three gateway
# instances on the development database and Redis behind nginx round robin on 127.0.0.1:8100, two
# stateful backends of two replicas each, a seeded tenant — until Ctrl-C, which stops every process
# started here (the embedded PostgreSQL and Redis included, as `make run` does).
set -euo pipefail
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-gatewaysite.settings.dev}
export PYTHONUNBUFFERED=1
scripts/install-nginx.sh
python manage.py migrate --noinput -v 0

pid=
cleanup() {
  trap - INT TERM EXIT
  echo; echo "stopping..."
  # serve.py stops its gateways, nginx and backends when it gets TERM (or the terminal's INT).
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  scripts/services.sh stop
}
trap cleanup INT TERM EXIT

python -m bench.cluster.serve --port "${CLUSTER_PORT:-8100}" & pid=$!
wait "$pid"
