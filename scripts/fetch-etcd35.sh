#!/usr/bin/env bash
# Puts etcd 3.5.16 (etcd, etcdctl, etcdutl), the release line oxcd reports and the
# parity tests' reference server, into DIR (default /tmp/etcd-3.5/bin). Bookworm packages
# only etcd 3.4, so the binaries are taken from Debian trixie's etcd-server and
# etcd-client packages, unpacked with dpkg-deb and never installed: apt's own lists and
# the system's packages are left alone. Prints DIR. Does nothing when DIR already has them.
# A second argument names another Debian suite: `sid` gives etcd 3.5.30, which the mixed
# clusters' tests also run against (OXCD_REFERENCE_ETCD=DIR/etcd).
set -euo pipefail
dest=${1:-/tmp/etcd-3.5/bin}
suite=${2:-trixie}
if [ -x "$dest/etcd" ] && [ -x "$dest/etcdctl" ] && [ -x "$dest/etcdutl" ]; then
  echo "$dest"
  exit 0
fi
work=$(mktemp -d /tmp/etcd35.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$dest"
echo "deb http://deb.debian.org/debian $suite main" > "$work/sources.list"
apt_opts=(
  -o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
  -o Debug::NoLocking=1 -o APT::Sandbox::User=root
)
apt-get "${apt_opts[@]}" update -qq >/dev/null
(cd "$work" && apt-get "${apt_opts[@]}" download etcd-server etcd-client >/dev/null)
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
for bin in etcd etcdctl etcdutl; do cp "$work/root/usr/bin/$bin" "$dest/"; done
"$dest/etcd" --version | head -1 >&2
echo "$dest"
