#!/usr/bin/env bash
# Starts the image of scripts/build-image.sh with podman the way deploy/kubernetes runs it (uid
# 10001, read-only root file system with /tmp as the only writable place, no capabilities, the base
# ConfigMap's settings, secrets in the environment) against a PostgreSQL and a Redis on this host,
# and checks each role:
#   migrate --check fails on the empty database (what the init containers wait on), the migration
#   runs, migrate --check then passes; the gateway (the image's own command) passes its HEALTHCHECK, answers /healthz,
#   /readyz, /metrics with the token (401 without) and the console's CSS; a worker and beat make
#   the heartbeat that /readyz reads; SIGTERM drains the gateway and it exits 0.
# Host networking: the gateway listens on 0.0.0.0:8000 of this machine while it runs.
#
#   DATABASE_URL=postgresql://postgres@127.0.0.1:55432/gw_image_check \
#   REDIS_URL=redis://127.0.0.1:6390/13 scripts/check-image.sh
# DATABASE_URL must name an empty database (created beforehand). Not run in CI (root, podman, the image).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-localhost/mcp-gateway:latest}
: "${DATABASE_URL:?set DATABASE_URL to an empty PostgreSQL database (with the vector extension available)}"
: "${REDIS_URL:?set REDIS_URL to a Redis database the check may write to}"
WORK=${WORK:-$PWD/var/image-check}
mkdir -p "$WORK"
say() { echo "check-image: $*" >&2; }

# bookworm's crun refuses hosts with cgroups v1 and v2 side by side; runc works there. Limits at or
# under the host's own: a sandbox without CAP_SYS_RESOURCE cannot raise them.
podman_cmd=(podman --cgroup-manager cgroupfs --events-backend file)
command -v runc >/dev/null && podman_cmd+=(--runtime runc)
limits=(--ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
# Without systemd podman cannot time a HEALTHCHECK and says so on every run: only the gateway keeps
# it (run by hand below, podman's complaints to a log), the other roles go without.

# The environment of the Kubernetes pods: the base ConfigMap, then the Secret's keys.
env_file=$WORK/env
grep -vE '^\s*(#|$)' deploy/kubernetes/base/config.env >"$env_file"
metrics_token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
{
  echo "GATEWAY_SECRET_KEY=$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')"
  echo "DATABASE_URL=$DATABASE_URL"
  echo "REDIS_URL=$REDIS_URL"
  echo "GATEWAY_METRICS_TOKEN=$metrics_token"
} >>"$env_file"

run_as_pod() {  # run_as_pod NAME [podman run options...] -- [command...]
  local name=$1 options=()
  shift
  while [ "$1" != -- ]; do options+=("$1"); shift; done
  shift
  "${podman_cmd[@]}" run --name "$name" --network host --user 10001:10001 --read-only \
    --tmpfs /tmp:rw,size=256m,mode=1777 --cap-drop ALL --security-opt no-new-privileges "${limits[@]}" \
    --env-file "$env_file" "${options[@]}" "$IMAGE" "$@"
}
cleanup() {
  "${podman_cmd[@]}" rm -f -t 0 gw-check-gateway gw-check-worker gw-check-beat >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup

if run_as_pod gw-check-migrate-check --rm --no-healthcheck -- python manage.py migrate --check >/dev/null 2>&1; then
  say "FAIL: migrate --check passed before the migration: the database is not empty"; exit 1
fi
say "ok: migrate --check fails while migrations are unapplied (the init containers wait)"
started=$(date +%s.%N)
run_as_pod gw-check-migrate --rm --no-healthcheck -- python manage.py migrate --noinput >"$WORK/migrate.log" 2>&1 \
  || { say "FAIL: migrate: $WORK/migrate.log"; exit 1; }
say "ok: migrate --noinput on a read-only root file system ($(python3 -c "import time; print(f'{time.time() - $started:.1f}')") s)"
run_as_pod gw-check-migrate-check --rm --no-healthcheck -- python manage.py migrate --check >/dev/null \
  || { say "FAIL: migrate --check still fails after the migration"; exit 1; }
say "ok: migrate --check passes after it"

started=$(date +%s.%N)
run_as_pod gw-check-gateway -d -- >/dev/null 2>>"$WORK/podman.log"   # the image's own ENTRYPOINT and CMD
python3 scripts/check_image_http.py wait http://127.0.0.1:8000/healthz 90 \
  || { "${podman_cmd[@]}" logs gw-check-gateway >&2; exit 1; }
say "ok: /healthz answered $(python3 -c "import time; print(f'{time.time() - $started:.1f}')") s after podman run"
"${podman_cmd[@]}" healthcheck run gw-check-gateway >/dev/null \
  || { say "FAIL: the image's HEALTHCHECK (docker/healthcheck.py) failed"; exit 1; }
say "ok: the image's own HEALTHCHECK passes"
# A heartbeat left by an earlier run would make /readyz content without this run's worker and beat.
run_as_pod gw-check-forget --rm --no-healthcheck -- python -c \
  'import os, redis; redis.Redis.from_url(os.environ["REDIS_URL"]).delete("gw:worker-heartbeat")'
run_as_pod gw-check-worker -d --no-healthcheck -- celery -A gatewaysite worker -Q celery --concurrency 1 -l INFO >/dev/null
run_as_pod gw-check-beat -d --no-healthcheck -- celery -A gatewaysite beat --schedule /tmp/celerybeat-schedule -l INFO >/dev/null
python3 scripts/check_image_http.py probes http://127.0.0.1:8000 "$metrics_token" 90 \
  || { for c in gateway worker beat; do "${podman_cmd[@]}" logs --tail 20 gw-check-$c >&2; done; exit 1; }

"${podman_cmd[@]}" stats --no-stream --format '{{.Name}} {{.MemUsage}}' gw-check-gateway gw-check-worker gw-check-beat \
  | sed 's/^/check-image: memory /' >&2 || true
started=$(date +%s.%N)
"${podman_cmd[@]}" stop -t 40 gw-check-gateway >/dev/null 2>>"$WORK/podman.log"
code=$("${podman_cmd[@]}" inspect --format '{{.State.ExitCode}}' gw-check-gateway)
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
"${podman_cmd[@]}" logs gw-check-gateway 2>&1 | grep -E 'SIGTERM|drained' | sed 's/^/check-image: gateway log: /' >&2 || true
[ "$code" = 0 ] || { say "FAIL: the gateway exited $code after SIGTERM"; exit 1; }
say "ok: SIGTERM: the gateway drained and exited 0 in $seconds s"
say "all checks passed"
