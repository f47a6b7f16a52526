#!/usr/bin/env bash
# Builds the app image (docker/Dockerfile, target runtime) with buildah, as root, without a Docker
# engine and without the registries the Dockerfile's defaults come from:
#   - the base: python:3.11-slim-bookworm when it can be pulled; otherwise one made here from
#     Debian's package mirror (debootstrap bookworm minbase + python3, python3-venv,
#     python-is-python3, ca-certificates; bookworm's python3 is 3.11), kept as $BASE_IMAGE;
#   - torch's CPU build: from TORCH_WHEELS (a directory holding torch-2.13.0+cpu-*.whl) when set,
#     else from wherever this machine's pip finds that file, else PyTorch's CPU index as the
#     Dockerfile does by default;
#   - a CA bundle pip on this machine trusts (its `cert` setting, e.g. for a TLS-inspecting proxy)
#     is mounted into the build's RUN steps only: nothing of it stays in the image.
# Not run in CI (it needs root, the network and about ten minutes). Prints the image size and the
# build time at the end.
#
#   scripts/build-image.sh                        # -> localhost/mcp-gateway:latest
#   IMAGE=mcp-gateway:1.2 TORCH_WHEELS=/opt/wheels scripts/build-image.sh
# Environment: IMAGE, PYTHON_IMAGE (skip the pull/debootstrap choice), TORCH_WHEELS, DEBIAN_MIRROR,
# BASE_IMAGE (name of the locally made base), WORK (scratch directory, default var/image-build).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-mcp-gateway:latest}
UPSTREAM_BASE=python:3.11-slim-bookworm
BASE_IMAGE=${BASE_IMAGE:-localhost/debian-python:3.11-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=${WORK:-$PWD/var/image-build}
TORCH_WHEEL_NAME='torch==2.13.0+cpu'

say() { echo "build-image: $*" >&2; }
[ "$(id -u)" -eq 0 ] || { say "run as root (buildah's storage and debootstrap need it)"; exit 1; }
command -v buildah >/dev/null || { say "buildah is missing: apt-get install -y buildah"; exit 1; }
grep -q "torch==${TORCH_WHEEL_NAME#torch==}" docker/Dockerfile \
  || { say "docker/Dockerfile no longer pins $TORCH_WHEEL_NAME: update this script"; exit 1; }
mkdir -p "$WORK"

# --- the base image -------------------------------------------------------------------------------
local_base() {
  if buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
    say "using the base made earlier, $BASE_IMAGE (buildah rmi it to make it again)"
    return
  fi
  command -v debootstrap >/dev/null || { say "debootstrap is missing: apt-get install -y debootstrap"; exit 1; }
  local rootfs=$WORK/rootfs container mount
  rm -rf "$rootfs"
  say "debootstrap bookworm (minbase + Python 3.11) from $MIRROR into $rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { say "debootstrap failed: $WORK/debootstrap.log"; exit 1; }
  # What an image does not need: package lists, apt's caches and downloaded .debs (the
  # Dockerfile's own apt-get update fetches fresh lists), man pages and docs. Later installs clean
  # up after themselves the way Debian's own container images do.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
         "$rootfs"/usr/share/man/* "$rootfs"/usr/share/doc/*
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CLEAN'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CLEAN
  container=$(buildah from scratch)
  mount=$(buildah mount "$container")
  tar -C "$rootfs" -c . | tar -C "$mount" -x
  buildah umount "$container" >/dev/null
  # An imported file system has no environment: the Dockerfile's `ENV PATH=/opt/venv/bin:$PATH`
  # needs a PATH to extend.
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 "$container"
  buildah commit --quiet --rm "$container" "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  say "made $BASE_IMAGE"
}

if [ -z "${PYTHON_IMAGE:-}" ]; then
  if buildah pull --quiet "$UPSTREAM_BASE" >/dev/null 2>"$WORK/pull.log"; then
    PYTHON_IMAGE=$UPSTREAM_BASE
  else
    say "$UPSTREAM_BASE cannot be pulled ($(tail -1 "$WORK/pull.log")); making a base from Debian's packages"
    local_base
    PYTHON_IMAGE=$BASE_IMAGE
  fi
fi

# --- how RUN steps run -------------------------------------------------------------------------------
# The default OCI runtime first; bookworm's crun refuses a host with cgroups v1 and v2 mounted side by
# side ("cgroups in hybrid mode not supported"), where runc works; chroot isolation is the last resort.
isolation=()
probe=$(buildah from --quiet "$PYTHON_IMAGE")
for candidate in "" "--runtime runc" "--isolation chroot"; do
  # shellcheck disable=SC2086 # the candidate is two words on purpose
  if buildah run $candidate "$probe" -- python -c 'print("ok")' >/dev/null 2>>"$WORK/runtime.log"; then
    read -r -a isolation <<<"$candidate"
    break
  fi
  candidate=none
done
buildah rm "$probe" >/dev/null
[ "$candidate" != none ] || { say "no way to run a container here: $WORK/runtime.log"; exit 1; }
say "RUN steps run with ${candidate:-the default runtime}"

# --- build arguments ------------------------------------------------------------------------------
# The docker format keeps the Dockerfile's HEALTHCHECK (OCI image configs have no such field).
args=(--layers --network host "${isolation[@]}" --format docker -f docker/Dockerfile --target runtime
      --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE")
wheels=${TORCH_WHEELS:-}
if [ -z "$wheels" ] && command -v pip >/dev/null; then
  # This machine's pip may know a local copy (a find-links directory); nothing is fetched when it does not.
  rm -rf "$WORK/torch-wheels"
  if pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
      --index-url "file:///nonexistent" -d "$WORK/torch-wheels" "$TORCH_WHEEL_NAME" >/dev/null 2>&1; then
    wheels=$WORK/torch-wheels
  fi
fi
if [ -n "$wheels" ]; then
  ls "$wheels"/torch-2.13.0+cpu-*.whl >/dev/null 2>&1 || { say "no torch-2.13.0+cpu wheel in $wheels"; exit 1; }
  say "torch from $wheels, its dependencies from PyPI"
  args+=(--build-context "torch-wheels=$wheels" --build-arg TORCH_INDEX_URL=https://pypi.org/simple)
fi
cert=${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}
if [ -n "$cert" ] && [ -r "$cert" ]; then
  printf '[global]\ncert = /etc/ssl/certs/build-ca-bundle.crt\n' >"$WORK/pip.conf"
  args+=(--volume "$cert:/etc/ssl/certs/build-ca-bundle.crt:ro" --volume "$WORK/pip.conf:/etc/pip.conf:ro")
  say "pip in the build trusts $cert (mounted for RUN steps only)"
fi

# --- build ----------------------------------------------------------------------------------------
say "buildah build ${args[*]} -t $IMAGE ."
started=$(date +%s)
buildah build "${args[@]}" -t "$IMAGE" . 2>&1 | tee "$WORK/build.log"
seconds=$(( $(date +%s) - started ))
size=$(buildah images --format '{{.Size}}' --filter "reference=$IMAGE" | head -1)
say "built $IMAGE in ${seconds} s; size $size (buildah images)"
