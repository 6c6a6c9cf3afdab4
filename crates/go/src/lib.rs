//! oxcd-go: the texts and parsers oxcd shares with Go. etcd, etcdctl and etcdutl are Go
//! programs; their users read, and their scripts match, what Go prints, so oxcd's
//! binaries (the server's flags and logs, oxcdctl, oxcdutl, the client's errors) parse
//! and print through here.
//!
//! Owns, one module per concern, each named after what it reproduces:
//! - [`duration`]: `time.ParseDuration` and `Duration.String()`;
//! - [`strconv`]: `strconv.ParseInt`, `ParseUint`, `ParseBool` and their `*NumError`;
//! - [`quote`]: `strconv.Quote`, Go's `%q`;
//! - [`url`]: `net/url.Parse` and `net.SplitHostPort` as far as etcd's URL rules
//!   (`types.NewURLs`) depend on them;
//! - [`os`]: the text of a syscall errno and of an `*os.PathError`;
//! - [`json`]: a string as `encoding/json` writes it;
//! - [`hex`]: `%016x` of an `int64`;
//! - [`humanize`]: go-humanize's `Bytes`;
//! - [`capnslog`]: capnslog's timestamp;
//! - [`semver`]: go-semver's `Version`, as etcd's versions use it;
//! - [`time`]: Go's `time.RFC3339Nano`.
//!
//! Invariant: byte-for-byte Go/etcd behaviour. What Go accepts is accepted with Go's
//! value, what Go refuses is refused with Go's first error and its exact text, and what
//! Go prints is printed to the byte; where a module reproduces only part of Go, its doc
//! says which part. No dependencies beyond std, so that any crate can use it.

pub mod capnslog;
pub mod duration;
pub mod hex;
pub mod humanize;
pub mod json;
pub mod os;
pub mod quote;
pub mod semver;
pub mod strconv;
pub mod time;
pub mod url;
