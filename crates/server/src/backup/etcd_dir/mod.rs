//! An etcd member's data dir, for the binary swap (issue 35): oxcd started on it adopts
//! it as the same member ([`adopt`]); `oxcdutl swap-to-etcd` writes one from an oxcd
//! member's ([`export`]). Both read and write etcd 3.5's files as etcd does: its WAL
//! ([`wal`]) and its raft snapshot files ([`snap_files`]), and put the result in place
//! crash-safely ([`swap`]), each I/O failure named with its path
//! ([`crate::backup::path_io`]); the backend is etcd's bbolt file
//! ([`crate::backup::etcd_import`], [`crate::backup::etcd_file`]).

pub mod adopt;
pub mod export;
pub mod snap_files;
pub mod swap;
pub mod wal;
