#!/usr/bin/env bash
# Starts a 3-member oxcd cluster on this machine (etcd's Procfile layout: clients on
# 2379, 22379, 32379; peers on 2380, 22380, 32380), data under ./cluster-data/.
# Ctrl-C stops all three. Restarting reuses the data directories: the members rejoin
# as themselves and the --initial-* flags are ignored, as in etcd.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin oxcd
bin=./target/release/oxcd
cluster="infra1=http://127.0.0.1:2380,infra2=http://127.0.0.1:22380,infra3=http://127.0.0.1:32380"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
for m in "infra1 2379 2380" "infra2 22379 22380" "infra3 32379 32380"; do
  set -- $m
  "$bin" --name "$1" --data-dir "cluster-data/$1" \
    --listen-client-urls "http://127.0.0.1:$2" --advertise-client-urls "http://127.0.0.1:$2" \
    --listen-peer-urls "http://127.0.0.1:$3" --initial-advertise-peer-urls "http://127.0.0.1:$3" \
    --initial-cluster "$cluster" --initial-cluster-token oxcd-local --initial-cluster-state new \
    2> >(sed "s/^/$1 | /" >&2) &
  pids+=($!)
done
wait
