#!/usr/bin/env bash
# The floor of a single client's put on this machine (docs/performance.md, "The floor
# this machine allows"): starts 3 members of BINARY (oxcd or etcd) on free loopback
# ports with EXTRA flags (e.g. --unsafe-no-fsync), then 3,000 puts of 256 B from one
# client to the leader and 3,000 serializable single-key ranges (one gRPC round trip),
# and prints their p50/p99; then `oxcd-bench floor` in the same directory (an fdatasync
# after each of 2,000 4 KiB writes into a preallocated file, a loopback round trip,
# and the CPU of each). Needs etcdctl (the leader's endpoint) and
# target/release/oxcd-bench.
#   bench/put-floor.sh target/release/oxcd [--unsafe-no-fsync]
set -euo pipefail
BIN=$1; shift
HERE=$(cd "$(dirname "$0")/.." && pwd)
B=$HERE/target/release/oxcd-bench
D=$(mktemp -d "${TMPDIR:-/tmp}/put-floor.XXXX")
trap 'pkill -f "data-dir $D/m" || true; sleep 1; pkill -9 -f "data-dir $D/m" || true; rm -rf "$D"' EXIT
read -r -a PORTS <<< "$(python3 -c 'import socket
s=[socket.socket() for _ in range(6)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')"
P=("${PORTS[@]:0:3}"); C=("${PORTS[@]:3:3}")
IC="m0=http://127.0.0.1:${P[0]},m1=http://127.0.0.1:${P[1]},m2=http://127.0.0.1:${P[2]}"
for i in 0 1 2; do
  "$BIN" --name "m$i" --data-dir "$D/m$i" --listen-peer-urls "http://127.0.0.1:${P[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${P[$i]}" \
    --listen-client-urls "http://127.0.0.1:${C[$i]}" --advertise-client-urls "http://127.0.0.1:${C[$i]}" \
    --initial-cluster "$IC" --initial-cluster-state new "$@" > "$D/m$i.log" 2>&1 &
done
EPS=127.0.0.1:${C[0]},127.0.0.1:${C[1]},127.0.0.1:${C[2]}
for _ in $(seq 50); do
  ETCDCTL_API=3 etcdctl --endpoints="$EPS" endpoint status >/dev/null 2>&1 && break; sleep 0.2
done
LEADER=$(ETCDCTL_API=3 etcdctl --endpoints="$EPS" endpoint status -w json | python3 -c 'import json,sys
d=json.load(sys.stdin)
print([e["Endpoint"] for e in d if e["Status"]["leader"]==e["Status"]["header"]["member_id"]][0])')
summary='import json,sys; d=json.load(sys.stdin); print("%s, 1 client: p50 %.3f ms, p99 %.3f ms" % (sys.argv[1], d["latency_ms"]["p50"], d["latency_ms"]["p99"]))'
"$B" --endpoints "$LEADER" --clients 1 --conns 1 --json put --total 3000 --key-size 8 --val-size 256 \
  --key-space-size 100000 | python3 -c "$summary" put
"$B" --endpoints "$LEADER" --clients 1 --conns 1 --json range 00000000 --total 3000 --consistency s \
  | python3 -c "$summary" "serializable range"
# The machine alone, in the same directory: a durable write, a loopback round trip and
# the CPU each costs (oxcd-bench floor).
"$B" floor --dir "$D" --samples 2000 | sed -n 1,4p
