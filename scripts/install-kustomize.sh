#!/usr/bin/env bash
# Makes `kustomize` work for the Kubernetes tests (tests/deploy/test_kubernetes.py renders every
# overlay of deploy/kubernetes with it, offline, with no cluster).
#
# Bookworm has no kustomize; trixie's `kustomize` package is the standalone Go build, fetched and
# verified by scripts/trixie-packages.sh. Root installs into /usr/local/bin, anyone else into
# ~/.local/bin.
# Idempotent: exits at once when `kustomize version` already answers. A user who cannot install
# it is told why; the tests that need it then skip, except under CI=true, where this fails.
set -euo pipefail

give_up() {
  echo "install-kustomize: $1" >&2
  echo "install-kustomize: the Kubernetes tests skip until 'kustomize version' works (under CI=true they fail)." >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
}

if command -v kustomize >/dev/null 2>&1 && kustomize version >/dev/null 2>&1; then
  exit 0
fi
. "$(dirname "$0")/trixie-packages.sh"
trixie_prepare

if [ "$(id -u)" -eq 0 ]; then bin_dir=/usr/local/bin; else bin_dir=$HOME/.local/bin; fi

trixie_fetch kustomize
deb=$(ls "$work"/debs/kustomize_*.deb)

mkdir -p "$bin_dir"
install -m 0755 "$work/root/usr/bin/kustomize" "$bin_dir/kustomize"
echo "install-kustomize: installed $bin_dir/kustomize ($(basename "$deb"))" >&2
case ":$PATH:" in *":$bin_dir:"*) ;; *) echo "install-kustomize: $bin_dir is not on PATH; add it" >&2 ;; esac
"$bin_dir/kustomize" version >&2 || give_up "$bin_dir/kustomize does not run here"
