#!/usr/bin/env bash
# Makes `kustomize` work for the Kubernetes tests (tests/deploy/test_kubernetes.py renders every
# overlay of deploy/kubernetes with it, offline, with no cluster).
#
# Bookworm has no kustomize; trixie's `kustomize` package is the standalone Go build, which needs
# nothing but libc6 >= 2.34 (bookworm: 2.36). apt fetches it with a private, throw-away trixie
# source list, as scripts/install-compose.sh does (the system's apt state and sources are
# untouched; nothing is registered with dpkg): the suite's signed InRelease is checked against
# debian-archive-keyring, the .deb against the SHA256 of that index, once more here before
# unpacking it with dpkg-deb -x. Root installs into /usr/local/bin, anyone else into ~/.local/bin.
# Idempotent: exits at once when `kustomize version` already answers. A user who cannot install
# it is told why; the tests that need it then skip, except under CI=true, where this fails.
set -euo pipefail

SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

give_up() {
  echo "install-kustomize: $1" >&2
  echo "install-kustomize: the Kubernetes tests skip until 'kustomize version' works (under CI=true they fail)." >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
}

if command -v kustomize >/dev/null 2>&1 && kustomize version >/dev/null 2>&1; then
  exit 0
fi
[ "$(uname -m)" = x86_64 ] || give_up "only x86_64 (amd64) machines are handled, this is $(uname -m)"
for tool in apt-get apt-cache dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || give_up "$tool is missing: this script expects a Debian (bookworm or later) machine"
done
[ -r "$KEYRING" ] || give_up "$KEYRING is missing (apt-get install debian-archive-keyring)"

if [ "$(id -u)" -eq 0 ]; then bin_dir=/usr/local/bin; else bin_dir=$HOME/.local/bin; fi

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

echo "install-kustomize: fetching the $SUITE package index (signed InRelease, checked against $KEYRING)" >&2
apt-get -q "${apt_options[@]}" update >/dev/null || give_up "apt could not fetch or verify $MIRROR $SUITE"
(cd "$work/debs" && apt-get -q "${apt_options[@]}" download kustomize >/dev/null) \
  || give_up "could not download kustomize from $MIRROR $SUITE"
deb=$(ls "$work"/debs/kustomize_*.deb)
expected=$(apt-cache "${apt_options[@]}" show kustomize | awk '/^SHA256:/ {print $2; exit}')
actual=$(sha256sum "$deb" | cut -d' ' -f1)
[ -n "$expected" ] && [ "$expected" = "$actual" ] \
  || give_up "$(basename "$deb"): SHA256 $actual does not match the signed index's ${expected:-(none)}"
dpkg-deb -x "$deb" "$work/root"

mkdir -p "$bin_dir"
install -m 0755 "$work/root/usr/bin/kustomize" "$bin_dir/kustomize"
echo "install-kustomize: installed $bin_dir/kustomize ($(basename "$deb"))" >&2
case ":$PATH:" in *":$bin_dir:"*) ;; *) echo "install-kustomize: $bin_dir is not on PATH; add it" >&2 ;; esac
"$bin_dir/kustomize" version >&2 || give_up "$bin_dir/kustomize does not run here"
