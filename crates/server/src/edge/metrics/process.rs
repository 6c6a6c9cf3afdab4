//! The process metrics etcd's Go client exports (`process_*`, and etcd's `os_fd_*`),
//! read from `/proc` at each scrape.

use super::text::{Exposition, Kind};

/// The kernel's clock ticks per second in `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc/self/limits` says of `what` (its soft limit; None: unlimited or unknown).
fn limit(limits: &str, what: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with(what))?;
    let soft = line[what.len()..].split_whitespace().next()?;
    soft.parse().ok()
}

/// The process' figures, added to `e`; a file that cannot be read leaves its figures out.
pub fn add(e: &mut Exposition) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
    // Numbered from the state (field 3 of stat(5)): utime 14, stime 15, starttime 22, vsize 23.
    if let (Some(utime), Some(stime)) = (field(11), field(12)) {
        e.single(
            "process_cpu_seconds_total",
            Kind::Counter,
            "Total user and system CPU time spent in seconds.",
            (utime + stime) / TICKS_PER_SECOND,
        );
    }
    if let Some(vsize) = field(20) {
        e.single(
            "process_virtual_memory_bytes",
            Kind::Gauge,
            "Virtual memory size in bytes.",
            vsize,
        );
    }
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    if let (Some(start), Some(boot)) = (field(19), boot) {
        e.single(
            "process_start_time_seconds",
            Kind::Gauge,
            "Start time of the process since unix epoch in seconds.",
            boot + start / TICKS_PER_SECOND,
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(rss_kb) = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
    {
        e.single(
            "process_resident_memory_bytes",
            Kind::Gauge,
            "Resident memory size in bytes.",
            rss_kb * 1024.0,
        );
    }
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as f64)
        .ok();
    let max_fds = limit(&limits, "Max open files");
    if let Some(open) = open {
        e.single(
            "process_open_fds",
            Kind::Gauge,
            "Number of open file descriptors.",
            open,
        );
        e.single(
            "os_fd_used",
            Kind::Gauge,
            "The number of used file descriptors.",
            open,
        );
    }
    if let Some(max) = max_fds {
        e.single(
            "process_max_fds",
            Kind::Gauge,
            "Maximum number of open file descriptors.",
            max,
        );
        e.single(
            "os_fd_limit",
            Kind::Gauge,
            "The file descriptor limit.",
            max,
        );
    }
    e.single(
        "process_virtual_memory_max_bytes",
        Kind::Gauge,
        "Maximum amount of virtual memory available in bytes.",
        limit(&limits, "Max address space").unwrap_or(u64::MAX as f64),
    );
    let net = std::fs::read_to_string("/proc/self/net/dev").unwrap_or_default();
    let (mut rx, mut tx) = (0.0, 0.0);
    for line in net.lines().skip(2) {
        let Some((_, counts)) = line.split_once(':') else {
            continue;
        };
        let c: Vec<f64> = counts
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        rx += c.first().copied().unwrap_or(0.0);
        tx += c.get(8).copied().unwrap_or(0.0);
    }
    e.single(
        "process_network_receive_bytes_total",
        Kind::Counter,
        "Number of bytes received by the process over the network.",
        rx,
    );
    e.single(
        "process_network_transmit_bytes_total",
        Kind::Counter,
        "Number of bytes sent by the process over the network.",
        tx,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_described() {
        let mut e = Exposition::default();
        add(&mut e);
        let text = e.finish();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
            "process_virtual_memory_bytes ",
            "os_fd_used ",
        ] {
            assert!(text.contains(&format!("\n{name}")), "{name} in {text}");
        }
    }
}
