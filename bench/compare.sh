#!/usr/bin/env bash
# Side-by-side benchmark of oxcd and etcd on this machine: installs Debian's etcd-server
# (etcd 3.4) when missing, builds oxcd and oxcd-bench in release mode, then starts a
# 3-member etcd and a 3-member oxcd on loopback one after the other and runs the same
# matrix on each. The report goes to bench/results/<date>.md (raw figures in .json).
# Extra arguments go to `oxcd-bench compare` (e.g. --scale 0.1 --load-keys 100000).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
[ -x /usr/bin/etcd ] || need+=(etcd-server)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian's package may start an etcd of its own on the default ports; stop it.
if command -v systemctl >/dev/null 2>&1; then systemctl stop etcd >/dev/null 2>&1 || true; fi

cargo build --release --locked -p oxcd-server -p oxcd-bench
exec ./target/release/oxcd-bench compare --etcd /usr/bin/etcd --oxcd ./target/release/oxcd "$@"
