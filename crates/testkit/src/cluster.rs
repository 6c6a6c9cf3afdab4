//! N real `oxcd` processes on loopback, each with its own data dir, client port, peer
//! port and partitioning proxy ([`crate::proxy`]), and the faults the suite injects:
//! SIGKILL and restart, SIGSTOP/SIGCONT, partitions. A mixed cluster ([`Mixed`]) starts
//! as an etcd cluster and has some members swapped to oxcd in place, as an operator
//! swaps the binary (issue 35).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::proxy::{self, Links};

mod reconfigure;

use crate::pki::{Ca, Spec};
use crate::ports::free_port;
use crate::process;

/// How much of a member's log a failure to start shows.
const LOG_TAIL_LINES: usize = 30;

/// How to start the members.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The `oxcd` binary.
    pub binary: PathBuf,
    /// How many members.
    pub members: usize,
    /// Where their data dirs and logs go.
    pub dir: PathBuf,
    /// More flags for every member.
    pub extra_flags: Vec<String>,
    /// Client and peer traffic over TLS, with certificates from a CA made under `dir`,
    /// every member checking its clients' and peers' certificates.
    pub tls: bool,
    /// etcd members beside oxcd ones (None: every member is oxcd).
    pub mixed: Option<Mixed>,
}

/// A cluster of etcd and oxcd members: it starts as an etcd cluster, then the members
/// `oxcd` lists are stopped and started again as oxcd on their data dirs, with their
/// flags and `--emulated-version=3.5` (so the cluster stays at 3.5, in etcd's
/// vocabulary, and a restarted etcd member rejoins).
#[derive(Debug, Clone)]
pub struct Mixed {
    /// The etcd server binary.
    pub etcd: PathBuf,
    /// The members that run oxcd.
    pub oxcd: Vec<usize>,
}

/// One member.
pub struct Member {
    /// `m<i>`.
    pub name: String,
    /// Its client URL.
    pub client_url: String,
    data_dir: PathBuf,
    log: PathBuf,
    /// The server it runs: oxcd, or etcd in a mixed cluster.
    binary: PathBuf,
    flags: Vec<String>,
    child: Option<Child>,
    paused: bool,
    /// Its member id, once known (0: ask it).
    id: u64,
    /// Removed from the cluster: never restarted.
    removed: bool,
}

/// A running cluster; every process is killed on drop.
pub struct Cluster {
    /// The members, in order.
    pub members: Vec<Member>,
    binary: PathBuf,
    links: Links,
    _proxies: Vec<tokio::task::JoinHandle<()>>,
    connect: Option<etcd_client::ConnectOptions>,
    /// Flags every member gets (TLS, the config's extra flags).
    shared_flags: Vec<String>,
    /// Members replaced so far (names their new data dirs).
    replacements: usize,
}

/// Why a cluster operation failed.
pub type Result<T> = std::result::Result<T, String>;

impl Member {
    fn spawn(&mut self, index: usize) -> Result<()> {
        let child = process::spawn_logged(
            Command::new(&self.binary)
                .args(&self.flags)
                .env("OXCD_PEER_SOURCE_IP", proxy::source_ip(index).to_string()),
            &self.log,
        )?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    /// Whether the process is running (possibly paused).
    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    fn signal(&self, sig: &str) -> Result<()> {
        let Some(c) = &self.child else {
            return Err(format!("{} is not running", self.name));
        };
        process::signal(c.id(), sig)
    }

    /// Lines of its log containing `text`.
    pub fn log_lines(&self, text: &str) -> Vec<String> {
        File::open(&self.log)
            .map(|f| {
                BufReader::new(f)
                    .lines()
                    .map_while(|l| l.ok())
                    .filter(|l| l.contains(text))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The last `n` lines of its log (for a failure's message).
    pub fn log_tail(&self, n: usize) -> String {
        let lines = self.log_lines("");
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Its data dir.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

/// A CA and one certificate for every member (127.0.0.1), used for both ports; the
/// members' flags and the clients' options.
fn tls_setup(dir: &Path) -> Result<(Vec<String>, etcd_client::ConnectOptions)> {
    let ca = Ca::new(dir, "ca")?;
    let member = ca.issue(&Spec::member("member"))?;
    let client = ca.issue(&Spec::client("client", "root"))?;
    let p = |f: &Path| f.display().to_string();
    let flags = vec![
        format!("--cert-file={}", p(&member.cert)),
        format!("--key-file={}", p(&member.key)),
        format!("--trusted-ca-file={}", p(&ca.cert)),
        "--client-cert-auth".into(),
        format!("--peer-cert-file={}", p(&member.cert)),
        format!("--peer-key-file={}", p(&member.key)),
        format!("--peer-trusted-ca-file={}", p(&ca.cert)),
        "--peer-client-cert-auth".into(),
    ];
    let read = |f: &Path| std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()));
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(read(&ca.cert)?))
        .identity(etcd_client::Identity::from_pem(
            read(&client.cert)?,
            read(&client.key)?,
        ));
    Ok((flags, etcd_client::ConnectOptions::new().with_tls(tls)))
}

impl Cluster {
    /// Starts every member and waits until each serves clients.
    pub async fn start(cfg: &ClusterConfig) -> Result<Cluster> {
        let n = cfg.members;
        let io = |e: std::io::Error| e.to_string();
        let mut ports = Vec::new();
        for _ in 0..n {
            ports.push((
                free_port().map_err(io)?,
                free_port().map_err(io)?,
                free_port().map_err(io)?,
            ));
        }
        std::fs::create_dir_all(&cfg.dir).map_err(io)?;
        let (scheme, tls_flags, connect) = if cfg.tls {
            let (flags, connect) = tls_setup(&cfg.dir.join("pki"))?;
            ("https", flags, Some(connect))
        } else {
            ("http", Vec::new(), None)
        };
        let initial_cluster = (0..n)
            .map(|i| format!("m{i}={scheme}://127.0.0.1:{}", ports[i].2))
            .collect::<Vec<_>>()
            .join(",");
        let links = Links::default();
        let mut proxies = Vec::new();
        for (i, (_, peer, proxy_port)) in ports.iter().enumerate() {
            let listen: SocketAddr = ([127, 0, 0, 1], *proxy_port).into();
            let target: SocketAddr = ([127, 0, 0, 1], *peer).into();
            proxies.push(
                proxy::start(i, listen, target, links.clone())
                    .await
                    .map_err(io)?,
            );
        }
        let mut members = Vec::new();
        for (i, (client, peer, proxy_port)) in ports.iter().enumerate() {
            let name = format!("m{i}");
            let data_dir = cfg.dir.join(&name);
            let client_url = format!("{scheme}://127.0.0.1:{client}");
            let mut flags: Vec<String> = [
                "--name",
                &name,
                "--data-dir",
                &data_dir.to_string_lossy(),
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
                "--listen-peer-urls",
                &format!("{scheme}://127.0.0.1:{peer}"),
                "--initial-advertise-peer-urls",
                &format!("{scheme}://127.0.0.1:{proxy_port}"),
                "--initial-cluster",
                &initial_cluster,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            flags.extend(tls_flags.iter().cloned());
            flags.extend(cfg.extra_flags.iter().cloned());
            let binary = match &cfg.mixed {
                Some(mixed) => mixed.etcd.clone(),
                None => cfg.binary.clone(),
            };
            members.push(Member {
                log: cfg.dir.join(format!("{name}.log")),
                binary,
                name,
                client_url,
                data_dir,
                flags,
                child: None,
                paused: false,
                id: 0,
                removed: false,
            });
        }
        let mut shared_flags = tls_flags.clone();
        shared_flags.extend(cfg.extra_flags.iter().cloned());
        let mut cluster = Cluster {
            members,
            binary: cfg.binary.clone(),
            links,
            _proxies: proxies,
            connect,
            shared_flags,
            replacements: 0,
        };
        for i in 0..n {
            cluster.members[i].spawn(i)?;
        }
        for i in 0..n {
            cluster.wait_ready(i, 1).await?;
        }
        if let Some(mixed) = &cfg.mixed {
            cluster.learn_ids().await?;
            for &i in &mixed.oxcd {
                cluster.swap_to_oxcd(i).await?;
            }
        }
        Ok(cluster)
    }

    /// Asks every member its id, for the proxies to know etcd's connections by.
    async fn learn_ids(&mut self) -> Result<()> {
        for i in 0..self.members.len() {
            let id = self.member_id(i).await?;
            self.members[i].id = id;
            self.links.name_member(id, i);
        }
        Ok(())
    }

    /// Stops etcd member `i` (SIGTERM, as an operator stops it) and starts oxcd on its
    /// data dir with its flags and `--emulated-version=3.5`.
    async fn swap_to_oxcd(&mut self, i: usize) -> Result<()> {
        let m = &mut self.members[i];
        if let Some(mut c) = m.child.take() {
            process::signal(c.id(), "-TERM")?;
            c.wait().map_err(|e| e.to_string())?;
        }
        let before = m.log_lines("ready to serve client requests").len();
        m.binary = self.binary.clone();
        m.flags.push("--emulated-version=3.5".into());
        m.spawn(i)?;
        self.wait_ready(i, before + 1).await
    }

    /// Whether member `i` runs etcd.
    pub fn is_etcd(&self, i: usize) -> bool {
        self.members[i].binary != self.binary
    }

    /// Waits until member `i` has logged readiness `times` times (once per start).
    async fn wait_ready(&self, i: usize, times: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.members[i]
            .log_lines("ready to serve client requests")
            .len()
            < times
        {
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not become ready; its log ends:\n{}",
                    self.members[i].name,
                    self.members[i].log_tail(LOG_TAIL_LINES)
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// How clients connect (TLS settings, when the cluster uses TLS).
    pub fn connect_options(&self) -> Option<etcd_client::ConnectOptions> {
        self.connect.clone()
    }

    /// Every client URL.
    pub fn client_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) -> Result<()> {
        let m = &mut self.members[i];
        if let Some(mut c) = m.child.take() {
            c.kill().map_err(|e| e.to_string())?;
            let _ = c.wait();
        }
        Ok(())
    }

    /// Starts member `i` again with its data dir; waits until it serves.
    pub async fn restart(&mut self, i: usize) -> Result<()> {
        let before = self.members[i]
            .log_lines("ready to serve client requests")
            .len();
        self.members[i].spawn(i)?;
        self.wait_ready(i, before + 1).await
    }

    /// SIGSTOP member `i`.
    pub fn pause(&mut self, i: usize) -> Result<()> {
        self.members[i].signal("-STOP")?;
        self.members[i].paused = true;
        Ok(())
    }

    /// SIGCONT member `i`.
    pub fn resume(&mut self, i: usize) -> Result<()> {
        self.members[i].signal("-CONT")?;
        self.members[i].paused = false;
        Ok(())
    }

    /// Cuts `group` off from the other members.
    pub fn isolate(&self, group: &[usize]) {
        self.links.isolate(group, self.members.len());
    }

    /// Stalls the peer connections open now to and from member `i`, without closing them.
    pub fn freeze_open(&self, i: usize) {
        self.links.freeze_open(i);
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.links.heal();
    }

    /// The index of the member every reachable member names as leader, if one.
    pub async fn leader(&self) -> Option<usize> {
        for m in self.members.iter().filter(|m| m.is_up() && !m.paused) {
            let Ok(Ok(mut c)) = tokio::time::timeout(
                Duration::from_secs(1),
                etcd_client::Client::connect([m.client_url.clone()], self.connect_options()),
            )
            .await
            else {
                continue;
            };
            let Ok(Ok(st)) = tokio::time::timeout(Duration::from_secs(1), c.status()).await else {
                continue;
            };
            let leader = st.leader();
            for (i, other) in self.members.iter().enumerate() {
                let Ok(Ok(mut oc)) = tokio::time::timeout(
                    Duration::from_secs(1),
                    etcd_client::Client::connect(
                        [other.client_url.clone()],
                        self.connect_options(),
                    ),
                )
                .await
                else {
                    continue;
                };
                if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(1), oc.status()).await
                    && s.header().map(|h| h.member_id()) == Some(leader)
                {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Resumes paused members, heals links and makes sure every member runs.
    pub async fn recover(&mut self) -> Result<()> {
        self.heal();
        for i in 0..self.members.len() {
            if self.members[i].paused {
                self.resume(i)?;
            }
            if !self.members[i].is_up() && !self.members[i].removed {
                self.restart(i).await?;
            }
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                if m.paused {
                    let _ = process::signal(c.id(), "-CONT");
                }
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
