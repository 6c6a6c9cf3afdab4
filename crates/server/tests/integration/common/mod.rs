//! In-process members on real loopback sockets, for tests that talk gRPC to them.
#![allow(dead_code)]

pub mod cluster;
pub mod etcd;

use std::net::SocketAddr;
use std::path::PathBuf;

use oxcd_config::settings::Settings;
use oxcd_server::start::serve;
use tokio::sync::oneshot;

/// A member running inside the test process.
pub struct InProc {
    /// The bound client address.
    pub addr: SocketAddr,
    /// The data dir (kept for restarts).
    pub data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), serve::ServeError>>>,
}

impl InProc {
    /// Starts a member in `data_dir` on a free loopback port.
    pub async fn start(data_dir: PathBuf, tweak: impl FnOnce(&mut Settings)) -> InProc {
        Self::start_with(data_dir, serve::TestHooks::default(), tweak).await
    }

    /// As [`InProc::start`], with test hooks.
    pub async fn start_with(
        data_dir: PathBuf,
        hooks: serve::TestHooks,
        tweak: impl FnOnce(&mut Settings),
    ) -> InProc {
        match Self::try_start_with(data_dir, hooks, tweak).await {
            Ok(m) => m,
            Err(e) => panic!("member failed to start: {e}"),
        }
    }

    /// As [`InProc::start`]; Err is why the member stopped before serving.
    pub async fn try_start(
        data_dir: PathBuf,
        tweak: impl FnOnce(&mut Settings),
    ) -> Result<InProc, String> {
        Self::try_start_with(data_dir, serve::TestHooks::default(), tweak).await
    }

    /// As [`InProc::try_start`], with test hooks (cut peer links).
    pub async fn try_start_with(
        data_dir: PathBuf,
        hooks: serve::TestHooks,
        tweak: impl FnOnce(&mut Settings),
    ) -> Result<InProc, String> {
        let mut s = Settings::new("default", data_dir.clone());
        let url = format!("http://127.0.0.1:{}", free_port());
        s.listen_client_urls = vec![url.clone()];
        s.advertise_client_urls = vec![url];
        // Every member listens for peers: never on etcd's default port, which tests
        // running together would share.
        s.listen_peer_urls = vec![format!("http://127.0.0.1:{}", free_port())];
        s.heartbeat = std::time::Duration::from_millis(10);
        s.election_timeout = std::time::Duration::from_millis(100);
        tweak(&mut s);
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = oneshot::channel();
        let task = tokio::spawn(serve::run_with(
            s,
            hooks,
            async move {
                let _ = stop_rx.await;
            },
            move |addrs| {
                let _ = ready_tx.send(addrs[0]);
            },
        ));
        let addr = match ready_rx.await {
            Ok(addr) => addr,
            Err(_) => {
                return Err(match task.await {
                    Ok(Err(e)) => e.to_string(),
                    other => format!("{other:?}"),
                });
            }
        };
        Ok(InProc {
            addr,
            data_dir,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }

    /// The endpoint string for clients.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A raw gRPC channel to this member (connected on first use).
    pub fn channel(&self) -> tonic::transport::Channel {
        tonic::transport::Channel::from_shared(self.endpoint())
            .expect("endpoint")
            .connect_lazy()
    }

    /// A gRPC channel with 64 KiB HTTP/2 windows: once its client stops reading, the
    /// server's sends on it block soon, as with a real stalled client.
    pub async fn small_window_channel(&self) -> tonic::transport::Channel {
        tonic::transport::Channel::from_shared(self.endpoint())
            .expect("endpoint")
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .expect("connect")
    }

    /// An etcd-client connected to this member.
    pub async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([self.endpoint()], None)
            .await
            .expect("connect")
    }

    /// Waits for the member to stop on its own; returns how it ended.
    pub async fn wait(mut self) -> Result<(), serve::ServeError> {
        let t = self.task.take().expect("task");
        t.await.expect("join")
    }

    /// Stops the member and waits for it.
    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.expect("join").expect("clean stop");
        }
    }
}

impl Drop for InProc {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The `/metrics` text of the server at `base` (`http://host:port`), fetched with curl.
pub async fn scrape(base: &str) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-s", &format!("{base}/metrics")])
        .output()
        .await
        .expect("curl (apt-get install -y curl)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A free loopback port for a server to take, clear of the ephemeral range
/// ([`oxcd_testkit::ports`]).
pub fn free_port() -> u16 {
    oxcd_testkit::ports::free_port().expect("free port")
}

/// The `oxcd` binary, without any `ETCD_*` variable inherited from the developer.
pub fn oxcd_command() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_oxcd"));
    for (k, _) in std::env::vars() {
        if k.starts_with("ETCD_") {
            c.env_remove(k);
        }
    }
    c
}

/// A running `oxcd` process; killed (SIGKILL) on drop.
pub struct OxcdProcess {
    /// The process.
    pub child: std::process::Child,
    /// Its client URL.
    pub url: String,
    /// Every line it has logged so far.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl OxcdProcess {
    /// Starts `oxcd` on `port` with `data` and waits for "ready to serve client requests".
    pub fn start(data: &std::path::Path, port: u16) -> OxcdProcess {
        Self::start_with(data, port, &[])
    }

    /// As [`OxcdProcess::start`], with more flags.
    pub fn start_with(data: &std::path::Path, port: u16, extra: &[String]) -> OxcdProcess {
        Self::spawn(data, port, extra).wait_ready()
    }

    /// Starts `oxcd` without waiting; call [`Pending::wait_ready`].
    pub fn spawn(data: &std::path::Path, port: u16, extra: &[String]) -> Pending {
        Self::spawn_at(data, &format!("http://127.0.0.1:{port}"), extra)
    }

    /// As [`OxcdProcess::spawn`], serving clients at `url` (any scheme).
    pub fn spawn_at(data: &std::path::Path, url: &str, extra: &[String]) -> Pending {
        use std::io::BufRead;
        let url = url.to_string();
        let mut child = oxcd_command()
            .arg("--data-dir")
            .arg(data)
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args(extra)
            .args(peer_listener(extra))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn oxcd");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            // Keep reading to the end so the child never blocks on a full pipe.
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("ready to serve client requests")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(());
                }
                keep.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        Pending {
            proc: OxcdProcess { child, url, log },
            ready: rx,
        }
    }
}

/// `--listen-peer-urls` on a free port unless `extra` names peer URLs or a config
/// file: every member listens for peers, and tests running together must not share
/// etcd's default port.
pub fn peer_listener(extra: &[String]) -> Vec<String> {
    if extra
        .iter()
        .any(|a| a.starts_with("--listen-peer-urls") || a.starts_with("--config-file"))
    {
        return Vec::new();
    }
    vec![
        "--listen-peer-urls".into(),
        format!("http://127.0.0.1:{}", free_port()),
    ]
}

/// A started `oxcd` that may not be serving yet.
pub struct Pending {
    proc: OxcdProcess,
    ready: std::sync::mpsc::Receiver<()>,
}

impl Pending {
    /// Waits for the readiness line.
    pub fn wait_ready(self) -> OxcdProcess {
        if let Err(e) = self.ready.recv_timeout(std::time::Duration::from_secs(30)) {
            // Disconnected: the process ended; either way its last words say why.
            let log = self.proc.log.lock().unwrap_or_else(|p| p.into_inner());
            let tail = &log[log.len().saturating_sub(40)..];
            panic!(
                "oxcd did not log readiness: {e}; its last lines:\n{}",
                tail.join("\n")
            );
        }
        self.proc
    }

    /// The process, not waiting for it to serve (a test that stops it before).
    pub fn into_process(self) -> OxcdProcess {
        self.proc
    }
}

impl OxcdProcess {
    /// The log lines containing `text`.
    pub fn logged(&self, text: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|l| l.contains(text))
            .cloned()
            .collect()
    }
}

impl Drop for OxcdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Retries a fresh put of `key` (each bounded to 300 ms: a put forwarded to an unreachable
/// leader waits for the request timeout, as in etcd) until one succeeds; returns how long
/// after `since` that was. Panics after 10 s.
pub async fn first_write_after(
    c: &mut etcd_client::Client,
    key: &str,
    since: std::time::Instant,
) -> std::time::Duration {
    use std::time::Duration;
    loop {
        let put = tokio::time::timeout(Duration::from_millis(300), c.put(key, "x", None)).await;
        if matches!(put, Ok(Ok(_))) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "no write succeeded within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Through `admin` (auth off): root (password `rootpw`) with the root role, `role` with
/// read and write on `dir/` granted to alice (password `secret`); then auth on.
pub async fn root_and_alice(admin: &mut etcd_client::Client, role: &str) {
    admin.user_add("root", "rootpw", None).await.expect("root");
    admin.role_add("root").await.expect("root role");
    admin.user_grant_role("root", "root").await.expect("grant");
    admin.role_add(role).await.expect("role");
    let perm = etcd_client::Permission::read_write("dir/").with_prefix();
    admin
        .role_grant_permission(role, perm)
        .await
        .expect("permission");
    admin
        .user_add("alice", "secret", None)
        .await
        .expect("alice");
    admin.user_grant_role("alice", role).await.expect("grant");
    admin.auth_enable().await.expect("enable");
}

/// The store's current revision as `c`'s member answers a read of `key`.
pub async fn revision_at(c: &mut etcd_client::Client, key: &str) -> i64 {
    c.get(key, None)
        .await
        .expect("get")
        .header()
        .expect("header")
        .revision()
}

/// Processes killed (SIGKILL) and reaped when dropped.
pub struct Children(pub Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits (up to 30 s) for `child` to exit with a failure; the log at `log`.
pub fn fails_with_log(mut child: std::process::Child, log: &std::path::Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} kept running",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(!status.success());
    std::fs::read_to_string(log).unwrap_or_default()
}

/// Waits (up to 30 s) until every member at `endpoints` lists exactly `names` (sorted)
/// under one cluster id.
pub async fn one_cluster_of(endpoints: &[String], names: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let want: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    loop {
        let mut seen = Vec::new();
        for ep in endpoints {
            let Ok(mut c) = etcd_client::Client::connect([ep.as_str()], None).await else {
                continue;
            };
            if let Ok(list) = c.member_list().await {
                let mut n: Vec<String> = list
                    .members()
                    .iter()
                    .map(|m| m.name().to_string())
                    .collect();
                n.sort();
                seen.push((n, list.header().map(|h| h.cluster_id()).unwrap_or(0)));
            }
        }
        if seen.len() == endpoints.len()
            && seen.iter().all(|(n, id)| *n == want && *id == seen[0].1)
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no cluster of {names:?}: {seen:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
