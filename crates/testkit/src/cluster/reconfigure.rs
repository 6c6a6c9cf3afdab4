//! Membership changes on a running process cluster, as an operator makes them with
//! etcdctl: `member add` through a running member, then the new process started with
//! `--initial-cluster` from the answer and `--initial-cluster-state existing`; `member
//! remove`, after which the removed process stops by itself; `member promote`.
//! Members keep their index for life: a removed member stays in the list, not running.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use etcd_client::{Client, MemberAddOptions};

use super::{Cluster, Member, Result};
use crate::ports::free_port;
use crate::proxy;

/// How long a membership change may be refused as "unhealthy cluster" (the strict
/// check wants every voter connected for 5 s) before it fails.
const HEALTHY_WITHIN: Duration = Duration::from_secs(30);

/// Where a new member lives.
struct Seat {
    name: String,
    client_url: String,
    listen_peer: String,
    peer_url: String,
    data_dir: PathBuf,
    log: PathBuf,
}

impl Cluster {
    /// A client of a running member: the `turn`-th one that answers (turns rotate
    /// over the members, so a retry asks another one: a learner refuses requests).
    async fn any_client(&self, turn: usize) -> Result<Client> {
        let up: Vec<&Member> = self
            .members
            .iter()
            .filter(|m| m.is_up() && !m.paused)
            .collect();
        for k in 0..up.len() {
            let m = up[(turn + k) % up.len()];
            if let Ok(Ok(c)) = tokio::time::timeout(
                Duration::from_secs(2),
                Client::connect([m.client_url.clone()], self.connect_options()),
            )
            .await
            {
                return Ok(c);
            }
        }
        Err("no running member to ask".into())
    }

    /// Runs a membership request, retried while the cluster is "unhealthy" (a member
    /// connected for less than 5 s) or without a leader, up to [`HEALTHY_WITHIN`].
    async fn reconfigure<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        let mut turn = 0;
        loop {
            let c = self.any_client(turn).await?;
            turn += 1;
            match tokio::time::timeout(Duration::from_secs(10), f(c)).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    let text = e.to_string();
                    let retry = [
                        "unhealthy cluster",
                        "no leader",
                        "leader changed",
                        "timed out",
                        "not supported for learner",
                    ]
                    .iter()
                    .any(|t| text.contains(t));
                    if !retry || Instant::now() > deadline {
                        return Err(format!("{what}: {text}"));
                    }
                }
                Err(_) if Instant::now() <= deadline => {}
                Err(_) => return Err(format!("{what}: timed out")),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Adds a member (a learner when `learner`) with an empty data dir under `dir` and
    /// starts it; returns its index once it serves.
    pub async fn add_member(&mut self, dir: &Path, learner: bool) -> Result<usize> {
        let i = self.members.len();
        let io = |e: std::io::Error| e.to_string();
        let (client, peer, proxy_port) = (
            free_port().map_err(io)?,
            free_port().map_err(io)?,
            free_port().map_err(io)?,
        );
        let listen = ([127, 0, 0, 1], proxy_port).into();
        let target = ([127, 0, 0, 1], peer).into();
        self._proxies.push(
            proxy::start(i, listen, target, self.links.clone())
                .await
                .map_err(io)?,
        );
        let scheme = self.scheme();
        let seat = Seat {
            name: format!("m{i}"),
            client_url: format!("{scheme}://127.0.0.1:{client}"),
            listen_peer: format!("{scheme}://127.0.0.1:{peer}"),
            peer_url: format!("{scheme}://127.0.0.1:{proxy_port}"),
            data_dir: dir.join(format!("m{i}")),
            log: dir.join(format!("m{i}.log")),
        };
        let (id, flags) = self.admit(&seat, learner).await?;
        self.members.push(Member {
            log: seat.log,
            binary: self.binary.clone(),
            name: seat.name,
            client_url: seat.client_url,
            data_dir: seat.data_dir,
            flags,
            child: None,
            paused: false,
            id,
            removed: false,
        });
        self.start_new(i).await?;
        Ok(i)
    }

    /// Replaces member `i` as an operator replaces a failed machine at the same
    /// address: removes it, adds a member with the same client and peer URLs (a learner
    /// first, promoted once caught up, when `learner`) and starts it with an empty data
    /// dir. The member keeps its index.
    pub async fn replace_member(&mut self, i: usize, learner: bool) -> Result<()> {
        self.remove_member(i).await?;
        let m = &self.members[i];
        let generation = self.replacements;
        self.replacements += 1;
        let flag = |name: &str| -> Result<String> {
            m.flags
                .iter()
                .position(|f| f == name)
                .and_then(|p| m.flags.get(p + 1))
                .cloned()
                .ok_or_else(|| format!("{} has no {name}", m.name))
        };
        let base = m
            .data_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let seat = Seat {
            name: m.name.clone(),
            client_url: m.client_url.clone(),
            listen_peer: flag("--listen-peer-urls")?,
            peer_url: flag("--initial-advertise-peer-urls")?,
            data_dir: base.join(format!("{}-r{generation}", m.name)),
            log: base.join(format!("{}-r{generation}.log", m.name)),
        };
        let (id, flags) = self.admit(&seat, learner).await?;
        let m = &mut self.members[i];
        m.data_dir = seat.data_dir;
        m.log = seat.log;
        m.flags = flags;
        m.id = id;
        m.removed = false;
        self.start_new(i).await?;
        if learner {
            self.promote(i, Duration::from_secs(60)).await?;
        }
        Ok(())
    }

    fn scheme(&self) -> &'static str {
        if self.connect.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Starts the new member `i` and waits until it serves.
    async fn start_new(&mut self, i: usize) -> Result<()> {
        self.members[i].spawn(i)?;
        self.wait_ready(i, 1).await
    }

    /// `member add` for `seat`; returns the new member's id and its flags, with
    /// `--initial-cluster` built from the answer as etcdctl prints it.
    async fn admit(&self, seat: &Seat, learner: bool) -> Result<(u64, Vec<String>)> {
        let name = seat.name.clone();
        let peer_url = seat.peer_url.clone();
        let added = self
            .reconfigure(&format!("member add {name}"), |mut c| {
                let urls = vec![peer_url.clone()];
                let opts = learner.then(|| MemberAddOptions::new().with_is_learner());
                async move { c.member_add(urls, opts).await }
            })
            .await?;
        let id = added.member().map(|m| m.id()).unwrap_or(0);
        // etcdctl's ETCD_INITIAL_CLUSTER: every started member by name, the new one too.
        let initial_cluster = added
            .member_list()
            .iter()
            .filter_map(|m| {
                let n = if m.id() == id {
                    name.as_str()
                } else {
                    m.name()
                };
                (!n.is_empty()).then(|| {
                    m.peer_urls()
                        .iter()
                        .map(|u| format!("{n}={u}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
            })
            .collect::<Vec<_>>()
            .join(",");
        let mut flags: Vec<String> = [
            "--name",
            &name,
            "--data-dir",
            &seat.data_dir.to_string_lossy(),
            "--listen-client-urls",
            &seat.client_url,
            "--advertise-client-urls",
            &seat.client_url,
            "--listen-peer-urls",
            &seat.listen_peer,
            "--initial-advertise-peer-urls",
            &seat.peer_url,
            "--initial-cluster",
            &initial_cluster,
            "--initial-cluster-state",
            "existing",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        flags.extend(self.shared_flags.iter().cloned());
        Ok((id, flags))
    }

    /// Removes member `i` from the cluster and waits until its process stops by itself.
    pub async fn remove_member(&mut self, i: usize) -> Result<()> {
        let id = self.member_id(i).await?;
        self.reconfigure(
            &format!("member remove {}", self.members[i].name),
            |mut c| async move { c.member_remove(id).await },
        )
        .await?;
        self.members[i].removed = true;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let m = &mut self.members[i];
            let Some(child) = m.child.as_mut() else {
                return Ok(());
            };
            if let Ok(Some(_)) = child.try_wait() {
                m.child = None;
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{} did not stop after its removal", m.name));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Promotes the learner `i`, retried until it has caught up (up to `within`).
    pub async fn promote(&self, i: usize, within: Duration) -> Result<()> {
        let id = self.member_id(i).await?;
        let deadline = Instant::now() + within;
        loop {
            match self
                .reconfigure("member promote", |mut c| async move {
                    c.member_promote(id).await
                })
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.contains("in sync with leader") && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Member `i`'s id (asked once, then remembered).
    pub async fn member_id(&self, i: usize) -> Result<u64> {
        if self.members[i].id != 0 {
            return Ok(self.members[i].id);
        }
        let mut c = Client::connect([self.members[i].client_url.clone()], self.connect_options())
            .await
            .map_err(|e| e.to_string())?;
        let st = c.status().await.map_err(|e| e.to_string())?;
        st.header()
            .map(|h| h.member_id())
            .ok_or_else(|| "no header".to_string())
    }

    /// The indexes of the members in the cluster (not removed).
    pub fn current(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|i| !self.members[*i].removed)
            .collect()
    }
}
