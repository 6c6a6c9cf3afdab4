//! The real etcd that parity tests compare oxcd with.
//!
//! etcd 3.5 is the release line oxcd reports, so it is the reference where 3.4 and 3.5
//! differ; Debian bookworm packages only 3.4. `OXCD_REFERENCE_ETCD` names the etcd server
//! binary to compare with (`scripts/test.sh` fetches etcd 3.5.16 with
//! `../shared/tools/fetch-etcd35.sh` and sets it); without it, Debian's etcd 3.4 at
//! `/usr/bin/etcd`. The client is always Debian's etcdctl 3.4, which must keep working.

use std::path::PathBuf;

/// The variable that names the reference etcd binary.
pub const VARIABLE: &str = "OXCD_REFERENCE_ETCD";

/// Debian's etcd 3.4, the reference when [`VARIABLE`] is not set.
pub const DEBIAN_ETCD: &str = "/usr/bin/etcd";

/// The etcd server binary parity tests start. Panics with how to get it when missing.
pub fn etcd_binary() -> PathBuf {
    let path = std::env::var_os(VARIABLE)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEBIAN_ETCD));
    assert!(
        path.exists(),
        "parity tests need a real etcd at {} ({VARIABLE} names it; Debian's etcd-server \
         package gives 3.4 at {DEBIAN_ETCD}; ../shared/tools/fetch-etcd35.sh gives 3.5)",
        path.display()
    );
    path
}

/// The reference etcd's version (`3.5.16`), from `etcd --version`.
pub fn etcd_version() -> String {
    let out = std::process::Command::new(etcd_binary())
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

/// etcd 3.5's offline tool beside the reference etcd, where there is one (Debian's 3.4
/// has none: its `etcdctl snapshot ...` does that work).
pub fn etcdutl_binary() -> Option<PathBuf> {
    let beside = etcd_binary().with_file_name("etcdutl");
    beside.exists().then_some(beside)
}

/// Appends etcd's snapshot trailer to the bbolt file at `path`: the sha256 of its bytes,
/// which `snapshot restore` checks (what `Maintenance.Snapshot` sends last).
pub fn append_sha256_trailer(path: &std::path::Path) -> std::io::Result<()> {
    use sha2::Digest;
    let mut all = std::fs::read(path)?;
    let sum = sha2::Sha256::digest(&all);
    all.extend_from_slice(&sum);
    std::fs::write(path, all)
}
