//! `kill -9` of the real `oxcd` binary under concurrent write load: after a restart every
//! acknowledged write is there with its value, and the revision never goes backwards.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use tokio::sync::Mutex;

struct Server {
    child: Child,
    endpoint: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts `oxcd` and waits for its readiness line.
fn start(data: &Path, port: u16) -> Server {
    let url = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_oxcd"))
        .arg("--data-dir")
        .arg(data)
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn oxcd");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("ready to serve client requests")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("oxcd did not log readiness");
    Server {
        child,
        endpoint: url,
    }
}

#[derive(Default)]
struct Acked {
    /// (key, value) pairs whose put was acknowledged.
    writes: Vec<(String, String)>,
    /// Highest revision an acknowledged put reported.
    max_rev: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_write_load_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let port = free_port();
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut total_attempted = 0usize;
    for round in 0..3 {
        let server = start(&data, port);
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..8 {
            let (ep, stop, acked) = (server.endpoint.clone(), stop.clone(), acked.clone());
            writers.push(tokio::spawn(async move {
                let mut attempted = 0;
                let Ok(mut c) = Client::connect([ep], None).await else {
                    return attempted;
                };
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let (k, v) = (
                        format!("r{round}/w{w}/{seq:06}"),
                        format!("value-{round}-{w}-{seq}"),
                    );
                    attempted += 1;
                    match c.put(k.clone(), v.clone(), None).await {
                        Ok(r) => {
                            let rev = r.header().map(|h| h.revision()).unwrap_or(0);
                            let mut a = acked.lock().await;
                            a.writes.push((k, v));
                            a.max_rev = a.max_rev.max(rev);
                        }
                        Err(_) => break,
                    }
                    seq += 1;
                }
                attempted
            }));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // SIGKILL while the writers are mid-flight.
        let mut server = server;
        server.child.kill().expect("kill -9");
        let _ = server.child.wait();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            total_attempted += w.await.expect("writer");
        }
        drop(server);
    }
    let server = start(&data, port);
    let mut c = Client::connect([server.endpoint.clone()], None)
        .await
        .expect("connect");
    let a = acked.lock().await;
    let r = c
        .get("r", Some(GetOptions::new().with_prefix()))
        .await
        .expect("get all");
    let found: std::collections::HashMap<Vec<u8>, Vec<u8>> = r
        .kvs()
        .iter()
        .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
        .collect();
    let mut missing = 0;
    for (k, v) in &a.writes {
        match found.get(k.as_bytes()) {
            Some(got) if got == v.as_bytes() => {}
            _ => missing += 1,
        }
    }
    let rev = r.header().expect("header").revision();
    eprintln!(
        "crash test: 3 kill -9 rounds, {} puts attempted, {} acknowledged, {} found after restart, {} missing; revision {} >= highest acknowledged {}",
        total_attempted,
        a.writes.len(),
        a.writes.len() - missing,
        missing,
        rev,
        a.max_rev
    );
    assert!(a.writes.len() > 100, "the load should get writes through");
    assert_eq!(missing, 0, "acknowledged writes lost");
    assert!(
        rev >= a.max_rev,
        "revision went backwards: {rev} < {}",
        a.max_rev
    );
}
