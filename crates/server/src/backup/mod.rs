//! etcd's formats on disk:
//! - backups: the backend written as etcd's bbolt file (what `Maintenance.Snapshot`
//!   streams ([`stream`]) and `etcdctl snapshot restore` reads: [`etcd_file`]), and
//!   etcd's bbolt file written as oxcd's backend ([`etcd_import`]: `snapshot restore`,
//!   and the snapshots an etcd leader sends);
//! - [`v2store`]: the membership in the v2 store an etcd raft snapshot carries;
//! - [`etcd_received`]: a snapshot an etcd leader sent, kept as it arrived until it is
//!   installed (then imported);
//! - [`etcd_dir`]: an etcd member's data dir, adopted by an oxcd member started on it
//!   and written back from one (the binary swap both ways);
//! - [`path_io`]: the I/O error with its path these report, and directory syncs;
//!   [`priority`]: the CPU priority of work that reads or writes a whole backend.

pub mod etcd_dir;
pub mod etcd_file;
pub mod etcd_import;
pub mod etcd_received;
pub mod path_io;
pub mod priority;
pub mod stream;
pub mod v2store;
