//! oxcd-config: etcd's flags, `ETCD_*` variables and config file read into typed
//! [`settings::Settings`] ([`flags`] holds etcd's flag table, the parsers of Go's value
//! syntax and the checks; [`settings`] is what the rest of the member reads).
//!
//! Invariant: nothing here starts or touches a running member; a setting is checked when
//! it is read, so a member never starts on a value etcd would refuse.

pub mod auto_compaction;
pub mod features;
pub mod flags;
pub mod quota;
pub mod settings;

pub use settings::Settings;
