#!/bin/bash
# Peak and final RSS of one member after 150,000 puts of 1 KiB values (1,000 keys
# overwritten, so the keyspace stays small and the raft log is what grows), with
# --snapshot-count 100000 (etcd 3.5's default) and 10000 (etcd 3.6's).
set -u
OXCD=${OXCD:-target/release/oxcd}
ETCD=${ETCD:-/tmp/etcd-3.5/bin/etcd}
BENCH=${BENCH:-target/release/oxcd-bench}
for round in 1 2; do
for count in 100000 10000; do
for server in etcd oxcd; do
  d=$(mktemp -d /tmp/oxcd-snapshot-count.XXXX)
  bin=$ETCD; [ $server = oxcd ] && bin=$OXCD
  $bin --data-dir $d --snapshot-count $count --listen-client-urls http://127.0.0.1:25791 \
    --advertise-client-urls http://127.0.0.1:25791 --listen-peer-urls http://127.0.0.1:25801 \
    --initial-advertise-peer-urls http://127.0.0.1:25801 --initial-cluster default=http://127.0.0.1:25801 \
    --quota-backend-bytes 8589934592 >$d.log 2>&1 &
  pid=$!
  for i in $(seq 50); do curl -sf http://127.0.0.1:25791/health >/dev/null && break; sleep 0.2; done
  base=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  $BENCH --endpoints 127.0.0.1:25791 --conns 8 --clients 64 put --total 150000 --val-size 1024 --key-space-size 1000 >$d.bench 2>&1
  sleep 1
  hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  rate=$(grep -i "requests/sec\|Requests/sec" $d.bench | head -1 | tr -s ' ')
  echo "round=$round server=$server snapshot_count=$count start_rss_mib=$((base/1024)) peak_rss_mib=$((hwm/1024)) end_rss_mib=$((rss/1024)) $rate"
  kill $pid; wait $pid 2>/dev/null
  rm -rf $d $d.log $d.bench
done; done; done
