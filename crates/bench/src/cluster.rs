//! The launcher of every side-by-side benchmark (compare, learner-catchup, backup,
//! gateway): a cluster of either server on loopback (3 members unless asked otherwise),
//! started with the same etcd flags (oxcd takes etcd's flags, so one launcher serves
//! both): free ports, one data dir per member under one parent (same disk for both
//! systems), logs beside them. More members can join it later as etcd's runbook adds
//! them (`--initial-cluster-state existing`).
//!
//! Invariant: every process it started is killed when the cluster is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use oxcd_api::etcdserverpb::{RangeRequest, StatusRequest};
use oxcd_client::{Client, ConnectOptions};
use oxcd_testkit::process;

use crate::conns::Global;

/// Settings both systems get.
#[derive(Debug, Clone)]
pub struct Settings {
    pub heartbeat_ms: u64,
    pub election_ms: u64,
    pub snapshot_count: u64,
    pub quota_bytes: u64,
    /// Client and peer TLS with these certificates (the same for both systems).
    pub tls: Option<TlsFiles>,
}

impl Settings {
    /// The settings of the side-by-side benchmarks: heartbeat 100 ms, election 1000 ms,
    /// snapshot count 100,000, no TLS, a quota of `quota_bytes`.
    pub fn plain(quota_bytes: u64) -> Settings {
        Settings {
            heartbeat_ms: 100,
            election_ms: 1000,
            snapshot_count: 100_000,
            quota_bytes,
            tls: None,
        }
    }
}

/// A byte figure of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`).
pub fn proc_status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak RSS of `pid` to its RSS now (Linux: `5` to `clear_refs`).
pub fn reset_peak_rss(pid: u32) -> Result<(), String> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .map_err(|e| format!("reset the peak RSS of {pid}: {e}"))
}

/// The load generator's flags for `clients` clients over `conns` connections to
/// `endpoints`, with `tls`'s client certificate and as `user` (`name:password`) if
/// given. One connection goes to the leader (on both systems, so single-client figures
/// do not depend on where an election landed).
pub fn load_flags(
    endpoints: &[String],
    clients: usize,
    conns: usize,
    tls: Option<&TlsFiles>,
    user: Option<&str>,
) -> Global {
    Global {
        endpoints: endpoints.to_vec(),
        conns,
        clients,
        target_leader: conns == 1,
        user: user.map(str::to_string),
        // Generous: dialing is not what is measured, and a TLS handshake to a member
        // busy starting up can take seconds on a loaded machine.
        dial_timeout: 10,
        cacert: tls.map(|t| t.ca.clone()),
        cert: tls.map(|t| t.client_cert.clone()),
        key_file: tls.map(|t| t.client_key.clone()),
        insecure_skip_tls_verify: false,
        json: false,
    }
}

/// Certificates for a TLS run: one CA, one member certificate (for 127.0.0.1) used on
/// both ports, one client certificate.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub member_cert: PathBuf,
    pub member_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TlsFiles {
    /// Makes the certificates in `dir`.
    pub fn make(dir: &Path) -> Result<TlsFiles, String> {
        use oxcd_testkit::pki::{Ca, Spec};
        let ca = Ca::new(dir, "ca")?;
        let member = ca.issue(&Spec::member("member"))?;
        let client = ca.issue(&Spec::client("client", "root"))?;
        Ok(TlsFiles {
            ca: ca.cert.clone(),
            member_cert: member.cert,
            member_key: member.key,
            client_cert: client.cert,
            client_key: client.key,
        })
    }

    /// The server flags: client and peer TLS, certificates checked both ways.
    fn flags(&self) -> Vec<String> {
        let p = |f: &PathBuf| f.display().to_string();
        vec![
            format!("--cert-file={}", p(&self.member_cert)),
            format!("--key-file={}", p(&self.member_key)),
            format!("--trusted-ca-file={}", p(&self.ca)),
            "--client-cert-auth".into(),
            format!("--peer-cert-file={}", p(&self.member_cert)),
            format!("--peer-key-file={}", p(&self.member_key)),
            format!("--peer-trusted-ca-file={}", p(&self.ca)),
            "--peer-client-cert-auth".into(),
        ]
    }

    /// The client's TLS settings.
    pub fn client(&self) -> oxcd_client::TlsConfig {
        oxcd_client::TlsConfig {
            ca_file: Some(self.ca.clone()),
            cert_file: Some(self.client_cert.clone()),
            key_file: Some(self.client_key.clone()),
            insecure_skip_verify: false,
        }
    }
}

/// One member process.
pub struct Member {
    pub name: String,
    pub client_url: String,
    pub peer_url: String,
    pub data_dir: PathBuf,
    flags: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

/// A running cluster.
pub struct Cluster {
    pub binary: PathBuf,
    pub members: Vec<Member>,
    /// The TLS files, when it serves TLS.
    pub tls: Option<TlsFiles>,
    /// The parent of the members' data dirs and logs.
    dir: PathBuf,
    /// What every member is started with.
    settings: Settings,
}

fn free_port() -> Result<u16, String> {
    oxcd_testkit::ports::free_port().map_err(|e| format!("no free port: {e}"))
}

impl Member {
    fn spawn(&mut self, binary: &Path) -> Result<(), String> {
        let child = process::spawn_logged(Command::new(binary).args(&self.flags), &self.log)?;
        self.child = Some(child);
        Ok(())
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Stops the process with SIGTERM (graceful), waiting up to 10 s, then SIGKILL.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = process::signal(child.id(), "-TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// CPU time the process has used so far in user space and in the kernel, while
    /// running.
    pub fn cpu_split(&self) -> Option<(Duration, Duration)> {
        cpu_split_of(&self.pid()?.to_string())
    }

    /// Peak resident set size (VmHWM) in bytes, while running.
    pub fn peak_rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
}

/// CPU time (user + system) of process `pid` ("self" for this one), from
/// `/proc/<pid>/stat` (fields 14 and 15, in USER_HZ = 100 ticks per second on Linux).
pub fn cpu_time_of(pid: &str) -> Option<Duration> {
    cpu_split_of(pid).map(|(user, sys)| user + sys)
}

/// CPU time of process `pid` in user space and in the kernel, from `/proc/<pid>/stat`
/// (fields 14 and 15, in USER_HZ = 100 ticks per second on Linux).
pub fn cpu_split_of(pid: &str) -> Option<(Duration, Duration)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((
        Duration::from_millis(utime * 10),
        Duration::from_millis(stime * 10),
    ))
}

/// Disk space the files under `dir` take, as `du` counts it (allocated blocks, so
/// preallocated files count whole and sparse holes do not).
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()) + m.blocks() * 512,
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// The flags of member `name` that do not depend on how it joins.
fn member_flags(
    name: &str,
    data_dir: &Path,
    client_url: &str,
    peer_url: &str,
    s: &Settings,
) -> Vec<String> {
    let mut flags = vec![
        format!("--name={name}"),
        format!("--data-dir={}", data_dir.display()),
        format!("--listen-client-urls={client_url}"),
        format!("--advertise-client-urls={client_url}"),
        format!("--listen-peer-urls={peer_url}"),
        format!("--initial-advertise-peer-urls={peer_url}"),
        "--initial-cluster-token=bench".to_string(),
        format!("--heartbeat-interval={}", s.heartbeat_ms),
        format!("--election-timeout={}", s.election_ms),
        format!("--snapshot-count={}", s.snapshot_count),
        format!("--quota-backend-bytes={}", s.quota_bytes),
    ];
    flags.extend(s.tls.iter().flat_map(TlsFiles::flags));
    flags
}

/// Total size of the files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

async fn client(url: &str, tls: Option<&TlsFiles>) -> Result<Client, String> {
    let opts = ConnectOptions {
        dial_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(2),
        tls: tls.map(TlsFiles::client),
        ..ConnectOptions::default()
    };
    Client::connect(&[url.to_string()], &opts)
        .await
        .map_err(|e| e.to_string())
}

impl Cluster {
    /// Starts three members of `binary` with data under `dir`.
    pub fn start(binary: &Path, dir: &Path, s: &Settings) -> Result<Cluster, String> {
        Cluster::start_members(binary, dir, s, 3)
    }

    /// Starts `members` members (at least one) of `binary` with data under `dir`.
    pub fn start_members(
        binary: &Path,
        dir: &Path,
        s: &Settings,
        members: usize,
    ) -> Result<Cluster, String> {
        Cluster::start_members_with(binary, dir, s, members, &[])
    }

    /// As [`Cluster::start_members`], each member given `extra` flags too (a flag one
    /// system has and the other does not).
    pub fn start_members_with(
        binary: &Path,
        dir: &Path,
        s: &Settings,
        members: usize,
        extra: &[String],
    ) -> Result<Cluster, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cluster = Cluster {
            binary: binary.to_path_buf(),
            members: Vec::new(),
            tls: s.tls.clone(),
            dir: dir.to_path_buf(),
            settings: s.clone(),
        };
        for i in 0..members.max(1) {
            cluster.prepare_member(&format!("m{i}"))?;
        }
        let initial = cluster.initial_cluster();
        for m in &mut cluster.members {
            m.flags.push(format!("--initial-cluster={initial}"));
            m.flags.push("--initial-cluster-state=new".to_string());
            m.flags.extend(extra.iter().cloned());
            m.spawn(binary)?;
        }
        Ok(cluster)
    }

    /// `name=peerURL` of every member, comma separated: the `--initial-cluster` of a
    /// cluster of exactly these members.
    pub fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Adds a member `name` that is not started yet: free ports, its data dir and log
    /// under the cluster's dir. Returns its index; [`Cluster::join`] starts it.
    pub fn prepare_member(&mut self, name: &str) -> Result<usize, String> {
        let scheme = if self.settings.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let client_url = format!("{scheme}://127.0.0.1:{}", free_port()?);
        let peer_url = format!("{scheme}://127.0.0.1:{}", free_port()?);
        let data_dir = self.dir.join(name);
        let flags = member_flags(name, &data_dir, &client_url, &peer_url, &self.settings);
        self.members.push(Member {
            name: name.to_string(),
            client_url,
            peer_url,
            log: self.dir.join(format!("{name}.log")),
            data_dir,
            flags,
            child: None,
        });
        Ok(self.members.len() - 1)
    }

    /// Starts prepared member `i` joining the running cluster (already told of it by a
    /// MemberAdd) as etcd's runbook does: `--initial-cluster-state existing` and
    /// `--initial-cluster` naming every member, itself included.
    pub fn join(&mut self, i: usize, initial_cluster: &str) -> Result<(), String> {
        let binary = self.binary.clone();
        self.join_with(i, initial_cluster, &binary)
    }

    /// As [`Cluster::join`], the member running `binary` (an oxcd member joining an etcd
    /// cluster: oxcd takes etcd's flags).
    pub fn join_with(
        &mut self,
        i: usize,
        initial_cluster: &str,
        binary: &Path,
    ) -> Result<(), String> {
        let m = &mut self.members[i];
        m.flags.push(format!("--initial-cluster={initial_cluster}"));
        m.flags.push("--initial-cluster-state=existing".to_string());
        m.spawn(binary)
    }

    /// The index of the member that is leader, with its member id and its term (from
    /// the members' Status, asked in turn).
    pub async fn leader(&self) -> Result<(usize, u64, u64), String> {
        for (i, m) in self.members.iter().enumerate() {
            let Ok(c) = client(&m.client_url, self.tls.as_ref()).await else {
                continue;
            };
            let Ok(s) = c.maintenance().status(StatusRequest {}).await else {
                continue;
            };
            let s = s.into_inner();
            let id = s.header.map(|h| h.member_id).unwrap_or_default();
            if s.leader != 0 && s.leader == id {
                return Ok((i, id, s.raft_term));
            }
        }
        Err("no member is leader".into())
    }

    /// Waits until every member answers Status and knows a leader.
    pub async fn wait_ready(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        for m in &self.members {
            loop {
                if let Ok(c) = client(&m.client_url, self.tls.as_ref()).await
                    && let Ok(s) = c.maintenance().status(StatusRequest {}).await
                    && s.get_ref().leader != 0
                {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("{} not ready within {within:?}", m.name));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }

    /// The client URLs, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// The index of the member that is not the leader (the first such).
    pub async fn a_follower(&self) -> Result<usize, String> {
        for (i, m) in self.members.iter().enumerate() {
            let c = client(&m.client_url, self.tls.as_ref()).await?;
            if !crate::conns::is_leader(&c).await? {
                return Ok(i);
            }
        }
        Err("no follower found".into())
    }

    /// Stops member `i` gracefully, starts it again and measures the time from its
    /// start until it answers a serializable read of `key` holding `count` keys from
    /// its own state, i.e. it has loaded its data and caught up.
    pub async fn restart_time(
        &mut self,
        i: usize,
        key: &[u8],
        end: &[u8],
        count: i64,
    ) -> Result<Duration, String> {
        let binary = self.binary.clone();
        let tls = self.tls.clone();
        let m = &mut self.members[i];
        m.stop();
        let start = Instant::now();
        m.spawn(&binary)?;
        let url = m.client_url.clone();
        let deadline = start + Duration::from_secs(300);
        loop {
            if let Ok(c) = client(&url, tls.as_ref()).await {
                let req = RangeRequest {
                    key: key.to_vec(),
                    range_end: end.to_vec(),
                    serializable: true,
                    count_only: true,
                    ..RangeRequest::default()
                };
                if let Ok(r) = c.kv().range(req).await
                    && r.get_ref().count >= count
                {
                    return Ok(start.elapsed());
                }
            }
            if Instant::now() > deadline {
                return Err(format!("member {i} not back within 300 s"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
