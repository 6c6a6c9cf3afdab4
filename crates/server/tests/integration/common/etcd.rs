//! A real etcd started by a test (`oxcd_testkit::reference`: 3.5.16 in CI, else Debian's
//! 3.4) on loopback ports, for comparing oxcd's behavior with etcd's.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// Debian's etcdctl 3.4.
pub const ETCDCTL: &str = "/usr/bin/etcdctl";

/// A real etcd started by a test; killed when dropped.
pub struct Etcd {
    child: Child,
    /// Where etcdctl reaches it (`host:port`, or the https URL).
    pub endpoint: String,
}

impl Etcd {
    /// The process id (to pause it with SIGSTOP).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// etcd serving plain-text clients.
pub fn start_etcd(dir: &Path) -> Etcd {
    start_etcd_with(dir, "http", &[], &[])
}

/// etcd serving clients on a `scheme` URL with `flags`; `ctl` are the etcdctl flags
/// that reach it.
pub fn start_etcd_with(dir: &Path, scheme: &str, flags: &[String], ctl: &[String]) -> Etcd {
    start_etcd_from(command(dir, scheme), scheme, flags, ctl)
}

/// etcd (member `default`, its data dir fresh or restored for it) with its peer URL on
/// port `peer`, and `flags`; its log is appended to [`log_of`] `dir`.
pub fn start_etcd_with_peer(dir: &Path, peer: u16, flags: &[String]) -> Etcd {
    let (mut cmd, client, c) = command_with_peer(dir, "http", peer);
    if let Ok(log) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_of(dir))
    {
        cmd.stderr(log);
    }
    start_etcd_from((cmd, client, c), "http", flags, &[])
}

/// An etcd member `name` joining a running cluster (`--initial-cluster-state existing`,
/// `initial_cluster` as etcd's flag takes it) with its peer URL on port `peer` and
/// `flags`; its log is appended to [`log_of`] `dir`. Not waited for: a learner answers
/// no health check (it serves no linearizable read).
pub fn join_etcd(
    dir: &Path,
    name: &str,
    peer: u16,
    initial_cluster: &str,
    flags: &[String],
) -> Etcd {
    let ports = (peer, free_port());
    start_etcd_member(dir, name, ports, initial_cluster, "existing", flags)
}

/// An etcd member `name` of the cluster `initial_cluster` in `state` (`new` or
/// `existing`), its peer and client URLs on the ports `(peer, client)` (the same again
/// when it restarts), with `flags`; its log is appended to [`log_of`] `dir`. Not waited
/// for (the members of a new cluster start together).
pub fn start_etcd_member(
    dir: &Path,
    name: &str,
    (peer, client): (u16, u16),
    initial_cluster: &str,
    state: &str,
    flags: &[String],
) -> Etcd {
    let (mut cmd, _, c) = command_with_ports(dir, "http", peer, client);
    if let Ok(log) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_of(dir))
    {
        cmd.stderr(log);
    }
    // etcd's flags: the last of a repeated flag wins.
    cmd.args(["--name", name])
        .args(["--initial-cluster", initial_cluster])
        .args(["--initial-cluster-state", state])
        .args(flags);
    let child = cmd.stdout(Stdio::null()).spawn().expect("start etcd");
    Etcd {
        child,
        endpoint: format!("127.0.0.1:{c}"),
    }
}

/// Where [`start_etcd_with_peer`] logs the etcd of data dir `dir`.
pub fn log_of(dir: &Path) -> std::path::PathBuf {
    dir.with_extension("log")
}

fn start_etcd_from(
    (mut cmd, client, c): (Command, String, u16),
    scheme: &str,
    flags: &[String],
    ctl: &[String],
) -> Etcd {
    assert!(
        Path::new(ETCDCTL).exists(),
        "this test needs etcdctl 3.4: apt-get install -y etcd-client"
    );
    let child = cmd
        .args(flags)
        .stdout(Stdio::null())
        .spawn()
        .expect("start etcd");
    let etcd = Etcd {
        child,
        endpoint: if scheme == "http" {
            format!("127.0.0.1:{c}")
        } else {
            client
        },
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if healthy(&etcd.endpoint, ctl) {
            return etcd;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("etcd did not become healthy");
}

/// The command that starts a one-member etcd in `dir` serving clients on a `scheme` URL
/// at a free loopback port (more flags may follow); with that URL and its port.
pub fn command(dir: &Path, scheme: &str) -> (Command, String, u16) {
    command_with_peer(dir, scheme, free_port())
}

/// As [`command`], with the peer URL on port `p` (a restored data dir names its peer URL).
pub fn command_with_peer(dir: &Path, scheme: &str, p: u16) -> (Command, String, u16) {
    command_with_ports(dir, scheme, p, free_port())
}

/// As [`command_with_peer`], serving clients on port `c`.
fn command_with_ports(dir: &Path, scheme: &str, p: u16, c: u16) -> (Command, String, u16) {
    let client = format!("{scheme}://127.0.0.1:{c}");
    let peer = format!("http://127.0.0.1:{p}");
    let mut cmd = Command::new(oxcd_testkit::reference::etcd_binary());
    cmd.stderr(Stdio::null());
    cmd.arg("--data-dir")
        .arg(dir)
        .args([
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
        ])
        .args([
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
        ])
        .args(["--initial-cluster", &format!("default={peer}")]);
    (cmd, client, c)
}

/// Whether `etcdctl endpoint health` succeeds against `endpoint`.
fn healthy(endpoint: &str, ctl: &[String]) -> bool {
    Command::new(ETCDCTL)
        .arg(format!("--endpoints={endpoint}"))
        .args(ctl)
        .args(["endpoint", "health"])
        .env("ETCDCTL_API", "3")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `session` against a fresh etcd (under `dir/etcd`), then against a fresh
/// in-process oxcd with default settings (under `dir/oxcd`), each given its
/// `http://host:port`: etcd's result, then oxcd's.
pub async fn on_etcd_then_oxcd<T, F, Fut>(dir: &Path, session: F) -> (T, T)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let etcd = start_etcd(&dir.join("etcd"));
    let theirs = session(format!("http://{}", etcd.endpoint)).await;
    drop(etcd);
    let oxcd = super::InProc::start(dir.join("oxcd"), |_| {}).await;
    let ours = session(oxcd.endpoint()).await;
    oxcd.stop().await;
    (theirs, ours)
}

/// Compares the answers a scripted session got from etcd (`theirs`) and from oxcd
/// (`ours`), step by step: prints each mismatch and the count, then fails on any.
pub fn assert_same_answers(what: &str, theirs: &[String], ours: &[String]) {
    let mut mismatches = 0;
    for (t, o) in theirs.iter().zip(ours) {
        if t != o {
            mismatches += 1;
            eprintln!("etcd: {t}\noxcd: {o}\n");
        }
    }
    assert_eq!(theirs.len(), ours.len(), "both sessions ran every step");
    eprintln!(
        "{} {what} steps compared with {}: {mismatches} mismatches",
        ours.len(),
        oxcd_testkit::reference::etcd_binary().display()
    );
    assert_eq!(mismatches, 0);
}

/// A gRPC channel to `endpoint` (`host:port`, plain text), connected.
pub async fn channel(endpoint: &str) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(format!("http://{endpoint}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect")
}

/// Clears what differs between two clusters answering alike: the ids and the term.
pub fn mask(h: &mut Option<oxcd_api::etcdserverpb::ResponseHeader>) {
    if let Some(h) = h {
        h.cluster_id = 0;
        h.member_id = 0;
        h.raft_term = 0;
    }
}

/// An answer (a tonic `Result<Response<_>, Status>`) as text to compare, its header
/// masked ([`mask`]): what the raw gRPC parity sessions record at each step.
macro_rules! answer {
    ($r:expr) => {
        match $r {
            Ok(r) => {
                let mut r = r.into_inner();
                $crate::common::etcd::mask(&mut r.header);
                format!("{r:?}")
            }
            Err(s) => format!("error {:?}: {}", s.code(), s.message()),
        }
    };
}
pub(crate) use answer;
