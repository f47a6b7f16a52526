# Sourced by the installers that take a tool from Debian trixie's Go builds (install-compose.sh,
# install-kustomize.sh), which need nothing but libc6 >= 2.34 (bookworm: 2.36).
# apt fetches with a private, throw-away trixie source list (the system's apt state and sources are
# untouched; nothing is registered with dpkg): it checks the suite's signed InRelease against
# debian-archive-keyring and each .deb against the SHA256 of that index, and `trixie_fetch` checks
# the SHA256 once more before unpacking with dpkg-deb -x.
# The caller defines give_up MESSAGE (tell the user, skip; under CI=true fail) before sourcing this.

SUITE=trixie
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# Check the machine, make the private apt state in $work, fetch and verify the suite's index.
trixie_prepare() {
  [ "$(uname -m)" = x86_64 ] || give_up "only x86_64 (amd64) machines are handled, this is $(uname -m)"
  local tool
  for tool in apt-get apt-cache dpkg-deb sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || give_up "$tool is missing: this script expects a Debian (bookworm or later) machine"
  done
  [ -r "$KEYRING" ] || give_up "$KEYRING is missing (apt-get install debian-archive-keyring)"
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
  echo "fetching the $SUITE package index (signed InRelease, checked against $KEYRING)" >&2
  apt-get -q "${apt_options[@]}" update >/dev/null || give_up "apt could not fetch or verify $MIRROR $SUITE"
}

# Fetch PACKAGE's .deb into $work/debs, verify it, unpack it into $work/root.
trixie_fetch() {
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
