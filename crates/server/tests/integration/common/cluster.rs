//! Three in-process members on real sockets and the real peer transport.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use oxcd_config::settings::Settings;
use oxcd_server::peer::transport::PeerFaults;
use oxcd_server::start::serve::TestHooks;
use oxcd_testkit::pki::{Ca, Spec};
use oxcd_transport::TlsInfo;

use super::{InProc, free_port};

/// `--initial-cluster` for members m0..m2 on the given peer ports.
pub fn cluster_of(peers: &[u16]) -> Vec<(String, Vec<String>)> {
    cluster_with_scheme("http", peers)
}

/// As [`cluster_of`], with `scheme` peer URLs.
pub fn cluster_with_scheme(scheme: &str, peers: &[u16]) -> Vec<(String, Vec<String>)> {
    peers
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("m{i}"), vec![format!("{scheme}://127.0.0.1:{p}")]))
        .collect()
}

/// Three members whose peers talk TLS, each checking the others' certificates (one
/// certificate for 127.0.0.1 from a test CA in `dir/pki`), with peer links a test can
/// cut.
pub async fn three_peer_tls(dir: &Path, faults: Option<PeerFaults>) -> (Vec<InProc>, Vec<u16>) {
    let ca = Ca::new(&dir.join("pki"), "ca").expect("ca");
    let cert = ca
        .issue(&Spec::member("member"))
        .expect("member certificate");
    let tls = TlsInfo {
        cert_file: Some(cert.cert.clone()),
        key_file: Some(cert.key.clone()),
        trusted_ca_file: Some(ca.cert.clone()),
        client_cert_auth: true,
        ..TlsInfo::default()
    };
    let hooks = TestHooks {
        peer_faults: faults,
    };
    three_on("https", dir, hooks, move |s| s.peer_tls = tls.clone()).await
}

/// Starts three members named m0..m2 in `dir`, all at once (each waits for a leader).
pub async fn three(dir: &Path) -> (Vec<InProc>, Vec<u16>) {
    three_with(dir, None).await
}

/// As [`three`], with peer links that a test can cut.
pub async fn three_with(dir: &Path, faults: Option<PeerFaults>) -> (Vec<InProc>, Vec<u16>) {
    let hooks = TestHooks {
        peer_faults: faults,
    };
    three_hooked(dir, hooks, |_| {}).await
}

/// As [`three`], with `tweak` applied to every member's settings.
pub async fn three_tweaked(
    dir: &Path,
    tweak: impl Fn(&mut Settings) + Clone,
) -> (Vec<InProc>, Vec<u16>) {
    three_hooked(dir, TestHooks::default(), tweak).await
}

/// As [`three_tweaked`], with test hooks.
pub async fn three_hooked(
    dir: &Path,
    hooks: TestHooks,
    tweak: impl Fn(&mut Settings) + Clone,
) -> (Vec<InProc>, Vec<u16>) {
    three_on("http", dir, hooks, tweak).await
}

async fn three_on(
    scheme: &str,
    dir: &Path,
    hooks: TestHooks,
    tweak: impl Fn(&mut Settings) + Clone,
) -> (Vec<InProc>, Vec<u16>) {
    let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cluster = cluster_with_scheme(scheme, &peers);
    let start = |i: usize| {
        let cluster = cluster.clone();
        let tweak = tweak.clone();
        InProc::start_with(dir.join(format!("m{i}")), hooks.clone(), move |s| {
            tweak(s);
            configure(s, i, &cluster)
        })
    };
    let (a, b, c) = tokio::join!(start(0), start(1), start(2));
    (vec![a, b, c], peers)
}

/// Makes `s` member `i` of `cluster`.
pub fn configure(s: &mut Settings, i: usize, cluster: &[(String, Vec<String>)]) {
    s.name = format!("m{i}");
    s.peer_urls = cluster[i].1.clone();
    s.listen_peer_urls = cluster[i].1.clone();
    s.initial_cluster = cluster.to_vec();
}

/// The index of the member that reports itself leader.
pub async fn leader_index(members: &[InProc]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for (i, m) in members.iter().enumerate() {
            let mut c = m.client().await;
            if let Ok(st) = c.status().await
                && st.leader() != 0
                && st.leader() == st.header().map(|h| h.member_id()).unwrap_or(0)
            {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no leader elected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops every member and starts them again together from their data dirs; `names[i]`
/// is the index in the cluster of `members[i]` (their order may have changed).
pub async fn restart_all(
    members: Vec<InProc>,
    peers: &[u16],
    names: &[usize],
    tweak: impl Fn(&mut Settings) + Clone,
) -> Vec<InProc> {
    let dirs: Vec<_> = members.iter().map(|m| m.data_dir.clone()).collect();
    for m in members {
        m.stop().await;
    }
    let cluster = cluster_of(peers);
    let starts = dirs.into_iter().zip(names).map(|(dir, &name)| {
        let (cluster, tweak) = (cluster.clone(), tweak.clone());
        InProc::start(dir, move |s| {
            tweak(s);
            configure(s, name, &cluster)
        })
    });
    futures::future::join_all(starts).await
}

/// Snapshots every 20 entries, keeping 5 to catch up from: a member away for a few dozen
/// writes comes back by snapshot.
pub fn quick_snapshots(s: &mut Settings) {
    s.snapshot_count = 20;
    s.snapshot_catchup_entries = 5;
}

/// Three members with [`quick_snapshots`], one follower of which is stopped.
pub struct OneAway {
    /// The running members.
    pub members: Vec<InProc>,
    /// Everyone's peer ports.
    pub peers: Vec<u16>,
    /// The stopped member's index in the cluster.
    pub away: usize,
    away_dir: PathBuf,
}

impl OneAway {
    /// Starts three members in `dir` and stops a follower.
    pub async fn start(dir: &Path) -> OneAway {
        let (mut members, peers) = three_tweaked(dir, quick_snapshots).await;
        let away = (leader_index(&members).await + 1) % 3;
        let away_dir = members[away].data_dir.clone();
        members.remove(away).stop().await;
        OneAway {
            members,
            peers,
            away,
            away_dir,
        }
    }

    /// Starts the stopped member again from its data dir, last in `members`.
    pub async fn bring_back(&mut self) {
        let (away, cluster) = (self.away, cluster_of(&self.peers));
        let back = InProc::start(self.away_dir.clone(), move |s| {
            quick_snapshots(s);
            configure(s, away, &cluster)
        })
        .await;
        self.members.push(back);
    }

    /// Stops every member and starts them all again together (see [`restart_all`]).
    pub async fn restart_all(self) -> Vec<InProc> {
        let away = self.away;
        let names: Vec<usize> = (0..3).filter(|i| *i != away).chain([away]).collect();
        restart_all(self.members, &self.peers, &names, quick_snapshots).await
    }
}

/// Each member's Maintenance.Hash once they agree (a linearizable read on each first:
/// it has applied everything committed), or as they are after 10 s; connected with
/// `opts` (a user, with auth on).
pub async fn state_hashes(
    members: &[InProc],
    opts: Option<etcd_client::ConnectOptions>,
) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut hashes = Vec::new();
        for m in members {
            let mut c = etcd_client::Client::connect([m.endpoint()], opts.clone())
                .await
                .expect("connect");
            c.get("settle", None).await.expect("linearizable read");
            hashes.push(c.hash().await.expect("hash").hash());
        }
        if hashes.windows(2).all(|w| w[0] == w[1]) || Instant::now() > deadline {
            return hashes;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Retries `f` while it fails with "unhealthy cluster" (the strict check wants every
/// voter connected for 5 s) or "not enough started members" (a member just added has
/// not connected yet), up to 30 s.
pub async fn healthy_retry<T, F, Fut>(mut f: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match f().await {
            Err(e)
                if (e.to_string().contains("unhealthy cluster")
                    || e.to_string().contains("not enough started members"))
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

/// Waits until every member has `key` (serializable reads, 15 s at most), then checks
/// that HashKV agrees.
pub async fn converge(members: &[&InProc], key: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    for m in members {
        let mut c = m.client().await;
        while c
            .get(
                key,
                Some(etcd_client::GetOptions::new().with_serializable()),
            )
            .await
            .map(|r| r.count())
            .unwrap_or(0)
            == 0
        {
            assert!(Instant::now() < deadline, "a member did not catch up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let rev = members[0]
        .client()
        .await
        .get(key, None)
        .await
        .expect("get")
        .header()
        .expect("header")
        .revision();
    let mut hashes = Vec::new();
    for m in members {
        hashes.push(m.client().await.hash_kv(rev).await.expect("hashkv").hash());
    }
    assert!(
        hashes.iter().all(|h| *h == hashes[0]),
        "members diverged: {hashes:?}"
    );
}
