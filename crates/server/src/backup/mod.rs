//! Backups in etcd's format: the backend written as etcd's bbolt file (what
//! `Maintenance.Snapshot` streams ([`stream`]) and `etcdctl snapshot restore` reads).

pub mod etcd_file;
pub mod stream;
