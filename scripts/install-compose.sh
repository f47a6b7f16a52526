#!/usr/bin/env bash
# Makes `docker compose` work for the deployment tests (tests/deploy: `docker compose config` on
# docker/compose.yml needs the CLI and its compose plugin, not a Docker engine).
#
# Bookworm's docker-compose is the old Python 1.x and its docker.io drags in the whole engine, so
# both pieces come from trixie's Go builds, which need nothing but libc6 >= 2.34 (bookworm: 2.36):
#   docker-compose -> the plugin binary, into the CLI's plugin directory
#   docker-cli     -> /usr/bin/docker, only when no docker CLI is on PATH
# apt fetches them with a private, throw-away trixie source list (the system's apt state and
# sources are untouched; nothing is registered with dpkg): it checks the suite's signed InRelease
# against debian-archive-keyring and each .deb against the SHA256 of that index, and this script
# checks the SHA256 once more before unpacking with dpkg-deb -x. Root installs for every user
# (/usr/local); anyone else into ~/.docker/cli-plugins and ~/.local/bin.
# Idempotent: exits at once when `docker compose version` already answers. A user who cannot
# install it is told why; the tests that need it then skip, except under CI=true, where this fails.
set -euo pipefail

SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

give_up() {
  echo "install-compose: $1" >&2
  echo "install-compose: the deployment tests skip until 'docker compose version' works (under CI=true they fail)." >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
}

if command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  exit 0
fi
[ "$(uname -m)" = x86_64 ] || give_up "only x86_64 (amd64) machines are handled, this is $(uname -m)"
for tool in apt-get apt-cache dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || give_up "$tool is missing: this script expects a Debian (bookworm or later) machine"
done
[ -r "$KEYRING" ] || give_up "$KEYRING is missing (apt-get install debian-archive-keyring)"

if [ "$(id -u)" -eq 0 ]; then
  plugin_dir=/usr/local/lib/docker/cli-plugins
  bin_dir=/usr/local/bin
else
  plugin_dir=$HOME/.docker/cli-plugins
  bin_dir=$HOME/.local/bin
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
echo "deb [arch=amd64 signed-by=$KEYRING] $MIRROR $SUITE main" >"$work/sources.list"
apt_options=(
  -o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Dir::State::Status=/dev/null
  -o APT::Architecture=amd64 -o Acquire::Languages=none
  # The private directories belong to the caller; apt's _apt sandbox user could not write them.
  -o APT::Sandbox::User="$(id -un)"
)

# Fetch PACKAGE's .deb from trixie into $work/debs, verify it, unpack it into $work/root.
fetch() {
  local package=$1 deb expected actual
  (cd "$work/debs" && apt-get -q "${apt_options[@]}" download "$package" >/dev/null) \
    || give_up "could not download $package from $MIRROR $SUITE"
  deb=$(ls "$work/debs/${package}"_*.deb)
  expected=$(apt-cache "${apt_options[@]}" show "$package" | awk '/^SHA256:/ {print $2; exit}')
  actual=$(sha256sum "$deb" | cut -d' ' -f1)
  [ -n "$expected" ] && [ "$expected" = "$actual" ] \
    || give_up "$(basename "$deb"): SHA256 $actual does not match the signed index's ${expected:-(none)}"
  dpkg-deb -x "$deb" "$work/root"
}

echo "install-compose: fetching the $SUITE package index (signed InRelease, checked against $KEYRING)" >&2
apt-get -q "${apt_options[@]}" update >/dev/null || give_up "apt could not fetch or verify $MIRROR $SUITE"

if ! command -v docker >/dev/null 2>&1; then
  fetch docker-cli
  mkdir -p "$bin_dir"
  install -m 0755 "$work/root/usr/bin/docker" "$bin_dir/docker"
  echo "install-compose: installed the docker CLI as $bin_dir/docker" >&2
  case ":$PATH:" in *":$bin_dir:"*) ;; *) export PATH="$bin_dir:$PATH"
    echo "install-compose: $bin_dir is not on PATH; add it" >&2 ;;
  esac
fi

fetch docker-compose
mkdir -p "$plugin_dir"
install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin_dir/docker-compose"
echo "install-compose: installed $plugin_dir/docker-compose" >&2
docker compose version >&2 || give_up "the docker CLI does not pick up $plugin_dir/docker-compose"
