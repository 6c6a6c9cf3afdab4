#!/usr/bin/env bash
# Builds bench/go-load (the clientv3 load generator) into $K36/build/go-load, in GOPATH
# mode over the Go toolchain and golang-*-dev tree that tools/k8s-storage/build.sh
# downloads and extracts (nothing installed). Prints the binary's path.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
K36=${K36:-/tmp/k8s36}
"$HERE/../../tools/k8s-storage/build.sh" >/dev/null
ROOT=$K36/root
GOROOT=$(ls -d "$ROOT"/usr/lib/go-1.* | sort -V | tail -1)
export GOROOT GOTOOLCHAIN=local GOPROXY=off GOFLAGS= GO111MODULE=off
export GOPATH=$ROOT/usr/share/gocode GOCACHE=$K36/gocache
BIN=$K36/build/go-load
if [ ! -x "$BIN" ] || [ "$HERE/main.go" -nt "$BIN" ]; then
  (cd "$HERE" && nice -n 19 "$GOROOT/bin/go" build -o "$BIN.tmp" main.go) && mv -f "$BIN.tmp" "$BIN"
fi
echo "$BIN"
