//! Loopback ports for servers that a test or benchmark starts as separate processes (or
//! hands to code that binds by itself), so the port must be chosen before it is bound.
//!
//! Invariants: a port handed out lies outside the kernel's ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`), was free when checked, and is claimed for
//! the life of this process by a lock on `<tmp>/oxcd-test-ports/<port>`, so no other
//! process using this module gets it meanwhile. Binding port 0 and releasing it is not
//! enough: tests run in parallel processes, the kernel may hand the released port to
//! another one, and any outgoing connection on the machine may take an ephemeral port as
//! its local port before the server binds it. The lock goes when the process ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Lowest port handed out: clear of well-known services (2379/2380 included).
const LOWEST: u16 = 10_000;

/// The ports this process tried so far (each try moves on, so a process never repeats one).
static TRIED: AtomicU32 = AtomicU32::new(0);

/// The locks that claim this process's ports, held until it exits.
static CLAIMS: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A loopback port that was free when checked and that no other process using this
/// module holds, below the ephemeral range where possible.
pub fn free_port() -> std::io::Result<u16> {
    let (low, high) = candidate_range();
    let span = u32::from(high - low);
    if span > 0 {
        let start = process_seed() % span;
        for _ in 0..span.min(5_000) {
            // A prime stride walks the whole range before repeating.
            let n = TRIED.fetch_add(1, Ordering::Relaxed);
            let port = low + ((start + n.wrapping_mul(7_919)) % span) as u16;
            if claim(port) && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(port);
            }
        }
    }
    // No room below the ephemeral range: fall back to one the kernel picks.
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// Takes the lock on `port` for the rest of this process; false if another process has
/// it. Where no lock file can be made (no writable temp dir) every port counts as free.
fn claim(port: u16) -> bool {
    let dir = std::env::temp_dir().join("oxcd-test-ports");
    let file = std::fs::create_dir_all(&dir).and_then(|_| {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
    });
    let Ok(file) = file else {
        return true;
    };
    match file.try_lock() {
        Ok(()) => {
            if let Ok(mut claims) = CLAIMS.lock() {
                claims.push(file);
            }
            true
        }
        Err(TryLockError::WouldBlock) => false,
        Err(TryLockError::Error(_)) => true,
    }
}

/// `[LOWEST, first ephemeral port)`, or an empty range when there is no room.
fn candidate_range() -> (u16, u16) {
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    (LOWEST, first_ephemeral.max(LOWEST))
}

/// Differs between processes started at the same moment and between runs.
fn process_seed() -> u32 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    std::process::id()
        .wrapping_mul(2_654_435_761)
        .wrapping_add(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let (_, first_ephemeral) = candidate_range();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50 {
            let p = free_port().expect("a port");
            assert!(seen.insert(p), "port {p} handed out twice");
            if first_ephemeral > LOWEST {
                assert!((LOWEST..first_ephemeral).contains(&p), "{p}");
            }
            TcpListener::bind((Ipv4Addr::LOCALHOST, p)).expect("still free");
        }
    }

    #[test]
    fn a_port_another_process_holds_is_not_claimed() {
        // flock locks of two open files conflict as they would between two processes.
        let port = 9_999;
        let dir = std::env::temp_dir().join("oxcd-test-ports");
        std::fs::create_dir_all(&dir).expect("dir");
        let other = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
            .expect("lock file");
        other.lock().expect("lock");
        assert!(!claim(port));
        other.unlock().expect("unlock");
        assert!(claim(port));
    }
}
