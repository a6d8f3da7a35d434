#!/usr/bin/env bash
# tests/deploy/check_deploy.sh BUILD_DIR SOURCE_DIR CHECK — what operators install (deploy/):
#
#   units     both systemd units pass `systemd-analyze verify` (with @BINDIR@ set to the built
#             deformd, which must exist for verify), keep their sandboxing and read the
#             administrator's token from a systemd credential
#   install   `make install DESTDIR=... PREFIX=...` puts the programs, the units (naming
#             PREFIX/bin/deformd), the example configs and the docs where docs/operations.md says
#   configs   deformd reads both example configs (every key it knows, none refused)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
check=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$check" in
units)
  command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (deploy/deps.sh installs systemd)"
  for u in "$src"/deploy/systemd/*.service; do
    name=$(basename "$u")
    sed "s|@BINDIR@|$build/bin|g" "$u" > "$tmp/$name"
    out=$(systemd-analyze verify "$tmp/$name" 2>&1) || fail "$name: $out"
    # verify prints warnings without failing: there must be none about this unit.
    if printf '%s\n' "$out" | grep -q "$name"; then fail "$name: $out"; fi
    for key in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes ConfigurationDirectory=deformd \
               LoadCredential=admin-token:/etc/deformd/admin-token; do
      grep -qx "$key" "$u" || fail "$name lacks $key"
    done
    # The token comes from the credential, never from the config the service user must read.
    grep -q -- '--admin-token-file %d/admin-token' "$u" || fail "$name does not read the admin token credential"
  done
  grep -qx "StateDirectory=deformd" "$src/deploy/systemd/deformd.service" || fail "the primary keeps no StateDirectory"
  grep -q -- '--data ${STATE_DIRECTORY}' "$src/deploy/systemd/deformd.service" || fail "the primary's data is not in its StateDirectory"
  grep -q -- '--relay' "$src/deploy/systemd/deformd-relay.service" || fail "the relay unit does not start a relay"
  echo "units: both verify"
  ;;
install)
  make -s -C "$src" install BUILD_DIR="$build" DESTDIR="$tmp/root" PREFIX=/opt/deformd >/dev/null
  for f in bin/deformd bin/deformctl lib/systemd/system/deformd.service lib/systemd/system/deformd-relay.service \
           share/deformd/examples/deformd.json share/deformd/examples/relay.json share/doc/deformd/operations.md; do
    [ -e "$tmp/root/opt/deformd/$f" ] || fail "make install did not install $f"
  done
  [ -x "$tmp/root/opt/deformd/bin/deformd" ] || fail "deformd is not executable"
  grep -q '^ExecStart=/opt/deformd/bin/deformd ' "$tmp/root/opt/deformd/lib/systemd/system/deformd.service" ||
    fail "the installed unit does not run PREFIX/bin/deformd"
  if grep -rq '@BINDIR@' "$tmp/root/opt/deformd/lib/systemd/system"; then fail "@BINDIR@ left in a unit"; fi
  "$tmp/root/opt/deformd/bin/deformd" --help >/dev/null || fail "the installed deformd does not run"
  echo "install: ok"
  ;;
configs)
  for c in deformd.json relay.json; do
    "$build/bin/deformd" --config "$src/deploy/$c" --help >/dev/null || fail "deploy/$c does not load"
  done
  # Every key of the option table is in the primary's example (tests/deformd/test_options.c
  # checks the same through the table itself, nested keys in their object).
  table="$src/server/deformd/core/srv_options.c"
  [ -f "$table" ] || fail "no option table at $table"
  keys=$(sed -n 's/.*\.key = "\([a-z_.]*\)".*/\1/p; s/.*INT_ROW([^,]*, "\([a-z_.]*\)".*/\1/p' "$table" | sort -u)
  [ "$(printf '%s\n' "$keys" | wc -l)" -gt 40 ] || fail "found only these keys in $table: $keys"
  for key in $keys; do
    grep -q "\"${key#limits.}\"" "$src/deploy/deformd.json" || fail "deploy/deformd.json lacks \"$key\""
  done
  echo "configs: both load, every key shown"
  ;;
*) fail "unknown check $check" ;;
esac
