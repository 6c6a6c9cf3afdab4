//! `snapshot save <filename>`: the member's backend as `Maintenance.Snapshot` streams it
//! (etcd's bbolt file, then its sha256), written as etcdctl writes it: into
//! `<filename>.part` (mode 0600, removed on every failure), checked to end with the
//! 32-byte trailer, fsynced, then renamed. One endpoint only; no time limit unless
//! `--command-timeout` is given; failures exit 5, as etcdctl's.
//!
//! `snapshot status` and `snapshot restore` are oxcdutl's (as etcdutl's in etcd 3.5):
//! they read files and need no server.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use oxcd_api::etcdserverpb::SnapshotRequest;

use crate::command::{Command, Run, bad_args};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::Out;

/// `snapshot`: prints its help.
pub const GROUP: Command = Command {
    path: &["snapshot"],
    use_: "snapshot <subcommand>",
    short: "Manages etcd node snapshots",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `snapshot save <filename>`.
pub const SAVE: Command = Command {
    path: &["snapshot", "save"],
    use_: "save <filename>",
    short: "Stores an etcd node backend snapshot to a given file",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(save),
};

/// A failure of the save itself: etcdctl's `ExitInterrupted`.
fn interrupted(msg: impl Into<String>) -> Fail {
    Fail::new(exit::INTERRUPTED, msg)
}

/// One of etcdctl's log lines (zap JSON on stderr).
fn log(msg: &str, fields: &[(&str, String)]) -> String {
    let ts = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut line = format!(
        r#"{{"level":"info","ts":{ts},"caller":"snapshot/v3_snapshot.go","msg":{}"#,
        oxcd_go::json::json_string(msg)
    );
    for (k, v) in fields {
        line.push_str(&format!(",{}:{v}", oxcd_go::json::json_string(k)));
    }
    line.push_str("}\n");
    line
}

/// Removes the `.part` file unless the save completed (etcdctl's deferred RemoveAll).
struct PartFile<'a>(&'a Path);

impl Drop for PartFile<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

fn save(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if ctx.flags.args.len() != 1 {
            return Err(bad_args("snapshot save expects one argument"));
        }
        let s = ctx.session()?;
        if s.endpoints.len() != 1 {
            return Err(interrupted(format!(
                "snapshot must be requested to one selected node, not multiple [{}]",
                s.endpoints.join(" ")
            )));
        }
        // etcdctl connects inside its save: every failure, this one too, exits 5.
        let client = s
            .client()
            .await
            .map_err(|f| interrupted(f.msg.unwrap_or_default()))?;
        let path = ctx.flags.args[0].clone();
        let part = format!("{path}.part");
        let _cleanup = PartFile(Path::new(&part));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&part)
            .map_err(|e| {
                interrupted(format!(
                    "could not open {part} ({})",
                    oxcd_go::os::path_error("open", &part, &e)
                ))
            })?;
        let mut logs = log(
            "created temporary db file",
            &[("path", oxcd_go::json::json_string(&part))],
        );
        // What etcdctl logged before a failure is printed with it.
        let with_logs = |logs: &str, mut f: Fail| {
            f.partial = Out::err(logs.to_string()).then(f.partial);
            f
        };
        let start = Instant::now();
        let endpoint = s.endpoints[0].clone();
        let stream_failed = |e: tonic::Status| interrupted(oxcd_client::Error::from(e).to_string());
        let download = async {
            let mut stream = client
                .maintenance()
                .snapshot(SnapshotRequest {})
                .await
                .map_err(stream_failed)?
                .into_inner();
            logs.push_str(&log(
                "fetching snapshot",
                &[("endpoint", oxcd_go::json::json_string(&endpoint))],
            ));
            let mut size = 0u64;
            while let Some(msg) = stream.message().await.map_err(stream_failed)? {
                file.write_all(&msg.blob)
                    .map_err(|e| interrupted(oxcd_go::os::path_error("write", &part, &e)))?;
                size += msg.blob.len() as u64;
            }
            Ok::<u64, Fail>(size)
        };
        let downloaded = if ctx.flags.is_set("command-timeout") {
            tokio::time::timeout(ctx.flags.duration("command-timeout"), download)
                .await
                .unwrap_or_else(|_| Err(interrupted("context deadline exceeded")))
        } else {
            download.await
        };
        let size = downloaded.map_err(|f| with_logs(&logs, f))?;
        if size % 512 != 32 {
            return Err(with_logs(
                &logs,
                interrupted(format!("sha256 checksum not found [bytes: {size}]")),
            ));
        }
        file.sync_all().map_err(|e| {
            with_logs(
                &logs,
                interrupted(oxcd_go::os::path_error("sync", &part, &e)),
            )
        })?;
        drop(file);
        logs.push_str(&log(
            "fetched snapshot",
            &[
                ("endpoint", oxcd_go::json::json_string(&endpoint)),
                (
                    "size",
                    oxcd_go::json::json_string(&oxcd_go::humanize::bytes(size)),
                ),
                ("took", start.elapsed().as_secs_f64().to_string()),
            ],
        ));
        std::fs::rename(&part, &path).map_err(|e| {
            with_logs(
                &logs,
                interrupted(format!(
                    "could not rename {part} to {path} ({})",
                    oxcd_go::os::path_error("rename", &part, &e)
                )),
            )
        })?;
        sync_parent(Path::new(&path));
        logs.push_str(&log(
            "saved",
            &[("path", oxcd_go::json::json_string(&path))],
        ));
        Ok(Out::err(logs).then(Out::text(format!("Snapshot saved at {path}\n"))))
    })
}

/// Makes the rename durable (etcdctl does not; a crash after it could lose the file).
fn sync_parent(path: &Path) {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
