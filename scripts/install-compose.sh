#!/usr/bin/env bash
# Makes `docker compose` work for the deployment tests (tests/deploy: `docker compose config` on
# docker/compose.yml needs the CLI and its compose plugin, not a Docker engine).
#
# Bookworm's docker-compose is the old Python 1.x and its docker.io drags in the whole engine, so
# both pieces come from trixie's Go builds (fetched and verified by scripts/trixie-packages.sh):
#   docker-compose -> the plugin binary, into the CLI's plugin directory
#   docker-cli     -> /usr/bin/docker, only when no docker CLI is on PATH
# Root installs for every user (/usr/local); anyone else into ~/.docker/cli-plugins and ~/.local/bin.
# Idempotent: exits at once when `docker compose version` already answers. A user who cannot
# install it is told why; the tests that need it then skip, except under CI=true, where this fails.
set -euo pipefail

give_up() {
  echo "install-compose: $1" >&2
  echo "install-compose: the deployment tests skip until 'docker compose version' works (under CI=true they fail)." >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
}

if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  exit 0
fi
. "$(dirname "$0")/trixie-packages.sh"
trixie_prepare

if [ "$(id -u)" -eq 0 ]; then
  plugin_dir=/usr/local/lib/docker/cli-plugins
  bin_dir=/usr/local/bin
else
  plugin_dir=$HOME/.docker/cli-plugins
  bin_dir=$HOME/.local/bin
fi

if ! command -v docker >/dev/null 2>&1; then
  trixie_fetch docker-cli
  mkdir -p "$bin_dir"
  install -m 0755 "$work/root/usr/bin/docker" "$bin_dir/docker"
  echo "install-compose: installed the docker CLI as $bin_dir/docker" >&2
  case ":$PATH:" in *":$bin_dir:"*) ;; *) export PATH="$bin_dir:$PATH"
    echo "install-compose: $bin_dir is not on PATH; add it" >&2 ;;
  esac
fi

trixie_fetch docker-compose
mkdir -p "$plugin_dir"
install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin_dir/docker-compose"
echo "install-compose: installed $plugin_dir/docker-compose" >&2
docker compose version >&2 || give_up "the docker CLI does not pick up $plugin_dir/docker-compose"
