//! Server processes that a test or benchmark starts: spawned with their output appended
//! to a log file, and signalled by pid.
//!
//! Invariant: a spawned server never inherits the caller's stdin or output, so many can
//! run beside a test harness or a terminal report without mixing into it.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Starts `cmd` with no stdin and its stdout and stderr appended to `log` (created when
/// missing).
pub fn spawn_logged(cmd: &mut Command, log: &Path) -> Result<Child, String> {
    let file = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let stdout = file
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(file)
        .spawn()
        .map_err(|e| format!("start {}: {e}", cmd.get_program().to_string_lossy()))
}

/// Sends `sig` (as `kill` takes it: "-STOP", "-CONT", "-TERM", ...) to process `pid`.
pub fn signal(pid: u32, sig: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map_err(|e| e.to_string())?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| format!("kill {sig} {pid} failed"))
}

/// The `oxcd` binary of the build running this test (test executables live in
/// `target/<profile>/deps`, the binaries one level up). Panics, naming the path, when it
/// is missing: the workspace must be built first.
pub fn built_oxcd() -> std::path::PathBuf {
    built_binary("oxcd")
}

/// The workspace's binary `name` (`oxcd`, `oxcdctl`, `oxcdutl`) of the build running
/// this test, as [`built_oxcd`] finds it.
pub fn built_binary(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join(name);
    assert!(
        bin.exists(),
        "{} is missing: build the workspace first (cargo build --workspace --all-targets)",
        bin.display()
    );
    bin
}
