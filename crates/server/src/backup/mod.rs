//! Backups in etcd's format: the backend written as etcd's bbolt file (what
//! `Maintenance.Snapshot` streams ([`stream`]) and `etcdctl snapshot restore` reads),
//! and etcd's bbolt file written as oxcd's backend ([`etcd_import`]: `snapshot restore`,
//! and the snapshots an etcd leader sends).

pub mod etcd_file;
pub mod etcd_import;
pub mod stream;
