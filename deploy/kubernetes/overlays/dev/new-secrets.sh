#!/usr/bin/env bash
# Writes secrets.env beside this script: fresh random secrets for the dev overlay's Secret
# (kustomize's secretGenerator reads it). Refuses to overwrite one: the database was initialised
# with its password. The passwords are hex, since they go into URLs.
set -euo pipefail
file="$(dirname "$0")/secrets.env"
if [ -e "$file" ]; then
  echo "new-secrets: $file exists; delete it (and the overlay's PostgreSQL and Redis volumes) to start over" >&2
  exit 1
fi
postgres_password=$(openssl rand -hex 24)
redis_password=$(openssl rand -hex 24)
umask 077
cat >"$file" <<SECRETS
GATEWAY_SECRET_KEY=$(openssl rand -base64 48 | tr -d '\n')
GATEWAY_METRICS_TOKEN=$(openssl rand -hex 24)
POSTGRES_PASSWORD=$postgres_password
REDIS_PASSWORD=$redis_password
DATABASE_URL=postgresql://gateway:$postgres_password@postgres:5432/gateway
REDIS_URL=redis://:$redis_password@redis:6379/0
SECRETS
echo "new-secrets: wrote $file" >&2
