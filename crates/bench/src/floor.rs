//! `oxcd-bench floor`: what this machine allows a single client's put at best, measured
//! without any server: the latency of one WAL-sized write made durable (`fdatasync`
//! of a 4 KiB write into a preallocated file in `--dir`, as a WAL segment is written)
//! and the loopback TCP round trip of a small message between two threads.
//!
//! A put acknowledged by a 3-member cluster needs at least: the client's request to the
//! leader and the answer back (one round trip), the leader's entry to a follower and its
//! acknowledgement (one round trip) around the follower's durable write, the leader's
//! own durable write overlapping that. So the floor is two round trips and one durable
//! write; anything a server adds (encoding, scheduling, the apply) comes on top.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

/// Flags of `oxcd-bench floor`.
#[derive(Debug, Clone, Args)]
pub struct FloorArgs {
    /// Where the durable writes go (the file system the members' data dirs are on).
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    /// Samples of each measurement.
    #[arg(long, default_value_t = 2000)]
    pub samples: usize,
    /// Bytes of each round trip's message.
    #[arg(long, default_value_t = 128)]
    pub message_bytes: usize,
}

/// Percentiles of one measurement, in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
}

impl Spread {
    fn of(mut samples: Vec<Duration>) -> Spread {
        samples.sort_unstable();
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1));
            samples.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
        };
        Spread {
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
        }
    }
}

/// What the machine allows.
#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    pub durable_write: Spread,
    /// CPU (user and kernel) per durable write, in microseconds.
    pub durable_write_cpu_us: f64,
    pub loopback_round_trip: Spread,
    /// CPU per round trip (both threads, user and kernel), in microseconds.
    pub round_trip_cpu_us: f64,
    /// Two round trips and one durable write, at their medians.
    pub put_floor_p50_us: f64,
    /// Three durable writes and three round trips (client-leader, leader to each
    /// follower): the CPU a 3-member put cannot go below, in microseconds.
    pub put_cpu_floor_us: f64,
}

/// This process's CPU time so far (user + kernel).
fn cpu_now() -> Duration {
    crate::cluster::cpu_time_of("self").unwrap_or_default()
}

/// Measures both and prints them.
pub fn run(a: &FloorArgs) -> Result<Floor, String> {
    let per_sample = |d: Duration| d.as_secs_f64() * 1e6 / a.samples.max(1) as f64;
    let t = cpu_now();
    let durable_write = durable_writes(a)?;
    let durable_write_cpu_us = per_sample(cpu_now().saturating_sub(t));
    let t = cpu_now();
    let loopback_round_trip = round_trips(a)?;
    let round_trip_cpu_us = per_sample(cpu_now().saturating_sub(t));
    let floor = Floor {
        put_floor_p50_us: 2.0 * loopback_round_trip.p50_us + durable_write.p50_us,
        put_cpu_floor_us: 3.0 * durable_write_cpu_us + 3.0 * round_trip_cpu_us,
        durable_write,
        durable_write_cpu_us,
        loopback_round_trip,
        round_trip_cpu_us,
    };
    println!(
        "durable 4 KiB write (pwrite + fdatasync): p50 {:.0} us, p90 {:.0} us, p99 {:.0} us",
        floor.durable_write.p50_us, floor.durable_write.p90_us, floor.durable_write.p99_us
    );
    println!(
        "loopback TCP round trip ({} B): p50 {:.0} us, p90 {:.0} us, p99 {:.0} us",
        a.message_bytes,
        floor.loopback_round_trip.p50_us,
        floor.loopback_round_trip.p90_us,
        floor.loopback_round_trip.p99_us
    );
    println!(
        "CPU: {:.0} us per durable write, {:.0} us per round trip",
        floor.durable_write_cpu_us, floor.round_trip_cpu_us
    );
    println!(
        "a 3-member put's floor (2 round trips + 1 durable write, p50): {:.0} us; \
         its CPU floor (3 durable writes + 3 round trips): {:.0} us",
        floor.put_floor_p50_us, floor.put_cpu_floor_us
    );
    let json = serde_json::to_string(&floor).map_err(|e| e.to_string())?;
    println!("{json}");
    Ok(floor)
}

/// 4 KiB writes one after the other into a preallocated file, each made durable.
fn durable_writes(a: &FloorArgs) -> Result<Spread, String> {
    let path = a
        .dir
        .join(format!("oxcd-bench-floor-{}", std::process::id()));
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(err)?;
    let block = vec![0x5au8; 4096];
    let size = (a.samples as u64 + 1) * block.len() as u64;
    let measured = (|| {
        // Allocated and synced first, as a WAL segment is: each sample then writes data
        // only, not the file's size.
        file.write_all_at(&vec![0u8; size as usize], 0)?;
        file.sync_all()?;
        let mut out = Vec::with_capacity(a.samples);
        for i in 0..a.samples {
            let t = Instant::now();
            file.write_all_at(&block, i as u64 * block.len() as u64)?;
            file.sync_data()?;
            out.push(t.elapsed());
        }
        Ok(out)
    })();
    let _ = std::fs::remove_file(&path);
    measured.map(Spread::of).map_err(err)
}

/// A message sent to an echoing thread and read back, one at a time.
fn round_trips(a: &FloorArgs) -> Result<Spread, String> {
    let err = |e: std::io::Error| format!("loopback: {e}");
    let listener = TcpListener::bind("127.0.0.1:0").map_err(err)?;
    let addr = listener.local_addr().map_err(err)?;
    let n = a.message_bytes.max(1);
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = vec![0u8; n];
        loop {
            match s.read_exact(&mut buf) {
                Ok(()) => s.write_all(&buf)?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    });
    let measured = (|| {
        let mut s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        let msg = vec![7u8; n];
        let mut back = vec![0u8; n];
        let mut out = Vec::with_capacity(a.samples);
        for _ in 0..a.samples {
            let t = Instant::now();
            s.write_all(&msg)?;
            s.read_exact(&mut back)?;
            out.push(t.elapsed());
        }
        Ok(out)
    })();
    match echo.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(err(e)),
        Err(_) => return Err("loopback: the echoing thread panicked".into()),
    }
    measured.map(Spread::of).map_err(err)
}
