#!/usr/bin/env bash
# `make run`: migrate, seed the demo tenant, then serve the gateway (Daphne), a Celery worker and the
# demo MCP backend until Ctrl-C, which stops every process started here (the embedded PostgreSQL and
# Redis included; their data stays under var/ for the next run).
set -euo pipefail
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-gatewaysite.settings.dev}
export PYTHONUNBUFFERED=1
PORT=${GATEWAY_PORT:-8000}
DEMO_PORT=${DEMO_BACKEND_PORT:-9001}
mkdir -p var/log

python manage.py migrate --noinput -v 0
python manage.py gateway seed-demo --backend-url "http://127.0.0.1:$DEMO_PORT/mcp" \
  --key-file var/demo-key --admin-password-file var/admin-password

pids=()
cleanup() {
  trap - INT TERM EXIT
  echo; echo "stopping..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/services.sh stop
}
trap cleanup INT TERM EXIT

python scripts/demo_server.py --port "$DEMO_PORT" >var/log/demo-backend.log 2>&1 & pids+=($!)
# Two workers: spec compiles and the other jobs (queue celery) never wait behind a tool index build
# (queue indexing), however long a backend's list.
celery -A gatewaysite worker -Q celery --beat --schedule var/celerybeat-schedule --pool=solo --loglevel=WARNING >var/log/celery.log 2>&1 & pids+=($!)
celery -A gatewaysite worker -Q indexing -n indexing@%h --pool=solo --loglevel=WARNING >var/log/celery-indexing.log 2>&1 & pids+=($!)
daphne -b 127.0.0.1 -p "$PORT" gatewaysite.asgi:application >var/log/gateway.log 2>&1 & pids+=($!)

for _ in $(seq 300); do
  python -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null && break
  sleep 0.1
done

# gatewaysite/settings/dev.py reads GATEWAY_DEBUG the same way (env_bool).
case "${GATEWAY_DEBUG:-}" in
  1|[Tt][Rr][Uu][Ee]|[Yy][Ee][Ss]|[Oo][Nn]) debug_pages="on (GATEWAY_DEBUG): tracebacks and settings for whoever reaches the port" ;;
  *) debug_pages="off (GATEWAY_DEBUG=1 turns them on)" ;;
esac

cat <<BANNER

  MCP Gateway is running.

  MCP endpoint   http://127.0.0.1:$PORT/mcp/demo/main   (the demo MCP server)
                 http://127.0.0.1:$PORT/mcp/demo/rest   (a REST pet store, from its OpenAPI spec)
  API key        $(cat var/demo-key)
                 (send it as "Authorization: Bearer <key>"; or let a client that signs people in
                 with OAuth — the SDKs' OAuth clients — sign in as the console's admin below)
  Console        http://127.0.0.1:$PORT/console/   user: admin   password: $(cat var/admin-password)
  Admin          http://127.0.0.1:$PORT/admin/
  Logs           var/log/
  Debug pages    $debug_pages

  Try it:  .venv/bin/python scripts/try_demo.py

  Ctrl-C stops everything.
BANNER

wait -n "${pids[@]}"
echo "a process stopped; stopping the rest (logs in var/log/)" >&2
