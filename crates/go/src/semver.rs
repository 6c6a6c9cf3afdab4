//! go-semver (`github.com/coreos/go-semver/semver`), the version type etcd uses for its
//! server, cluster, storage and downgrade versions: `NewVersion`'s parsing and errors,
//! `String()`, and the comparisons etcd makes.
//!
//! Reproduced part: `X.Y.Z` with an optional `-pre.release` and `+metadata`, each number
//! read by `strconv.ParseInt(s, 10, 64)`; a version without three dotted parts is
//! refused with `<s> is not in dotted-tri format`. Comparing two versions orders by
//! major, minor and patch, then a release above its pre-releases; etcd itself mostly
//! compares major and minor only ([`Version::major_minor`]).

use std::cmp::Ordering;
use std::fmt;

use crate::strconv::{NumError, parse_int};

/// A semantic version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    /// The major number.
    pub major: i64,
    /// The minor number.
    pub minor: i64,
    /// The patch number.
    pub patch: i64,
    /// The pre-release (`alpha.0` in `3.8.0-alpha.0`), empty for a release.
    pub pre_release: String,
    /// The build metadata after `+`, empty when absent.
    pub metadata: String,
}

/// Why a text is not a version (go-semver's errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SemverError {
    /// Not three dot-separated parts.
    NotDottedTri(String),
    /// A pre-release or metadata identifier is empty or holds a character other than
    /// `[0-9A-Za-z-]`.
    Identifier {
        /// `pre-release` or `metadata`.
        part: &'static str,
        /// The identifier.
        text: String,
    },
    /// A number is not a decimal int64.
    Number(NumError),
}

impl fmt::Display for SemverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SemverError::NotDottedTri(s) => write!(f, "{s} is not in dotted-tri format"),
            SemverError::Identifier { part, text } => {
                write!(
                    f,
                    "failed to validate {part}: {text} is not a valid semver identifier"
                )
            }
            SemverError::Number(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SemverError {}

impl Version {
    /// `major.minor.patch`, a release.
    pub const fn new(major: i64, minor: i64, patch: i64) -> Version {
        Version {
            major,
            minor,
            patch,
            pre_release: String::new(),
            metadata: String::new(),
        }
    }

    /// `semver.NewVersion(text)`.
    pub fn parse(text: &str) -> Result<Version, SemverError> {
        let (rest, metadata) = split_off(text, '+');
        let (rest, pre_release) = split_off(rest, '-');
        let parts: Vec<&str> = rest.splitn(3, '.').collect();
        if parts.len() != 3 {
            return Err(SemverError::NotDottedTri(rest.to_string()));
        }
        validate_identifier("pre-release", pre_release)?;
        validate_identifier("metadata", metadata)?;
        let number = |s: &str| parse_int(s, 10, 64).map_err(SemverError::Number);
        Ok(Version {
            major: number(parts[0])?,
            minor: number(parts[1])?,
            patch: number(parts[2])?,
            pre_release: pre_release.to_string(),
            metadata: metadata.to_string(),
        })
    }

    /// The same major and minor with patch 0 and nothing else: etcd's cluster and
    /// storage versions (`3.6.14` → `3.6.0`).
    pub fn minor_release(&self) -> Version {
        Version::new(self.major, self.minor, 0)
    }

    /// `major.minor`, as etcd's API version and `version.Cluster` print it.
    pub fn major_minor(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// Orders by major and minor only (etcd's `LessThan` on versions trimmed to
    /// `{Major, Minor}`).
    pub fn cmp_minor(&self, other: &Version) -> Ordering {
        (self.major, self.minor).cmp(&(other.major, other.minor))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(
                || match (self.pre_release.is_empty(), other.pre_release.is_empty()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => self.pre_release.cmp(&other.pre_release),
                },
            )
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre_release.is_empty() {
            write!(f, "-{}", self.pre_release)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Version {
    type Err = SemverError;
    fn from_str(s: &str) -> Result<Version, SemverError> {
        Version::parse(s)
    }
}

/// Splits `text` at the first `sep`: what is before, and what is after (empty if none).
fn split_off(text: &str, sep: char) -> (&str, &str) {
    match text.split_once(sep) {
        Some((before, after)) => (before, after),
        None => (text, ""),
    }
}

fn validate_identifier(part: &'static str, text: &str) -> Result<(), SemverError> {
    if text.is_empty() {
        return Ok(());
    }
    let valid = text
        .split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if valid {
        Ok(())
    } else {
        Err(SemverError::Identifier {
            part,
            text: text.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_print_as_go_semver() {
        let v = Version::parse("3.8.0-alpha.0").expect("a version");
        assert_eq!((v.major, v.minor, v.patch), (3, 8, 0));
        assert_eq!(v.pre_release, "alpha.0");
        assert_eq!(v.to_string(), "3.8.0-alpha.0");
        assert_eq!(
            Version::parse("3.6.14").map(|v| v.to_string()),
            Ok("3.6.14".into())
        );
        assert_eq!(
            Version::parse("3.6.14").map(|v| v.major_minor()),
            Ok("3.6".into())
        );
        assert_eq!(
            Version::parse("3.6").map_err(|e| e.to_string()),
            Err("3.6 is not in dotted-tri format".into())
        );
        assert_eq!(
            Version::parse("3.x.0").map_err(|e| e.to_string()),
            Err("strconv.ParseInt: parsing \"x\": invalid syntax".into())
        );
    }

    #[test]
    fn a_release_is_above_its_pre_releases_and_minors_compare_alone() {
        let release = Version::new(3, 6, 0);
        let pre = Version::parse("3.6.0-rc.1").expect("a version");
        assert!(pre < release);
        assert_eq!(
            Version::new(3, 6, 14).cmp_minor(&release),
            std::cmp::Ordering::Equal
        );
        assert_eq!(Version::new(3, 6, 14).minor_release(), release);
    }
}
