//! oxcd-utl: what `oxcdutl` (etcdutl's counterpart) does offline, on files, with no
//! server running.
//!
//! Owns: [`status`] (`snapshot status`: hash, revision, key count and size of an etcd
//! snapshot or backend file, as etcdutl 3.5 computes and prints them) and [`restore`]
//! (`snapshot restore`: an etcd 3.4/3.5 or oxcd snapshot turned into a new member's oxcd
//! data dir) and [`migrate`] (`migrate`: a data dir's storage version moved between
//! etcd 3.5 and 3.6, as etcdutl 3.6 does) and [`hashkv`] (`hashkv`: etcd's KV history
//! hash of a backend file, as etcdutl 3.6 computes it), with the helpers they print with ([`table`], [`log`]; Go's texts are
//! oxcd-go's).
//!
//! Invariants:
//! - Nothing read from a snapshot file is trusted: a damaged file is an error naming
//!   what is wrong, never a panic (the bbolt reader checks every page).
//! - A restore either leaves a complete, synced member directory or none: it is built
//!   under a temporary name and renamed into place last (etcd leaves a half-written
//!   `member/snap/db` behind on failure).
//! - Messages, flags and output are etcdutl 3.5.16's, byte for byte where etcd's are
//!   defined.

pub mod hashkv;
pub mod log;
pub mod migrate;
pub mod restore;
pub mod status;
pub mod table;
