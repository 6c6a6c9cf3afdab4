#!/usr/bin/env bash
# Sets up what the test suite needs on a fresh Debian machine and runs every test.
#
# Installs (when missing): protobuf-compiler (the etcd-client crate's build needs protoc),
# etcd-client (etcdctl 3.4) and etcd-server (etcd 3.4) — the third-party client and a
# real server for the tests — curl and iproute2 (ss) for the TLS tests, python3 and
# python3-venv for etcd3gw (pip-installed into target/etcd3gw-venv); and fetches
# etcd 3.5.16 (scripts/fetch-etcd35.sh), the reference of the parity tests. Needs root for apt and for
# the full-disk test's tmpfs mount. Last, Kubernetes' storage-layer tests
# (scripts/k8s-storage.sh: Debian sid's Go and Kubernetes sources, extracted under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
[ -x /usr/bin/etcdctl ] || need+=(etcd-client)
[ -x /usr/bin/etcd ] || need+=(etcd-server)
# The TLS tests fetch /health over HTTPS with curl and read listen backlogs with ss.
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ss >/dev/null 2>&1 || need+=(iproute2)
# The gateway client test runs etcd3gw (Python) from a virtualenv.
if ! command -v python3 >/dev/null 2>&1; then
  need+=(python3 python3-venv)
elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need+=(python3-venv)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The parity tests compare with etcd 3.5.16, the line oxcd reports (oxcd_testkit::reference);
# Debian's 3.4 stays the reference only if 3.5 cannot be fetched, and this says so.
if [ -z "${OXCD_REFERENCE_ETCD:-}" ]; then
  if etcd35=$(./scripts/fetch-etcd35.sh); then
    export OXCD_REFERENCE_ETCD="$etcd35/etcd"
  else
    echo "WARNING: could not fetch etcd 3.5; parity tests compare with Debian's etcd 3.4"
  fi
fi
echo "reference etcd: ${OXCD_REFERENCE_ETCD:-/usr/bin/etcd}"
# etcd3gw, OpenStack's client of etcd's JSON gateway, for the gateway client test.
venv=target/etcd3gw-venv
if ! "$venv/bin/python" -c 'import etcd3gw' >/dev/null 2>&1; then
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q etcd3gw; } ||
    echo "WARNING: could not install etcd3gw; the gateway client test will fail and say why"
fi
export OXCD_ETCD3GW_PYTHON="$PWD/$venv/bin/python"
# Debian's etcd-server unit may not start here; make sure no stray etcd holds 2379.
if command -v systemctl >/dev/null 2>&1; then systemctl stop etcd >/dev/null 2>&1 || true; fi

# A failing test's output ends with its panic message rather than a backtrace, so the
# tail that CI reports names the failure (OXCD_TEST_BACKTRACE=1 brings backtraces back).
export RUST_BACKTRACE="${OXCD_TEST_BACKTRACE:-0}"

# A fresh clone gains nothing from incremental compilation; it only costs time and disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# What this run had to work with, so a slow CI run can be told from a slow machine.
echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2 " GiB"}'), $(df -h . | awk 'NR==2 {print $4 " free"}'); $(cargo --version)"

# Hard budgets, so a stuck build or test still ends with a report well inside CI's limit:
# a passing run takes about 10 minutes on a 2-core machine. The tests get SIGINT first,
# on which nextest cancels what runs and prints its summary.
build_budget="${OXCD_BUILD_BUDGET:-25m}"
test_budget="${OXCD_TEST_BUDGET:-20m}"

start=$(date +%s)
# Benches and examples are not built: no test runs them.
timeout "$build_budget" cargo build --workspace --bins --tests --locked ||
  { echo "build failed or did not finish within $build_budget"; exit 1; }
echo "build: $(( $(date +%s) - start ))s"
if cargo nextest --version >/dev/null 2>&1; then
  timeout --signal=INT --kill-after=60s "$test_budget" \
    cargo nextest run --workspace --locked --no-fail-fast
else
  timeout --kill-after=60s "$test_budget" cargo test --workspace --locked --no-fail-fast
fi
echo "build + tests: $(( $(date +%s) - start ))s"
# Kubernetes 1.36's storage-layer tests against the oxcd just built: downloads and builds
# them the first time (tools/k8s-storage), then one fresh member per test.
timeout --kill-after=60s "${OXCD_K8S_BUDGET:-15m}" ./scripts/k8s-storage.sh target/debug/oxcd
echo "build + tests + Kubernetes storage tests: $(( $(date +%s) - start ))s"
