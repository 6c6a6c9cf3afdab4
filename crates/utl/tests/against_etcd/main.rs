//! oxcdutl against the real etcd 3.5.16 (and Debian's 3.4): one test binary, one module
//! per area. Servers are real processes (the reference etcd, the workspace's `oxcd`),
//! clients real clients (etcd's etcdctl and etcdutl, oxcdctl, the etcd-client crate).

mod bump;
mod common;
mod defrag;
mod errors;
mod from_etcd;
mod hashkv;
mod into_cluster;
mod migrate_versions;
mod migration;
mod status;
