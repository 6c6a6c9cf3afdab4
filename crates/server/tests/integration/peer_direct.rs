//! Direct raft links between oxcd members (`oxcd_server::peer::direct`): members that
//! open them and members that keep gRPC streams replicate together, links come back
//! after a restart without leaving threads behind, a link is refused exactly where a
//! gRPC peer stream is, a broken stream of frames harms nothing, and an etcd member's
//! peer port does not offer them (etcd 3.5's peer handler answers 404 for any path it
//! does not route: `server/etcdserver/api/etcdhttp/peer.go` `newPeerHandler`), so the
//! sender keeps its gRPC stream and then etcd's own protocol.

use std::io::Write;
use std::time::{Duration, Instant};

use oxcd_raft::{Message, MessageType};
use oxcd_server::peer::direct::frame;
use oxcd_server::peer::direct::handshake::{self, HandshakeError};
use oxcd_server::peer::transport::PeerFaults;
use oxcd_server::peer::{PeerDialer, Refusal};
use oxcd_server::start::serve::TestHooks;

use crate::common::cluster::{cluster_of, configure, converge, three_peer_tls};
use crate::common::etcd::start_etcd_with_peer;
use crate::common::{InProc, free_port};

const WAIT: Duration = Duration::from_secs(15);

/// Threads of this process whose name starts with `prefix` (nextest runs each test in
/// a process of its own).
fn threads_named(prefix: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Waits until the process runs `links` writer threads and `readers` readers of
/// direct links (plain links read by a raft thread, TLS links by threads of their own).
async fn wait_for_links(links: usize, readers: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = (
            threads_named("peer-link-"),
            threads_named("peer-read-") + oxcd_server::peer::direct::inlet::live(),
        );
        if now == (links, readers) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "direct links (writers, readers): {now:?}, expected ({links}, {readers})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn put_through(members: &[&InProc], prefix: &str, n: usize) {
    for i in 0..n {
        let mut c = members[i % members.len()].client().await;
        c.put(format!("{prefix}{i}"), vec![b'v'; 100], None)
            .await
            .expect("put");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_with_and_without_direct_links_replicate_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cluster = cluster_of(&peers);
    // Member 2 sends over gRPC streams only, as an oxcd from before direct links; it
    // still accepts the links members 0 and 1 open to it.
    let hooks = |i: usize| TestHooks {
        peer_faults: (i == 2).then(PeerFaults::grpc_only),
    };
    let start = |i: usize| {
        let cluster = cluster.clone();
        InProc::start_with(dir.path().join(format!("m{i}")), hooks(i), move |s| {
            configure(s, i, &cluster)
        })
    };
    let (a, b, c) = tokio::join!(start(0), start(1), start(2));
    // Members 0 and 1 each write a link to the two others: 4 writers, 4 readers.
    wait_for_links(4, 4).await;
    put_through(&[&a, &b, &c], "k", 300).await;
    converge(&[&a, &b, &c], "k299").await;

    // A member stopped and started again: its links and its peers' links to it go
    // down and come back, and no thread of the stopped member's links stays behind.
    a.stop().await;
    put_through(&[&b, &c], "while-away-", 50).await;
    let cluster0 = cluster.clone();
    let a = InProc::start_with(dir.path().join("m0"), hooks(0), move |s| {
        configure(s, 0, &cluster0)
    })
    .await;
    wait_for_links(4, 4).await;
    put_through(&[&a, &b, &c], "after-", 100).await;
    converge(&[&a, &b, &c], "after-99").await;
    for m in [a, b, c] {
        m.stop().await;
    }
    wait_for_links(0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_on_tls_peer_urls_talk_over_direct_links() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = three_peer_tls(dir.path(), None).await;
    // Each member writes a TLS link to each of the two others.
    wait_for_links(6, 6).await;
    let all: Vec<&InProc> = members.iter().collect();
    put_through(&all, "tls-", 300).await;
    converge(&all, "tls-299").await;
    for m in members {
        m.stop().await;
    }
    wait_for_links(0, 0).await;
}

/// The headers a member of cluster `cluster` sends as member `from`, with `versions`
/// (server, minimum cluster) when given.
fn headers(
    cluster: &str,
    from: &str,
    versions: Option<(&str, &str)>,
) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("x-oxcd-cluster-id", cluster.to_owned()),
        ("x-oxcd-from", from.to_owned()),
    ];
    if let Some((server, min)) = versions {
        h.push(("x-server-version", server.to_owned()));
        h.push(("x-min-cluster-version", min.to_owned()));
    }
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_link_is_refused_where_a_peer_stream_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peer = free_port();
    let url = format!("http://127.0.0.1:{peer}");
    let member = InProc::start(dir.path().join("m"), |s| {
        s.listen_peer_urls = vec![url.clone()];
        s.peer_urls = vec![url.clone()];
        s.initial_cluster = vec![("default".into(), vec![url.clone()])];
    })
    .await;
    let cluster = format!(
        "{:x}",
        member
            .client()
            .await
            .member_list()
            .await
            .expect("member list")
            .header()
            .expect("header")
            .cluster_id()
    );
    let open = |headers: Vec<(&'static str, String)>| {
        let url = url.clone();
        async move {
            handshake::open(
                &PeerDialer::default(),
                &url,
                &headers,
                Duration::from_secs(2),
            )
            .await
        }
    };
    let refusal = |r: Result<handshake::Opened, HandshakeError>| match r {
        Err(HandshakeError::Refused(refusal)) => refusal,
        Err(e) => panic!("expected a refusal, got {e:?}"),
        Ok(_) => panic!("expected a refusal, got a link"),
    };
    // Another cluster's member: etcd's "cluster ID mismatch".
    let answer = open(headers("deadbeef", "1", None)).await;
    assert_eq!(
        refusal(answer),
        Refusal::Etcd(oxcd_api::errors::EtcdError::ClusterIdMismatch)
    );
    // A sender too old, or one that needs a newer cluster (etcd 3.6's
    // rafthttp/util.go checkVersionCompatibility, read before the cluster id).
    for versions in [("2.3.8", "2.0.0"), ("3.8.0", "3.7.0")] {
        let answer = open(headers(&cluster, "1", Some(versions))).await;
        assert_eq!(
            refusal(answer),
            Refusal::IncompatibleVersion,
            "{versions:?}"
        );
    }

    // An admitted link that sends garbage is closed by the member, which goes on.
    let socket = open(headers(&cluster, "5", None))
        .await
        .expect("a link from a member of the cluster")
        .socket;
    wait_for_links(0, 1).await;
    let mut garbage = 8u32.to_be_bytes().to_vec();
    garbage.extend_from_slice(&[0xff; 8]);
    (&socket).write_all(&garbage).expect("write");
    wait_for_links(0, 0).await;
    // A length over the limit: closed before anything is read or allocated.
    let socket = open(headers(&cluster, "5", None))
        .await
        .expect("a second link")
        .socket;
    wait_for_links(0, 1).await;
    (&socket).write_all(&u32::MAX.to_be_bytes()).expect("write");
    wait_for_links(0, 0).await;
    // A well-formed message from a member raft does not know is stepped and ignored.
    let socket = open(headers(&cluster, "5", None))
        .await
        .expect("a third link")
        .socket;
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgHeartbeat);
    m.from = 5;
    m.to = 1;
    let mut batch = Vec::new();
    frame::append(&mut batch, &m);
    (&socket).write_all(&batch).expect("write");
    let mut c = member.client().await;
    c.put("still", "fine", None).await.expect("put");
    drop(socket);
    member.stop().await;
    wait_for_links(0, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_member_does_not_offer_direct_links() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peer = free_port();
    let _etcd = start_etcd_with_peer(&dir.path().join("etcd"), peer, &[]);
    let url = format!("http://127.0.0.1:{peer}");
    let deadline = Instant::now() + WAIT;
    let answer = loop {
        let answer = handshake::open(
            &PeerDialer::default(),
            &url,
            &headers("1", "2", None),
            Duration::from_secs(2),
        )
        .await;
        match answer {
            Err(HandshakeError::Dial(_) | HandshakeError::Io(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => break other,
        }
    };
    assert!(
        matches!(answer, Err(HandshakeError::NotOffered(404))),
        "{:?}",
        answer.err()
    );
}
