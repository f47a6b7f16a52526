#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests (driven by the playwright package from
# requirements/dev.txt; playwright never downloads a browser of its own here). Does nothing when
# `chromium` is already on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install-browser: chromium is missing and this user cannot install it (not root, no sudo)." >&2
  echo "install-browser: run 'apt-get install chromium' as root; browser tests skip until then (under CI=true they fail)." >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
apt_install() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
}
echo "install-browser: installing Debian's chromium" >&2
if ! apt_install; then
  "${SUDO[@]}" apt-get update
  apt_install
fi
