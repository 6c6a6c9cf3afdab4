//! `migrate --data-dir --target-version [--force]`: brings a stopped member's data dir to
//! another storage version, as etcdutl 3.6 does (v3.6.14
//! `etcdutl/etcdutl/migrate_command.go`, `server/storage/schema/migration.go`): one minor
//! at a time between 3.5 (no version recorded) and 3.6 (`storageVersion` = `3.6.0`),
//! with etcdutl's messages. oxcd's raft log holds no entry newer than 3.5 (its
//! cluster-version and downgrade entries are 3.5's), so a downgrade is never refused
//! for the log.

use std::path::PathBuf;

use oxcd_storage::backend::Backend;
use oxcd_storage::storage_version::{self, Detected};

use crate::log::{self, Field};

/// The caller etcdutl's log lines name.
const CALLER: &str = "etcdutl/migrate_command.go:110";

/// The newest storage version this oxcdutl writes (its server's release).
const NEWEST_MINOR: i64 = 6;

/// Why a migration did not happen: the text etcdutl prints after `Error: `, and whether
/// it is an argument error (exit 128) or a failure (exit 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// `--target-version` is not `X.Y`, or below 3.5.
    #[error("{0}")]
    BadArgs(String),
    /// The migration failed.
    #[error("{0}")]
    Failed(String),
}

/// What to migrate.
#[derive(Debug, Clone)]
pub struct MigrateConfig {
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--target-version` (`X.Y`).
    pub target_version: String,
    /// `--force`: set the version even when the normal migration fails.
    pub force: bool,
}

/// The target `X.Y` as (major, minor), refused with etcdutl's texts.
fn target(text: &str) -> Result<(i64, i64), MigrateError> {
    let bad = || {
        MigrateError::BadArgs(format!(
            "wrong target version format, expected \"X.Y\", got {text:?}"
        ))
    };
    let (major, minor) = text.split_once('.').ok_or_else(bad)?;
    if minor.contains('.') {
        return Err(bad());
    }
    let major = oxcd_go::strconv::parse_int(major, 10, 64).map_err(|_| bad())?;
    let minor = oxcd_go::strconv::parse_int(minor, 10, 64).map_err(|_| bad())?;
    if (major, minor) < (3, 5) {
        return Err(MigrateError::BadArgs(format!(
            "target version {text:?} not supported. Minimal \"3.5\""
        )));
    }
    Ok((major, minor))
}

/// The stored value for a storage version: 3.5 records none.
fn stored((major, minor): (i64, i64)) -> Option<String> {
    ((major, minor) >= (3, 6)).then(|| format!("{major}.{minor}.0"))
}

/// Runs the migration; logs as etcdutl does.
pub fn migrate(cfg: &MigrateConfig) -> Result<(), MigrateError> {
    let (major, minor) = target(&cfg.target_version)?;
    let db = cfg.data_dir.join("member").join("snap").join("db");
    if let Err(e) = std::fs::metadata(&db) {
        return Err(MigrateError::Failed(oxcd_go::os::path_error(
            "stat", &db, &e,
        )));
    }
    let fail = |e: &dyn std::fmt::Display| MigrateError::Failed(e.to_string());
    let _lock =
        oxcd_storage::lock::DirLock::acquire(&cfg.data_dir.join("member")).map_err(|e| fail(&e))?;
    let backend = Backend::open(&db).map_err(|e| fail(&e))?;
    let current = match storage_version::detect(&backend).map_err(|e| fail(&e))? {
        Detected::Recorded(v) => parse_minor(&v),
        Detected::Etcd35 => Some((3, 5)),
        Detected::Unknown => None,
    };
    let Some(current) = current else {
        log::error(
            CALLER,
            "failed to detect storage version. Please make sure you are using data dir from etcd v3.5 and older",
            &[],
        );
        return Err(MigrateError::Failed("missing term information".into()));
    };
    let wanted = format!("{major}.{minor}");
    if current == (major, minor) {
        log::info(
            CALLER,
            "storage version up-to-date",
            &[("storage-version", Field::Str(&wanted))],
        );
        return Ok(());
    }
    let planned = plan(current, (major, minor));
    match planned {
        Ok(()) => {}
        Err(e) if !cfg.force => return Err(MigrateError::Failed(e)),
        Err(_) => {
            log::info(CALLER, "normal migrate failed, trying with force", &[]);
            let value = stored((major, minor));
            storage_version::set(&backend, value.as_deref()).map_err(|e| fail(&e))?;
            let msg = if value.is_some() {
                "forcefully set storage version"
            } else {
                "forcefully cleared storage version"
            };
            log::warn(CALLER, msg, &[("storage-version", Field::Str(&wanted))]);
            return Ok(());
        }
    }
    // One minor at a time, as etcd's plan steps.
    let step = if (major, minor) > current { 1 } else { -1 };
    let mut at = current;
    while at != (major, minor) {
        at = (at.0, at.1 + step);
        let value = stored(at);
        storage_version::set(&backend, value.as_deref()).map_err(|e| fail(&e))?;
        let shown = format!("{}.{}.0", at.0, at.1);
        log::info(
            "schema/migration.go:65",
            "updated storage version",
            &[("new-storage-version", Field::Str(&shown))],
        );
    }
    Ok(())
}

/// etcd's `newPlan`: the same major, every version between known to this binary.
fn plan(current: (i64, i64), target: (i64, i64)) -> Result<(), String> {
    if current.0 != target.0 {
        return Err(
            "cannot create migration plan: changing major storage version is not supported".into(),
        );
    }
    for (major, minor) in [current, target] {
        if major != 3 || !(5..=NEWEST_MINOR).contains(&minor) {
            return Err(format!(
                "cannot create migration plan: version \"{major}.{minor}\" is not supported"
            ));
        }
    }
    Ok(())
}

fn parse_minor(v: &str) -> Option<(i64, i64)> {
    let mut parts = v.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    // etcd v3.6.14 etcdutl/etcdutl/migrate_command.go `parseTargetVersion`.
    #[test]
    fn targets_are_refused_in_etcdutls_words() {
        assert_eq!(
            target("3").map_err(|e| e.to_string()),
            Err("wrong target version format, expected \"X.Y\", got \"3\"".into())
        );
        assert_eq!(
            target("3.4").map_err(|e| e.to_string()),
            Err("target version \"3.4\" not supported. Minimal \"3.5\"".into())
        );
        assert_eq!(target("3.6"), Ok((3, 6)));
        assert_eq!(
            plan((3, 6), (3, 7)),
            Err("cannot create migration plan: version \"3.7\" is not supported".into())
        );
        assert_eq!(plan((3, 6), (3, 5)), Ok(()));
    }
}
