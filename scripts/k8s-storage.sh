#!/usr/bin/env bash
# Kubernetes 1.36's storage-layer tests (k8s.io/apiserver/pkg/storage/etcd3, the code
# kube-apiserver talks to etcd with) against oxcd: builds them once from Debian sid's
# packaged sources (tools/k8s-storage/build.sh: about 280 MB of downloads and 3 minutes of
# build the first time, nothing installed), then runs each of the 74 tests against a fresh
# oxcd member with --unsafe-no-fsync, as Kubernetes' own test servers run etcd.
# Usage: scripts/k8s-storage.sh [OXCD_BINARY] (default: target/debug/oxcd).
# Exit 0 only if every test passed.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$PWD/tools/k8s-storage
OXCD=$(realpath "${1:-target/debug/oxcd}")
"$T/build.sh"
# A free loopback port, clear of this run's other servers.
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
status=0
K8S_STORE_PROGRESS_NOTIFY_INTERVAL=1s ETCD="$OXCD" \
  RESET_CMD="ETCD=$OXCD $T/etcd-fresh.sh start $P" \
  "$T/run.sh" "127.0.0.1:$P" || status=$?
ETCD="$OXCD" "$T/etcd-fresh.sh" stop "$P" || true
exit "$status"
