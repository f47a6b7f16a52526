#!/usr/bin/env bash
# Usage: scripts/install-debian-package.sh PACKAGE COMMAND WHAT-NEEDS-IT
# Installs a Debian package the tests need (apt-get, as root or through sudo) unless COMMAND is
# already on PATH or in /usr/sbin (which a non-root PATH may lack). A user who cannot install it is
# told how; the tests that need it then skip, except under CI=true, where this fails.
set -euo pipefail
package=$1 command=$2 purpose=$3
if command -v "$command" >/dev/null 2>&1 || [ -x "/usr/sbin/$command" ]; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install: $package is missing and this user cannot install it (not root, no sudo)." >&2
  echo "install: run 'apt-get install $package' as root; $purpose skip until then (under CI=true they fail)." >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
apt_install() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$package"
}
echo "install: installing Debian's $package" >&2
if ! apt_install; then
  "${SUDO[@]}" apt-get update
  apt_install
fi
