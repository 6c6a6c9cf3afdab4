//! Restore as an operator runs it: `<utl> snapshot restore <file> --data-dir <dir>` with
//! every other flag at its default, the offline tool being etcdutl beside etcd or
//! oxcdutl beside oxcd. The process is timed from spawn to exit; its output goes to a
//! log kept with the members' logs; the restored dir is measured, then removed.

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::cluster::disk_usage;

/// What the restore did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Restore {
    /// The offline tool run.
    pub tool: String,
    /// Spawn to exit, when it ran and succeeded.
    pub secs: Option<f64>,
    /// Disk usage (du) of the restored data dir.
    pub du_bytes: u64,
    /// Why there is no time: "not measured: ..." or the tool's failure.
    pub note: Option<String>,
}

impl Restore {
    /// A restore that was not run, and why.
    pub fn not_measured(tool: &Path, why: &str) -> Restore {
        Restore {
            tool: tool.display().to_string(),
            note: Some(format!("not measured: {why}")),
            ..Restore::default()
        }
    }
}

/// Restores `file` with `tool` into `into` (removed after), its output in `log`.
pub async fn run(tool: &Path, file: &Path, into: &Path, log: &Path) -> Restore {
    let name = tool
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !tool.exists() {
        return Restore::not_measured(tool, &format!("{name} missing"));
    }
    let _ = std::fs::remove_dir_all(into);
    let start = Instant::now();
    let got = tokio::process::Command::new(tool)
        .arg("snapshot")
        .arg("restore")
        .arg(file)
        .arg("--data-dir")
        .arg(into)
        .output()
        .await;
    let secs = start.elapsed().as_secs_f64();
    let mut restore = Restore {
        tool: tool.display().to_string(),
        ..Restore::default()
    };
    match got {
        Ok(out) => {
            let mut text = out.stdout;
            text.extend_from_slice(&out.stderr);
            let _ = std::fs::write(log, &text);
            if out.status.success() {
                restore.secs = Some(secs);
                restore.du_bytes = disk_usage(into);
            } else {
                let last = String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or_default()
                    .to_string();
                restore.note = Some(format!("{name} failed ({}): {last}", out.status));
            }
        }
        Err(e) => restore.note = Some(format!("{name} did not start: {e}")),
    }
    let _ = std::fs::remove_dir_all(into);
    restore
}
