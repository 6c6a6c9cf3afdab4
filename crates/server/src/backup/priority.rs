//! The CPU priority of work that reads or writes a whole backend: a snapshot's dump for
//! a peer, and the import of a snapshot an etcd leader sent. Each runs as fast as a core
//! allows; the member's own work (client requests, raft, apply) and the members it may
//! share a machine with come first, and these take the CPU time they leave.

/// Nice value of such work.
const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`] (Linux: a
/// nice value is per thread, and threads it starts inherit it). Lowering needs no
/// privilege; a failure only leaves it as is.
pub fn yield_to_requests() {
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), BACKGROUND_NICE) {
        tracing::debug!("cannot lower a background thread's priority: {e}");
    }
}
