//! Typed access to the configuration: a [`Key`] names one flag of the table and knows
//! the type its value reads as, so `cfg.get(key::MAX_TXN_OPS)` is a `u64` and a
//! misspelled flag is a compile error, never a silent 0.
//!
//! Invariant: every key is generated from the flag table (`table::flags!`), so a key's
//! name is always a flag of [`super::table::FLAGS`] with a kind matching its type.

use std::marker::PhantomData;
use std::time::Duration;

use super::{Config, value};

/// How a flag's text becomes a typed value.
pub trait ValueType {
    /// The value, borrowing from the configuration where it is text.
    type Value<'a>;
    /// Reads flag `name` from `cfg` (its default when unset; values were validated
    /// when they were read).
    fn read<'a>(cfg: &'a Config, name: &'static str) -> Self::Value<'a>;
}

/// One flag, with the type of its value.
pub struct Key<T> {
    /// The flag's name, without dashes.
    pub name: &'static str,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Key<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Key<T> {}

impl<T> Key<T> {
    /// The key of flag `name` (only `table::flags!` makes keys).
    pub const fn new(name: &'static str) -> Key<T> {
        Key {
            name,
            kind: PhantomData,
        }
    }
}

/// Free text.
pub struct Text;
/// A boolean.
pub struct Boolean;
/// An unsigned number (Go's `uint`, `uint32`, `uint64`).
pub struct Unsigned;
/// A signed number.
pub struct Signed;
/// A Go duration; `None` if it was negative.
pub struct GoDuration;
/// A URL list, as etcd keeps it: trimmed, scheme lower-cased, de-duplicated, sorted.
pub struct UrlList;

impl ValueType for Text {
    type Value<'a> = &'a str;
    fn read<'a>(cfg: &'a Config, name: &'static str) -> &'a str {
        cfg.text(name)
    }
}

impl ValueType for Boolean {
    type Value<'a> = bool;
    fn read(cfg: &Config, name: &'static str) -> bool {
        value::parse_bool(cfg.text(name)).unwrap_or(false)
    }
}

impl ValueType for Unsigned {
    type Value<'a> = u64;
    fn read(cfg: &Config, name: &'static str) -> u64 {
        value::parse_go_uint(cfg.text(name), 64).unwrap_or(0)
    }
}

impl ValueType for Signed {
    type Value<'a> = i64;
    fn read(cfg: &Config, name: &'static str) -> i64 {
        value::parse_go_int(cfg.text(name), 64).unwrap_or(0)
    }
}

impl ValueType for GoDuration {
    type Value<'a> = Option<Duration>;
    fn read(cfg: &Config, name: &'static str) -> Option<Duration> {
        value::parse_duration(cfg.text(name))
    }
}

impl ValueType for UrlList {
    type Value<'a> = Vec<String>;
    fn read(cfg: &Config, name: &'static str) -> Vec<String> {
        cfg.parsed_urls(name)
            .map(|us| us.iter().map(value::GoUrl::text).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::{FLAGS, Kind, key};

    #[test]
    fn keys_name_flags_of_their_kind() {
        let k = |name: &str| FLAGS.iter().find(|f| f.name == name).map(|f| f.kind);
        assert_eq!(k(key::MAX_TXN_OPS.name), Some(Kind::Uint));
        assert_eq!(k(key::PRE_VOTE.name), Some(Kind::Bool));
        assert_eq!(k(key::LISTEN_CLIENT_URLS.name), Some(Kind::Urls));
        assert_eq!(k(key::CERT_FILE.name), Some(Kind::Str));
    }
}
