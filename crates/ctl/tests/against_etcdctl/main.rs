//! oxcdctl compared with etcdctl 3.4, in one test binary (one link of the server and the
//! clients instead of one per file): `parity` runs both CLIs against oxcd members,
//! `vs_etcd` runs both against real etcd 3.4 servers.

mod coord;
mod parity;
mod vs_etcd;
