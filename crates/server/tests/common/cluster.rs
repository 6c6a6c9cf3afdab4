//! Three in-process members on real sockets and the real peer transport.

use std::path::Path;
use std::time::{Duration, Instant};

use oxcd_server::peer::transport::PeerFaults;
use oxcd_server::settings::Settings;

use super::{InProc, free_port};

/// `--initial-cluster` for members m0..m2 on the given peer ports.
pub fn cluster_of(peers: &[u16]) -> Vec<(String, Vec<String>)> {
    peers
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("m{i}"), vec![format!("http://127.0.0.1:{p}")]))
        .collect()
}

/// Starts three members named m0..m2 in `dir`, all at once (each waits for a leader).
pub async fn three(dir: &Path) -> (Vec<InProc>, Vec<u16>) {
    three_with(dir, None).await
}

/// As [`three`], with peer links that a test can cut.
pub async fn three_with(dir: &Path, faults: Option<PeerFaults>) -> (Vec<InProc>, Vec<u16>) {
    three_tweaked(dir, move |s| s.peer_faults = faults.clone()).await
}

/// As [`three`], with `tweak` applied to every member's settings.
pub async fn three_tweaked(
    dir: &Path,
    tweak: impl Fn(&mut Settings) + Clone,
) -> (Vec<InProc>, Vec<u16>) {
    let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cluster = cluster_of(&peers);
    let start = |i: usize| {
        let cluster = cluster.clone();
        let tweak = tweak.clone();
        InProc::start(dir.join(format!("m{i}")), move |s| {
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
