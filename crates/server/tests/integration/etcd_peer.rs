//! oxcd's side of etcd's peer protocol against a running etcd 3.5.16 (issue 35, the
//! design's step 1; `docs/etcd-peer-design.md` §A, which cites etcd's
//! `server/etcdserver/api/rafthttp/` and `etcdhttp/peer.go` for each rule):
//! - etcd's streams, dialed as a learner it was told of, decode with oxcd's codec
//!   (whole messages, the msgappv2 frames of a replicating leader, link heartbeats), and
//!   etcd takes the answers oxcd sends on its pipeline: it counts the learner caught up
//!   and promotes it;
//! - the read-only peer endpoints (`/members`, `/raft/probing`) answer as etcd's do.

use std::time::Duration;

use etcd_client::{Client, Member, MemberAddOptions};
use oxcd_raft::{Message, MessageType};
use oxcd_server::domains::version::release::Release;
use oxcd_server::peer::PeerDialer;
use oxcd_server::peer::etcd::client::{self, Identity, StreamKind};
use oxcd_server::peer::etcd::codec::is_link_heartbeat;
use tokio::sync::mpsc;

use crate::common::etcd::start_etcd_with_peer;
use crate::common::{InProc, free_port, revision_at};

const WAIT: Duration = Duration::from_secs(10);

/// The next message on `rx` that `pick` accepts, within [`WAIT`].
async fn next_where(
    rx: &mut mpsc::Receiver<Message>,
    what: &str,
    mut pick: impl FnMut(&Message) -> bool,
) -> Message {
    let found = tokio::time::timeout(WAIT, async {
        while let Some(m) = rx.recv().await {
            if pick(&m) {
                return Some(m);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(m)) => m,
        _ => panic!("no {what} from etcd within {WAIT:?}"),
    }
}

/// Dials the stream of `kind` etcd sends `me`, decoding it on a task.
async fn dial(
    dialer: &PeerDialer,
    url: &str,
    me: &Identity,
    etcd_id: u64,
    kind: StreamKind,
) -> mpsc::Receiver<Message> {
    let body = client::dial_stream(dialer, url, me, etcd_id, kind, WAIT)
        .await
        .unwrap_or_else(|e| panic!("etcd refused the {kind:?} stream: {e}"));
    let (tx, rx) = mpsc::channel(1024);
    tokio::spawn(client::read_stream(
        body,
        kind.decoder(me.member, etcd_id),
        tx,
    ));
    rx
}

/// An append answer from `me` to the leader.
fn append_response(me: u64, leader: u64, term: u64, index: u64, reject: bool) -> Message {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgAppendResponse);
    m.from = me;
    m.to = leader;
    m.term = term;
    m.index = index;
    m.reject = reject;
    m
}

#[tokio::test]
async fn etcds_streams_decode_and_etcd_takes_our_pipeline_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peer_port = free_port();
    let etcd = start_etcd_with_peer(dir.path(), peer_port, &[]);
    let etcd_url = format!("http://127.0.0.1:{peer_port}");
    let mut c = Client::connect([format!("http://{}", etcd.endpoint)], None)
        .await
        .expect("connect");
    for i in 0..5 {
        c.put(format!("before{i}"), "v", None).await.expect("put");
    }
    // A learner nobody runs: this test is its raft, through oxcd's codec and client.
    let learner_url = format!("http://127.0.0.1:{}", free_port());
    let added = c
        .member_add(
            [learner_url.clone()],
            Some(MemberAddOptions::new().with_is_learner()),
        )
        .await
        .expect("member add --learner");
    let header = added.header().expect("header");
    let (cluster, etcd_id) = (header.cluster_id(), header.member_id());
    let learner = added.member().expect("the added member").id();
    let me = Identity {
        member: learner,
        cluster,
        peer_urls: vec![learner_url],
        release: Release::Etcd35,
    };
    let dialer = PeerDialer::default();
    let mut pipeline = client::Pipeline::new(dialer.clone(), etcd_url.clone(), me.clone());
    let mut messages = dial(&dialer, &etcd_url, &me, etcd_id, StreamKind::Message).await;
    let mut appends = dial(&dialer, &etcd_url, &me, etcd_id, StreamKind::MsgAppV2).await;

    // Heartbeats come on the message stream. The leader probed the learner before
    // the streams were up (on the pipeline, to nobody) and waits for an answer: a
    // heartbeat's answer makes it probe again.
    let beat = next_where(&mut messages, "a heartbeat", |m| {
        m.get_msg_type() == MessageType::MsgHeartbeat && !is_link_heartbeat(m)
    })
    .await;
    assert_eq!((beat.from, beat.to), (etcd_id, learner));
    let term = beat.term;
    let mut answer = Message::default();
    answer.set_msg_type(MessageType::MsgHeartbeatResponse);
    answer.from = learner;
    answer.to = etcd_id;
    answer.term = term;
    pipeline
        .post(&answer, WAIT)
        .await
        .expect("etcd takes a heartbeat's answer on its pipeline");
    // The probe: a whole append (a type-2 frame) on msgappv2, now attached.
    let probe = next_where(&mut appends, "probe", |m| {
        m.get_msg_type() == MessageType::MsgAppend
    })
    .await;
    assert_eq!((probe.from, probe.to), (etcd_id, learner));
    assert_eq!(probe.term, term);
    // etcd's whole messages always carry a snapshot field (gogo writes the empty one).
    assert!(probe.has_snapshot(), "a whole message");
    eprintln!(
        "probe: index {} log term {} term {term} commit {}",
        probe.index, probe.log_term, probe.commit
    );
    // An empty log here: refused, etcd goes back to the first entry and sends the log.
    pipeline
        .post(
            &append_response(learner, etcd_id, term, probe.index, true),
            WAIT,
        )
        .await
        .expect("etcd takes a refusal on its pipeline");
    let log = next_where(&mut appends, "the log", |m| {
        m.get_msg_type() == MessageType::MsgAppend && m.index == 0
    })
    .await;
    let last = log.get_entries().last().expect("entries").index;
    assert_eq!(log.get_entries()[0].index, 1);
    assert!(
        log.get_entries()
            .iter()
            .any(|e| e.data.windows(7).any(|w| w == b"before4")),
        "the puts are in etcd's log"
    );
    pipeline
        .post(&append_response(learner, etcd_id, term, last, false), WAIT)
        .await
        .expect("etcd takes an acceptance on its pipeline");
    read_etcds_log(log.get_entries(), etcd_id);

    // Replicating now: the next put continues the log in the same term, which etcd
    // sends as an entries-only frame; the decoder must rebuild its index and terms.
    c.put("after", "v", None).await.expect("put");
    let next = next_where(&mut appends, "the put", |m| {
        m.get_entries()
            .iter()
            .any(|e| e.data.windows(5).any(|w| w == b"after"))
    })
    .await;
    assert_eq!((next.from, next.to), (etcd_id, learner));
    // Rebuilt from an entries-only frame, which carries no snapshot field.
    assert!(!next.has_snapshot(), "an entries-only frame");
    assert_eq!(next.term, term);
    assert_eq!(next.log_term, term);
    assert!(
        next.index >= last,
        "continues the log: {} >= {last}",
        next.index
    );
    assert_eq!(next.get_entries()[0].index, next.index + 1);
    let last = next.get_entries().last().expect("entries").index;
    pipeline
        .post(&append_response(learner, etcd_id, term, last, false), WAIT)
        .await
        .expect("etcd takes the acceptance");

    // Link heartbeats keep the message stream alive; the reader hands them on, and
    // they are not raft's.
    next_where(&mut messages, "a link heartbeat", is_link_heartbeat).await;

    // etcd promotes a learner only once its match is close to the leader's: it read
    // our answers as a caught-up follower's.
    c.member_promote(learner)
        .await
        .expect("etcd counts the learner caught up and promotes it");
    drop(etcd);
}

/// etcd's log, from its first entry, read through oxcd's reader of etcd's entries:
/// every normal entry reads, and they are etcd 3.5's published attributes, its cluster
/// version and the test's puts.
fn read_etcds_log(entries: &[oxcd_raft::Entry], etcd_id: u64) {
    use oxcd_api::oxcdpb::internal_request::Op;
    use oxcd_server::machine::etcd_entries::{EtcdEntry, read};
    let mut ops = Vec::new();
    for e in entries {
        if e.get_entry_type() != oxcd_raft::EntryType::EntryNormal || e.data.is_empty() {
            continue;
        }
        match read(&e.data) {
            Ok(EtcdEntry::Request { op, .. }) => ops.push(op),
            Ok(other) => panic!("entry {}: {other:?}", e.index),
            Err(err) => panic!("entry {} does not read: {err}", e.index),
        }
    }
    eprintln!("etcd's log read as: {ops:?}");
    assert!(
        ops.iter().any(
            |op| matches!(op, Op::MemberAttributes(a) if a.id == etcd_id && a.name == "default")
        )
    );
    assert!(
        ops.iter()
            .any(|op| matches!(op, Op::ClusterVersionSet(v) if v.ver == "3.5.0"))
    );
    let puts = ops.iter().filter(|op| matches!(op, Op::Put(_))).count();
    assert_eq!(puts, 5);
}

#[tokio::test]
async fn the_read_only_peer_endpoints_answer_as_etcds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd_port = free_port();
    let etcd = start_etcd_with_peer(&dir.path().join("etcd"), etcd_port, &[]);
    let oxcd_port = free_port();
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        s.listen_peer_urls = vec![format!("http://127.0.0.1:{oxcd_port}")];
    })
    .await;
    let dialer = PeerDialer::default();
    let mut answers = Vec::new();
    for port in [etcd_port, oxcd_port] {
        let url = format!("http://127.0.0.1:{port}");
        let members = client::get(&dialer, &url, "/members", WAIT)
            .await
            .expect("GET /members");
        let probing = client::get(&dialer, &url, "/raft/probing", WAIT)
            .await
            .expect("GET /raft/probing");
        answers.push((url, members, probing));
    }
    for (url, members, probing) in &answers {
        let who = if url.ends_with(&etcd_port.to_string()) {
            "etcd"
        } else {
            "oxcd"
        };
        eprintln!(
            "{who} /members: {:?} {}",
            members.headers,
            String::from_utf8_lossy(&members.body)
        );
        eprintln!(
            "{who} /raft/probing: {}",
            String::from_utf8_lossy(&probing.body)
        );
        assert_eq!(members.status, 200);
        assert_eq!(members.headers["content-type"], "application/json");
        let cluster = members.headers["x-etcd-cluster-id"].to_str().expect("text");
        assert!(u64::from_str_radix(cluster, 16).is_ok(), "{who}: {cluster}");
        let list =
            oxcd_server::peer::etcd::members::parse_list(&members.body).expect("etcd's JSON");
        assert_eq!(list.len(), 1, "{who}");
        assert_eq!(list[0].name, "default", "{who}");
        let client_urls = list[0].client_urls.clone().unwrap_or_default();
        assert_eq!(client_urls.len(), 1, "{who}");
        // The one member's JSON, with its values masked, is the same text.
        let shape = String::from_utf8_lossy(&members.body)
            .replace(&list[0].id.to_string(), "ID")
            .replace(&client_urls[0], "CLIENT")
            .replace(
                &list[0].peer_urls.clone().unwrap_or_default().join("\",\""),
                "PEER",
            );
        assert_eq!(
            shape,
            "[{\"id\":ID,\"peerURLs\":[\"PEER\"],\"name\":\"default\",\"clientURLs\":[\"CLIENT\"]}]\n",
            "{who}"
        );
        let text = String::from_utf8_lossy(&probing.body);
        assert_eq!(probing.status, 200);
        assert!(
            text.starts_with("{\"OK\":true,\"Now\":\"") && text.ends_with("\"}\n"),
            "{who}: {text}"
        );
        assert_eq!(
            probing.headers["content-type"], "text/plain; charset=utf-8",
            "{who}"
        );
    }
    // A POST to /members: 405, naming GET, with Go's text.
    let (etcd_url, oxcd_url) = (&answers[0].0, &answers[1].0);
    let mut refusals = Vec::new();
    for url in [etcd_url, oxcd_url] {
        refusals.push(
            client::post_empty(&dialer, url, "/members", WAIT)
                .await
                .expect("POST /members"),
        );
    }
    for r in &refusals {
        assert_eq!(r.status, 405);
        assert_eq!(r.headers["allow"], "GET");
        assert_eq!(&r.body[..], b"Method Not Allowed\n");
    }
    oxcd.stop().await;
    drop(etcd);
}

/// Issue 35's point 2 and the start of point 3: an oxcd learner joins a running etcd
/// 3.5 cluster (`member add --learner`, then `--initial-cluster-state existing`),
/// receives etcd's log over etcd's peer protocol, applies etcd's entries (HashKV equal),
/// publishes itself as etcd does, serves serializable reads of what etcd wrote, rejoins
/// after a restart, and once etcd promotes it, votes and serves linearizable reads.
#[tokio::test]
async fn an_oxcd_member_joins_an_etcd_cluster_as_a_learner_and_is_promoted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd_peer = free_port();
    let etcd_dir = dir.path().join("etcd");
    // etcd's corruption checks on: at its start, and every second from the leader.
    let checks = [
        "--experimental-initial-corrupt-check=true".to_string(),
        "--experimental-corrupt-check-time=1s".to_string(),
    ];
    let etcd = start_etcd_with_peer(&etcd_dir, etcd_peer, &checks);
    let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer}");
    let mut c = Client::connect([format!("http://{}", etcd.endpoint)], None)
        .await
        .expect("connect");
    for i in 0..20 {
        c.put(format!("k{i:02}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
    c.delete("k00", None).await.expect("delete");
    let oxcd_peer_url = format!("http://127.0.0.1:{}", free_port());
    c.member_add(
        [oxcd_peer_url.clone()],
        Some(MemberAddOptions::new().with_is_learner()),
    )
    .await
    .expect("member add --learner");
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        joining(s, &etcd_peer_url, &oxcd_peer_url)
    })
    .await;
    // Written on etcd after the learner joined: it arrives through the log too.
    c.put("after", "joined", None).await.expect("put");
    let rev = revision_at(&mut c, "after").await;
    let mut ours = oxcd.client().await;
    let serializable = etcd_client::GetOptions::new()
        .with_serializable()
        .with_prefix();
    let deadline = tokio::time::Instant::now() + WAIT;
    let got = loop {
        let got = ours
            .get("", Some(serializable.clone()))
            .await
            .expect("serializable get on the learner");
        if got.header().expect("header").revision() >= rev || tokio::time::Instant::now() > deadline
        {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let theirs = c
        .get("", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect("get on etcd");
    let kvs = |r: &etcd_client::GetResponse| {
        r.kvs()
            .iter()
            .map(|kv| {
                (
                    kv.key().to_vec(),
                    kv.value().to_vec(),
                    kv.create_revision(),
                    kv.mod_revision(),
                    kv.version(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(kvs(&got), kvs(&theirs), "the learner holds etcd's keys");
    eprintln!(
        "the learner serves {} keys at revision {rev}, as etcd does",
        got.kvs().len()
    );
    assert_eq!(got.header().expect("header").revision(), rev);
    // A learner serves no HashKV to clients (etcd's learners neither); etcd's
    // corruption checks ask every member on its peer port: the same answer.
    let hashes = [
        peer_hash_kv(&etcd_peer_url, rev).await,
        peer_hash_kv(&oxcd_peer_url, rev).await,
    ];
    eprintln!(
        "/members/hashkv at {rev}: etcd {} oxcd {}",
        hashes[0], hashes[1]
    );
    assert_eq!(hashes[0], hashes[1], "HashKV equal");
    // etcd lists the learner with the name and client URLs it published.
    let members = c.member_list().await.expect("member list");
    let learner = members
        .members()
        .iter()
        .find(|m| m.is_learner())
        .expect("the learner");
    assert_eq!(learner.name(), "oxcd1");
    assert_eq!(learner.client_urls(), [oxcd.endpoint()]);
    let learner_id = learner.id();

    // etcd's periodic corruption check asks the learner's peer port and finds it equal.
    let log = crate::common::etcd::log_of(&etcd_dir);
    let logged = |text: &'static str| {
        let log = log.clone();
        move || {
            let log = log.clone();
            async move { std::fs::read_to_string(&log).is_ok_and(|l| l.contains(text)) }
        }
    };
    assert!(
        eventually(logged(
            r#""msg":"finished peer corruption check","number-of-peers-checked":1"#
        ))
        .await,
        "etcd's periodic check compared the oxcd learner's hash"
    );
    // Restarted, etcd's initial check compares its hash with the learner's before
    // it serves.
    drop(etcd);
    let etcd = start_etcd_with_peer(&etcd_dir, etcd_peer, &checks);
    let mut c = Client::connect([format!("http://{}", etcd.endpoint)], None)
        .await
        .expect("connect");
    assert!(
        eventually(logged(
            r#""msg":"initial corruption checking passed; no corruption""#
        ))
        .await,
        "etcd's initial check passed"
    );
    c.put("after-etcd-restart", "v", None).await.expect("put");

    // Restarted on its data dir, it rejoins as itself and catches up.
    let data = oxcd.data_dir.clone();
    let client_url = oxcd.endpoint();
    oxcd.stop().await;
    c.put("while-down", "v", None).await.expect("put");
    let oxcd = InProc::start(data, |s| {
        joining(s, &etcd_peer_url, &oxcd_peer_url);
        s.listen_client_urls = vec![client_url.clone()];
        s.advertise_client_urls = vec![client_url.clone()];
    })
    .await;
    let mut ours = oxcd.client().await;
    let caught_up = serves(&ours, "while-down").await;
    assert!(caught_up, "the restarted learner caught up");

    // Promoted, it votes: with two voters every write needs its acknowledgement.
    c.member_promote(learner_id)
        .await
        .expect("etcd promotes the caught-up oxcd learner");
    for i in 0..10 {
        c.put(format!("voted{i}"), "v", None)
            .await
            .expect("a write the oxcd voter acknowledged");
    }
    let rev = revision_at(&mut c, "voted9").await;
    let linearizable = ours
        .get("voted", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect("a linearizable read on the oxcd voter (read index from etcd's leader)");
    assert_eq!(linearizable.count(), 10);
    assert!(linearizable.header().expect("header").revision() >= rev);

    // A follower's TimeToLive is the leader's (etcd's clocks are the only ones renewed):
    // asked of the oxcd follower, forwarded to etcd's POST /leases/internal.
    let asked = c.lease_grant(30, None).await.expect("lease grant").id();
    let ttl = ours
        .lease_time_to_live(asked, None)
        .await
        .expect("time-to-live through the oxcd follower");
    assert_eq!(ttl.granted_ttl(), 30);
    assert!(ttl.ttl() > 0 && ttl.ttl() <= 30, "{}", ttl.ttl());
    let gone = ours
        .lease_time_to_live(0x1234, None)
        .await
        .expect("time-to-live of no lease");
    assert_eq!(gone.ttl(), -1);

    // Leading: etcd hands leadership over; writes through either member are applied
    // alike by both.
    hand_leadership(&c, learner_id).await;
    let status = ours.status().await.expect("status of the oxcd member");
    assert_eq!(status.leader(), learner_id, "the oxcd member leads");
    for i in 0..5 {
        c.put(format!("led-etcd{i}"), "v", None)
            .await
            .expect("a write through the etcd follower");
        ours.put(format!("led-oxcd{i}"), "v", None)
            .await
            .expect("a write through the oxcd leader");
    }
    // Deletes, transactions and compaction through either member.
    c.delete("led-etcd0", None)
        .await
        .expect("delete through etcd");
    ours.delete("led-oxcd0", None)
        .await
        .expect("delete through oxcd");
    let txn = |key: &'static str| {
        etcd_client::Txn::new()
            .when([etcd_client::Compare::version(
                key,
                etcd_client::CompareOp::Greater,
                0,
            )])
            .and_then([etcd_client::TxnOp::put(key, "txn", None)])
            .or_else([etcd_client::TxnOp::put("txn-missed", key, None)])
    };
    assert!(
        c.txn(txn("led-etcd1"))
            .await
            .expect("txn through etcd")
            .succeeded()
    );
    assert!(
        !ours
            .txn(txn("led-nothing"))
            .await
            .expect("txn through oxcd")
            .succeeded()
    );
    let compact_at = revision_at(&mut ours, "led").await;
    c.compact(compact_at - 2, None)
        .await
        .expect("compact through etcd");
    // Leases: granted through the etcd follower (forwarded to the oxcd leader), kept alive
    // through it (etcd forwards keepalives to the leader's POST /leases), revoked through
    // it; and one that nobody keeps alive expires: the oxcd leader revokes it as etcd's
    // leader would.
    let kept = leased(&c, &c, 5, "leased-kept").await;
    let (mut keeper, _stream) = c.lease_keep_alive(kept).await.expect("keepalive stream");
    let ttl = c
        .lease_time_to_live(
            kept,
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await
        .expect("time-to-live through etcd, forwarded to the oxcd leader");
    assert_eq!(ttl.granted_ttl(), 5);
    assert!(ttl.ttl() > 0, "{}", ttl.ttl());
    assert_eq!(ttl.keys(), [b"leased-kept".to_vec()]);
    keeper
        .keep_alive()
        .await
        .expect("keepalive through etcd, forwarded to oxcd");
    let revoked = leased(&ours, &c, 60, "leased-revoked").await;
    c.lease_revoke(revoked).await.expect("revoke through etcd");
    leased(&ours, &ours, 2, "leased-short").await;
    let expired = eventually(|| {
        let mut c = c.clone();
        async move {
            c.get("leased-short", None)
                .await
                .is_ok_and(|r| r.count() == 0)
        }
    })
    .await;
    assert!(
        expired,
        "the oxcd leader revoked the expired lease on every member"
    );
    keeper
        .keep_alive()
        .await
        .expect("keepalive through etcd, forwarded to oxcd");
    assert_eq!(
        c.get("leased-kept", None).await.expect("get").count(),
        1,
        "the kept-alive lease outlived its 5 s TTL's first half and the short one"
    );
    assert_eq!(c.get("leased-revoked", None).await.expect("get").count(), 0);
    // Membership changes while the oxcd member leads: a learner added through the etcd
    // follower (etcd's AddLearnerNode, forwarded to the oxcd leader), a promotion of it
    // refused by the oxcd leader (etcd forwards it to POST /members/promote: not caught
    // up, nobody runs it), removed through the oxcd leader; another added and removed
    // through the oxcd leader.
    let spare = add_learner(&c, "http://127.0.0.1:1").await;
    let refused = c.member_promote(spare).await.expect_err("not caught up");
    assert!(
        refused
            .to_string()
            .contains("can only promote a learner member which is in sync with leader"),
        "{refused}"
    );
    // One change at a time: the oxcd leader takes the next once it applied this one
    // (etcd answered its client when etcd applied it).
    assert!(
        eventually(|| {
            let mut ours = ours.clone();
            async move {
                ours.member_list()
                    .await
                    .is_ok_and(|l| l.members().iter().any(|m| m.id() == spare))
            }
        })
        .await
    );
    ours.member_remove(spare)
        .await
        .expect("member remove through oxcd");
    let other = add_learner(&ours, "http://127.0.0.1:2").await;
    // The oxcd leader answered once it applied the change; etcd's follower lists the
    // members it has applied itself (a MemberList that is not linearizable is served
    // from the member's own view: etcd's server/etcdserver/api/v3rpc/member.go), which
    // may be a commit notice behind.
    assert!(
        member_listed(&c, |m| m.id() == other && m.is_learner()).await,
        "etcd's follower never listed the learner added through the oxcd leader"
    );
    // Peer-URL updates both ways: oxcd writes etcd's UpdateNode, etcd applies it, and
    // the other way round.
    ours.member_update(other, vec!["http://127.0.0.1:3".into()])
        .await
        .expect("member update through oxcd");
    assert!(
        peer_urls_become(&c, other, "http://127.0.0.1:3").await,
        "etcd applied oxcd's UpdateNode"
    );
    c.member_update(other, vec!["http://127.0.0.1:4".into()])
        .await
        .expect("member update through etcd");
    assert!(
        peer_urls_become(&ours, other, "http://127.0.0.1:4").await,
        "oxcd applied etcd's UpdateNode"
    );
    c.member_remove(other)
        .await
        .expect("member remove through etcd");
    assert_eq!(
        c.member_list().await.expect("member list").members().len(),
        2
    );
    // Auth changes and alarms through either member.
    c.user_add("alice", "pw", None)
        .await
        .expect("user add through etcd");
    ours.role_add("reader")
        .await
        .expect("role add through oxcd");
    c.role_grant_permission("reader", etcd_client::Permission::read("led"))
        .await
        .expect("grant permission through etcd");
    ours.user_grant_role("alice", "reader")
        .await
        .expect("grant role through oxcd");
    let users = c.user_list().await.expect("user list through etcd");
    assert_eq!(users.users(), ["alice"]);
    let nospace = |action| {
        let mut ours = ours.clone();
        async move {
            let mut member = etcd_client::AlarmOptions::new();
            member.with_member(learner_id);
            ours.alarm(action, etcd_client::AlarmType::Nospace, Some(member))
                .await
        }
    };
    nospace(etcd_client::AlarmAction::Activate)
        .await
        .expect("alarm raised through oxcd");
    let listed = c
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await
        .expect("alarm list through etcd");
    assert_eq!(listed.alarms().len(), 1, "etcd applied the alarm");
    nospace(etcd_client::AlarmAction::Deactivate)
        .await
        .expect("alarm disarmed through oxcd");
    let rev = revision_at(&mut ours, "led").await;
    assert!(
        eventually(|| {
            let mut c = c.clone();
            async move {
                c.get(
                    "led-oxcd4",
                    Some(etcd_client::GetOptions::new().with_serializable()),
                )
                .await
                .is_ok_and(|r| r.header().is_some_and(|h| h.revision() >= rev))
            }
        })
        .await
    );
    let (etcd_hash, oxcd_hash) = (
        peer_hash_kv(&etcd_peer_url, rev).await,
        peer_hash_kv(&oxcd_peer_url, rev).await,
    );
    eprintln!("led by oxcd, /members/hashkv at {rev}: etcd {etcd_hash} oxcd {oxcd_hash}");
    assert_eq!(etcd_hash, oxcd_hash);
    // Checked every second all along: etcd never found the oxcd member's data different.
    // (A check that asks for a revision the member has not applied yet fails with
    // etcd's "future revision", as it does for an etcd follower a moment behind, and is
    // skipped; any other failure to answer is not.)
    let text = std::fs::read_to_string(&log).expect("etcd's log");
    let unanswered: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("failed hash kv request"))
        .filter(|l| !l.contains("required revision is a future revision"))
        .filter(|l| !l.contains("connection refused"))
        .collect();
    assert!(unanswered.is_empty(), "{unanswered:#?}");
    for bad in [
        "found hash mismatch",
        "must be less than or equal to leader's",
        "then hashes must match",
        "found different hash values",
        "found different compact revision",
    ] {
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(bad)).collect();
        assert!(lines.is_empty(), "etcd logged {bad:?}: {lines:#?}");
    }
    let alarms = c
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await
        .expect("alarm list");
    assert_eq!(alarms.alarms().len(), 0, "no alarm");
    eprintln!(
        "etcd compared hashes with the oxcd member {} times",
        text.matches(r#""number-of-peers-checked":1"#).count()
    );
    oxcd.stop().await;
    drop(etcd);
}

/// Settings of the oxcd member `oxcd1` at `oxcd_peer_url` joining the etcd member
/// `default` at `etcd_peer_url`, with etcd's default timing.
pub(crate) fn joining(
    s: &mut oxcd_config::settings::Settings,
    etcd_peer_url: &str,
    oxcd_peer_url: &str,
) {
    s.name = "oxcd1".into();
    s.listen_peer_urls = vec![oxcd_peer_url.to_string()];
    s.peer_urls = vec![oxcd_peer_url.to_string()];
    s.initial_cluster = vec![
        ("default".into(), vec![etcd_peer_url.to_string()]),
        ("oxcd1".into(), vec![oxcd_peer_url.to_string()]),
    ];
    s.initial_cluster_existing = true;
    s.heartbeat = Duration::from_millis(100);
    s.election_timeout = Duration::from_millis(1000);
}

/// The body of etcd's `/members/hashkv` answer at `url` for revision `rev`.
pub(crate) async fn peer_hash_kv(url: &str, rev: i64) -> String {
    let answer = client::request(
        &PeerDialer::default(),
        url,
        http::Method::GET,
        "/members/hashkv",
        format!("{{\"revision\":{rev}}}").into(),
        WAIT,
    )
    .await
    .expect("GET /members/hashkv");
    assert_eq!(answer.status, 200, "{url}");
    String::from_utf8_lossy(&answer.body).into_owned()
}

/// One etcd member (data under `dir/etcd`) taking a raft snapshot every 20 entries and
/// keeping 5 behind it, so that a new member is far behind: the process, a client and
/// its peer URL.
pub(crate) async fn etcd_snapshotting_often(
    dir: &std::path::Path,
) -> (crate::common::etcd::Etcd, Client, String) {
    let etcd_peer = free_port();
    let flags = [
        "--snapshot-count=20".to_string(),
        "--experimental-snapshot-catchup-entries=5".to_string(),
    ];
    let etcd = start_etcd_with_peer(&dir.join("etcd"), etcd_peer, &flags);
    let c = Client::connect([format!("http://{}", etcd.endpoint)], None)
        .await
        .expect("connect");
    (etcd, c, format!("http://127.0.0.1:{etcd_peer}"))
}

/// An oxcd learner joining an etcd cluster whose log was compacted gets etcd's
/// snapshot (`POST /raft/snapshot`: the MsgSnap and the bbolt backend), installs it,
/// then follows the log: the same keys and HashKV as etcd's.
#[tokio::test]
async fn an_oxcd_learner_installs_etcds_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, mut c, etcd_peer_url) = etcd_snapshotting_often(dir.path()).await;
    let lease = c.lease_grant(600, None).await.expect("lease grant").id();
    for i in 0..60 {
        let opts = (i % 10 == 0).then(|| etcd_client::PutOptions::new().with_lease(lease));
        c.put(format!("k{i:02}"), format!("v{i}"), opts)
            .await
            .expect("put");
    }
    c.delete("k01", None).await.expect("delete");
    c.compact(10, None).await.expect("compact");
    let oxcd_peer_url = format!("http://127.0.0.1:{}", free_port());
    let added = c
        .member_add(
            [oxcd_peer_url.clone()],
            Some(MemberAddOptions::new().with_is_learner()),
        )
        .await
        .expect("member add --learner");
    let learner = added.member().expect("member").id();
    let started = std::time::Instant::now();
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        joining(s, &etcd_peer_url, &oxcd_peer_url)
    })
    .await;
    eprintln!("the learner served after {:?}", started.elapsed());
    c.put("after", "joined", None).await.expect("put");
    let rev = revision_at(&mut c, "after").await;
    let mut ours = oxcd.client().await;
    let caught_up = serves(&ours, "after").await;
    assert!(caught_up, "the learner caught up");
    let all = etcd_client::GetOptions::new().with_prefix();
    let theirs = c.get("", Some(all.clone())).await.expect("get");
    let got = ours
        .get("", Some(all.with_serializable()))
        .await
        .expect("get");
    let kvs = |r: &etcd_client::GetResponse| {
        r.kvs()
            .iter()
            .map(|kv| (kv.key().to_vec(), kv.mod_revision(), kv.lease()))
            .collect::<Vec<_>>()
    };
    assert_eq!(kvs(&got), kvs(&theirs));
    let (etcd_hash, oxcd_hash) = (
        peer_hash_kv(&etcd_peer_url, rev).await,
        peer_hash_kv(&oxcd_peer_url, rev).await,
    );
    eprintln!("/members/hashkv at {rev}: etcd {etcd_hash} oxcd {oxcd_hash}");
    assert_eq!(etcd_hash, oxcd_hash, "HashKV equal");
    // The members came with the snapshot (etcd's backend holds them): the learner's
    // view on its peer port is etcd's.
    let mut views = Vec::new();
    for url in [&etcd_peer_url, &oxcd_peer_url] {
        let answer = client::get(&PeerDialer::default(), url, "/members", WAIT)
            .await
            .expect("GET /members");
        views
            .push(oxcd_server::peer::etcd::members::parse_list(&answer.body).expect("etcd's JSON"));
    }
    assert_eq!(views[0], views[1], "the same members");
    // It came by snapshot: etcd's leader says it sent one to the learner.
    let metrics = crate::common::scrape(&format!("http://{}", etcd.endpoint)).await;
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("etcd_network_snapshot_send"))
    {
        eprintln!("etcd: {line}");
    }
    let sent = format!("etcd_network_snapshot_send_success{{To=\"{learner:x}\"}} 1");
    assert!(metrics.contains(&sent), "etcd sent a snapshot: {sent}");
    oxcd.stop().await;
    drop(etcd);
}

/// Adds a learner at `url` through `client`: its id. Asked again while the strict
/// reconfiguration check finds a voter connected for less than 5 s (etcd's rule, and
/// oxcd's): the oxcd member restarts moments before in the test that uses this.
pub(crate) async fn add_learner(client: &Client, url: &str) -> u64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let added = client
            .clone()
            .member_add(
                [url.to_string()],
                Some(MemberAddOptions::new().with_is_learner()),
            )
            .await;
        match added {
            Ok(r) => return r.member().expect("member").id(),
            Err(e)
                if e.to_string().contains("unhealthy cluster")
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(250)).await
            }
            Err(e) => panic!("member add --learner {url}: {e}"),
        }
    }
}

/// A one-member etcd cluster with its data under `dir/etcd`: the process, a client of
/// it and its peer URL.
async fn one_etcd(dir: &std::path::Path) -> (crate::common::etcd::Etcd, Client, String) {
    let peer = free_port();
    let etcd = start_etcd_with_peer(&dir.join("etcd"), peer, &[]);
    let c = Client::connect([format!("http://{}", etcd.endpoint)], None)
        .await
        .expect("connect");
    (etcd, c, format!("http://127.0.0.1:{peer}"))
}

/// Promotes the learner `id` through `client`'s member (retrying while it catches up),
/// then hands it leadership.
pub(crate) async fn promote_and_lead(client: &Client, id: u64) {
    crate::etcd_migration::reconfigure(&format!("promote {id:x}"), || {
        let mut c = client.clone();
        async move { c.member_promote(id).await }
    })
    .await;
    hand_leadership(client, id).await;
}

/// Moves leadership to member `to` through `client`, asked again until `to` leads. A
/// member promoted a moment ago may not have applied its promotion when the leader's
/// MsgTimeoutNow arrives, and ignores it as a learner would (etcd's raft and raft-rs
/// alike); etcd's MoveLeader then waits for its client's deadline.
pub(crate) async fn hand_leadership(client: &Client, to: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut c = client.clone();
        let moved = tokio::time::timeout(Duration::from_secs(3), c.move_leader(to)).await;
        let leads = c.status().await.is_ok_and(|s| s.leader() == to);
        if leads {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "leadership not moved to {to:x}: {moved:?}"
        );
    }
}

/// A lease of `ttl` seconds granted through `granter`, with `key` put on it through
/// `writer`: its id.
async fn leased(granter: &Client, writer: &Client, ttl: i64, key: &str) -> i64 {
    let id = granter
        .clone()
        .lease_grant(ttl, None)
        .await
        .expect("lease grant")
        .id();
    writer
        .clone()
        .put(
            key,
            "v",
            Some(etcd_client::PutOptions::new().with_lease(id)),
        )
        .await
        .expect("put with lease");
    id
}

/// Whether the member of `client` serves `key` (a serializable read) within [`WAIT`].
pub(crate) async fn serves(client: &Client, key: &'static str) -> bool {
    eventually(|| {
        let mut client = client.clone();
        async move {
            client
                .get(
                    key,
                    Some(etcd_client::GetOptions::new().with_serializable()),
                )
                .await
                .is_ok_and(|r| r.count() == 1)
        }
    })
    .await
}

/// Whether member `id`'s peer URLs become `[url]` in `client`'s member list.
async fn peer_urls_become(client: &Client, id: u64, url: &str) -> bool {
    member_listed(client, |m| {
        m.id() == id && m.peer_urls() == [url.to_string()]
    })
    .await
}

/// Whether `client`'s member list comes to hold a member that `matches`, within
/// [`eventually`]'s wait.
async fn member_listed(client: &Client, matches: impl Fn(&Member) -> bool) -> bool {
    let matches = &matches;
    eventually(|| {
        let mut c = client.clone();
        async move {
            c.member_list()
                .await
                .is_ok_and(|l| l.members().iter().any(matches))
        }
    })
    .await
}

pub(crate) async fn eventually<F, Fut>(check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// An etcd member joining a cluster an oxcd member leads, after the oxcd leader
/// compacted its log, gets the oxcd leader's snapshot (`POST /raft/snapshot`: the
/// MsgSnap with etcd's v2 store as its data, then the bbolt database at the index it
/// names; etcd 3.5.16 `rafthttp/snapshot_sender.go`, `etcdserver/server.go`
/// `applySnapshot`), installs it and follows the log: the same keys, members and HashKV.
#[tokio::test]
async fn an_etcd_learner_installs_an_oxcd_leaders_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, mut c, etcd_peer_url) = one_etcd(dir.path()).await;
    c.put("before", "oxcd", None).await.expect("put");
    let oxcd_peer_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd_id = add_learner(&c, &oxcd_peer_url).await;
    // A raft snapshot every 20 entries, keeping 5 below it.
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        joining(s, &etcd_peer_url, &oxcd_peer_url);
        s.snapshot_count = 20;
        s.snapshot_catchup_entries = 5;
    })
    .await;
    let mut ours = oxcd.client().await;
    assert!(serves(&ours, "before").await, "the learner caught up");
    c.member_promote(oxcd_id).await.expect("promote");
    hand_leadership(&c, oxcd_id).await;
    let lease = ours.lease_grant(600, None).await.expect("lease grant").id();
    for i in 0..60 {
        let opts = (i % 10 == 0).then(|| etcd_client::PutOptions::new().with_lease(lease));
        ours.put(format!("k{i:02}"), format!("v{i}"), opts)
            .await
            .expect("put through the oxcd leader");
    }
    ours.delete("k01", None).await.expect("delete");
    ours.compact(10, None).await.expect("compact");
    ours.user_add("root", "pw", None).await.expect("user add");

    // etcd2 joins as a learner: the oxcd leader's log starts above its index, a snapshot.
    let etcd2_peer = free_port();
    let etcd2_peer_url = format!("http://127.0.0.1:{etcd2_peer}");
    let etcd2_id = add_learner(&ours, &etcd2_peer_url).await;
    let started = std::time::Instant::now();
    let cluster = format!("default={etcd_peer_url},oxcd1={oxcd_peer_url},etcd2={etcd2_peer_url}");
    let etcd2_dir = dir.path().join("etcd2");
    let etcd2 = crate::common::etcd::join_etcd(&etcd2_dir, "etcd2", etcd2_peer, &cluster, &[]);
    let c2 = Client::connect([format!("http://{}", etcd2.endpoint)], None)
        .await
        .expect("connect to etcd2");
    ours.put("after", "joined", None).await.expect("put");
    assert!(serves(&c2, "after").await, "the etcd learner caught up");
    eprintln!("the etcd learner served after {:?}", started.elapsed());
    let rev = revision_at(&mut ours, "after").await;
    let all = etcd_client::GetOptions::new()
        .with_prefix()
        .with_serializable();
    let kvs = |r: etcd_client::GetResponse| {
        r.kvs()
            .iter()
            .map(|kv| (kv.key().to_vec(), kv.mod_revision(), kv.lease()))
            .collect::<Vec<_>>()
    };
    let theirs = kvs(c2
        .clone()
        .get("", Some(all.clone()))
        .await
        .expect("get on etcd2"));
    let ours_kvs = kvs(ours.get("", Some(all)).await.expect("get on oxcd"));
    assert_eq!(theirs, ours_kvs, "etcd2 holds the oxcd leader's keys");
    let hashes = [
        peer_hash_kv(&etcd_peer_url, rev).await,
        peer_hash_kv(&oxcd_peer_url, rev).await,
        peer_hash_kv(&etcd2_peer_url, rev).await,
    ];
    eprintln!("/members/hashkv at {rev}: {hashes:?}");
    assert!(hashes.iter().all(|h| h == &hashes[0]), "HashKV equal");
    let mut views = Vec::new();
    for url in [&etcd_peer_url, &oxcd_peer_url, &etcd2_peer_url] {
        let answer = client::get(&PeerDialer::default(), url, "/members", WAIT)
            .await
            .expect("GET /members");
        views
            .push(oxcd_server::peer::etcd::members::parse_list(&answer.body).expect("etcd's JSON"));
    }
    assert_eq!(
        views[0], views[2],
        "etcd2 restored the members from the v2 store"
    );
    assert_eq!(views[1], views[2]);
    // It came by snapshot: etcd2 says it received one from the oxcd leader.
    let metrics = crate::common::scrape(&format!("http://{}", etcd2.endpoint)).await;
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("etcd_network_snapshot_receive"))
    {
        eprintln!("etcd2: {line}");
    }
    let received = format!("etcd_network_snapshot_receive_success{{From=\"{oxcd_id:x}\"}} 1");
    assert!(metrics.contains(&received), "{received}");
    // Promoted, it votes and leads: the oxcd member follows it.
    ours.member_promote(etcd2_id).await.expect("promote etcd2");
    hand_leadership(&ours, etcd2_id).await;
    ours.put("led-by-etcd2", "v", None)
        .await
        .expect("put through oxcd");
    assert!(serves(&c2, "led-by-etcd2").await);
    oxcd.stop().await;
    drop(etcd2);
    drop(etcd);
}

/// The cluster version decides the log's vocabulary (`docs/etcd-peer-design.md`; issue
/// 35's point 6). An oxcd cluster that began as an etcd cluster and stays at 3.5 keeps
/// etcd's entries after its last etcd member left, so an oxcd member joining it through
/// oxcd's protocol writes etcd's entries too, and etcd members can join it again. A
/// cluster that began as an oxcd cluster, at 3.6, takes no etcd member: its raft paths of
/// etcd's protocol answer 503 naming the extensions in use, and no raft traffic goes to
/// an etcd member; after etcd's `downgrade enable 3.5` (etcd 3.6's
/// `server/etcdserver/version/downgrade.go` rules) the leader switches the log to etcd's
/// vocabulary and etcd 3.5.16 joins, applies what oxcd proposed before and after the
/// switch, and holds the same HashKV.
#[tokio::test]
async fn the_logs_vocabulary_follows_the_cluster_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, c, etcd_peer_url) = one_etcd(dir.path()).await;
    let etcd_id = c.clone().status().await.expect("status").leader();
    let oxcd1_peer_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd1_id = add_learner(&c, &oxcd1_peer_url).await;
    // Acting as etcd 3.5, so that the cluster stays at 3.5 without its etcd member and
    // etcd 3.5 may join it again.
    let as_35 = oxcd_go::semver::Version::new(3, 5, 0);
    let oxcd1 = InProc::start(dir.path().join("oxcd1"), |s| {
        joining(s, &etcd_peer_url, &oxcd1_peer_url);
        s.emulated_version = as_35.clone();
    })
    .await;
    let mut ours = oxcd1.client().await;
    c.clone().put("from-etcd", "v", None).await.expect("put");
    assert!(serves(&ours, "from-etcd").await);
    promote_and_lead(&c, oxcd1_id).await;
    crate::etcd_migration::reconfigure("remove the etcd member", || {
        let mut ours = ours.clone();
        async move { ours.member_remove(etcd_id).await }
    })
    .await;
    drop(etcd);

    // oxcd2 joins the all-oxcd cluster through oxcd's protocol, and leads.
    let oxcd2_peer_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd2_id = add_learner(&ours, &oxcd2_peer_url).await;
    let oxcd2 = InProc::start(dir.path().join("oxcd2"), |s| {
        joining(s, &oxcd1_peer_url, &oxcd2_peer_url);
        s.emulated_version = as_35;
        s.name = "oxcd2".into();
        s.initial_cluster = vec![
            ("oxcd1".into(), vec![oxcd1_peer_url.clone()]),
            ("oxcd2".into(), vec![oxcd2_peer_url.clone()]),
        ];
    })
    .await;
    let mut ours2 = oxcd2.client().await;
    ours.put("from-oxcd1", "v", None).await.expect("put");
    assert!(
        serves(&ours2, "from-oxcd1").await,
        "oxcd2 applies etcd's entries"
    );
    promote_and_lead(&ours, oxcd2_id).await;
    ours2
        .put("from-oxcd2", "v", None)
        .await
        .expect("put through oxcd2");
    let lease = ours2.lease_grant(60, None).await.expect("lease").id();
    ours2
        .put(
            "leased",
            "v",
            Some(etcd_client::PutOptions::new().with_lease(lease)),
        )
        .await
        .expect("put on a lease");

    // An etcd member joins again, and applies what oxcd2 proposed.
    let (etcd2, c2, etcd2_peer_url) = etcd_learner_joins(
        &ours2,
        dir.path(),
        "etcd2",
        &format!("oxcd1={oxcd1_peer_url},oxcd2={oxcd2_peer_url}"),
    )
    .await;
    assert!(serves(&c2, "leased").await, "etcd2 applies oxcd2's entries");
    let rev = revision_at(&mut ours2, "leased").await;
    let hashes = [
        peer_hash_kv(&oxcd1_peer_url, rev).await,
        peer_hash_kv(&oxcd2_peer_url, rev).await,
        peer_hash_kv(&etcd2_peer_url, rev).await,
    ];
    eprintln!("/members/hashkv at {rev}: {hashes:?}");
    assert!(hashes.iter().all(|h| h == &hashes[0]), "HashKV equal");
    drop(etcd2);
    oxcd2.stop().await;
    oxcd1.stop().await;

    // A cluster that began as oxcd's, at 3.6: its log is in oxcd's vocabulary and an
    // etcd member gets nothing; after `downgrade enable 3.5` the leader switches the log
    // to etcd's vocabulary and the etcd member joins.
    let native_peer_url = format!("http://127.0.0.1:{}", free_port());
    let native_settings = |s: &mut oxcd_config::settings::Settings| {
        s.listen_peer_urls = vec![native_peer_url.clone()];
        s.peer_urls = vec![native_peer_url.clone()];
        s.initial_cluster = vec![("default".into(), vec![native_peer_url.clone()])];
        s.downgrade_check_time = Duration::from_millis(200);
    };
    let native = InProc::start(dir.path().join("native"), native_settings).await;
    let mut n = native.client().await;
    assert!(
        eventually(|| async { vocabulary_of(&native).await == "oxcd" }).await,
        "a cluster that began as oxcd's speaks oxcd's vocabulary"
    );
    n.put("native", "v", None).await.expect("put");
    // A lease kept alive in oxcd's vocabulary (replicated keepalives) lives on.
    let lease = n.lease_grant(30, None).await.expect("lease").id();
    n.put(
        "native-leased",
        "v",
        Some(etcd_client::PutOptions::new().with_lease(lease)),
    )
    .await
    .expect("put on a lease");
    n.lease_keep_alive(lease).await.expect("keepalive");
    let refused = client::request(
        &PeerDialer::default(),
        &native_peer_url,
        http::Method::POST,
        "/raft",
        bytes::Bytes::new(),
        WAIT,
    )
    .await
    .expect("POST /raft");
    assert_eq!(refused.status, 503);
    let text = String::from_utf8_lossy(&refused.body);
    assert_eq!(
        text,
        format!("{}\n", oxcd_server::peer::etcd::guard::REFUSAL)
    );
    eprintln!("an oxcd cluster at 3.6 answers an etcd member: {text}");

    // etcd's downgrade takes the cluster version to 3.5: the vocabulary follows.
    let enabled = n
        .maintenance_client()
        .downgrade(etcd_client::DowngradeOptions::Enable("3.5".into()))
        .await;
    assert!(enabled.is_ok(), "downgrade enable 3.5: {enabled:?}");
    assert!(
        eventually(|| async { vocabulary_of(&native).await == "etcd" }).await,
        "at 3.5 the log switches to etcd's vocabulary"
    );
    n.put("after-switch", "v", None).await.expect("put");
    // etcd 3.5 joins no cluster while a downgrade is enabled (its allowedVersionRange):
    // the downgrade finishes as etcd's guide has it, the member restarted as 3.5.
    native.stop().await;
    let native = InProc::start(dir.path().join("native"), |s| {
        native_settings(s);
        s.emulated_version = oxcd_go::semver::Version::new(3, 5, 0);
    })
    .await;
    let mut n = native.client().await;
    // What a joining etcd 3.5 asks (`getDowngradeEnabled`).
    let finished = eventually(|| async {
        client::request(
            &PeerDialer::default(),
            &native_peer_url,
            http::Method::GET,
            "/downgrade/enabled",
            bytes::Bytes::new(),
            WAIT,
        )
        .await
        .is_ok_and(|r| r.status == 200 && r.body.as_ref() == b"false")
    })
    .await;
    assert!(finished, "the downgrade finishes");
    assert_eq!(vocabulary_of(&native).await, "etcd");
    n.lease_keep_alive(lease).await.expect("keepalive");
    let (etcd3, c3, etcd3_peer_url) = etcd_learner_joins(
        &n,
        dir.path(),
        "etcd3",
        &format!("default={native_peer_url}"),
    )
    .await;
    for key in ["native", "native-leased", "after-switch"] {
        let served = serves(&c3, key).await;
        if !served {
            let log = crate::common::etcd::log_of(&dir.path().join("etcd3"));
            eprintln!("{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        assert!(served, "etcd3 serves {key}");
    }
    // oxcd's proposals after the switch are etcd's entries: etcd applies them.
    n.put("for-etcd3", "v", None).await.expect("put");
    assert!(
        serves(&c3, "for-etcd3").await,
        "etcd3 applies oxcd's entries"
    );
    let rev = revision_at(&mut n, "for-etcd3").await;
    let hashes = [
        peer_hash_kv(&native_peer_url, rev).await,
        peer_hash_kv(&etcd3_peer_url, rev).await,
    ];
    eprintln!("/members/hashkv at {rev}: {hashes:?}");
    assert_eq!(hashes[0], hashes[1], "HashKV equal");
    let ttl = n
        .lease_time_to_live(lease, None)
        .await
        .expect("time to live")
        .ttl();
    assert!(
        ttl > 0,
        "the lease granted in oxcd's vocabulary lives on: {ttl}"
    );
    assert_eq!(n.get("native", None).await.expect("get").count(), 1);
    drop(etcd3);
    native.stop().await;
}

/// The other way (issue 35's point 6): oxcd's extensions switch on once every member is
/// oxcd. An etcd 3.5.16 cluster's one member is replaced by an oxcd member acting as
/// 3.6 (no `--emulated-version`): with the etcd member gone the leader raises the
/// cluster version to 3.6, as in a rolling upgrade to etcd 3.6
/// (`server/etcdserver/version/monitor.go` `UpdateClusterVersionIfNeeded`), and switches
/// the log to oxcd's vocabulary. A lease granted in etcd's vocabulary lives on under
/// replicated keepalives, and an oxcd member that joins afterwards reads the log from a
/// snapshot past the switch (the log was compacted there) and holds the same HashKV.
#[tokio::test]
async fn oxcds_extensions_switch_on_once_every_member_is_oxcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (etcd, c, etcd_peer_url) = one_etcd(dir.path()).await;
    let etcd_id = c.clone().status().await.expect("status").leader();
    let oxcd1_peer_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd1_id = add_learner(&c, &oxcd1_peer_url).await;
    let oxcd1 = InProc::start(dir.path().join("oxcd1"), |s| {
        joining(s, &etcd_peer_url, &oxcd1_peer_url);
    })
    .await;
    let mut ours = oxcd1.client().await;
    let lease = c.clone().lease_grant(30, None).await.expect("lease").id();
    c.clone()
        .put(
            "from-etcd",
            "v",
            Some(etcd_client::PutOptions::new().with_lease(lease)),
        )
        .await
        .expect("put");
    assert!(serves(&ours, "from-etcd").await);
    assert_eq!(
        vocabulary_of(&oxcd1).await,
        "etcd",
        "joined in etcd's vocabulary"
    );
    promote_and_lead(&c, oxcd1_id).await;
    crate::etcd_migration::reconfigure("remove the etcd member", || {
        let mut ours = ours.clone();
        async move { ours.member_remove(etcd_id).await }
    })
    .await;
    drop(etcd);
    assert!(
        eventually(|| async { vocabulary_of(&oxcd1).await == "oxcd" }).await,
        "with every member oxcd at 3.6, oxcd's vocabulary"
    );
    ours.put("after-switch", "v", None).await.expect("put");
    ours.lease_keep_alive(lease).await.expect("keepalive");

    // A member joining now gets a snapshot from after the switch.
    let oxcd2_peer_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd2_id = add_learner(&ours, &oxcd2_peer_url).await;
    let oxcd2 = InProc::start(dir.path().join("oxcd2"), |s| {
        joining(s, &oxcd1_peer_url, &oxcd2_peer_url);
        s.name = "oxcd2".into();
        s.initial_cluster = vec![
            ("oxcd1".into(), vec![oxcd1_peer_url.clone()]),
            ("oxcd2".into(), vec![oxcd2_peer_url.clone()]),
        ];
    })
    .await;
    let ours2 = oxcd2.client().await;
    for key in ["from-etcd", "after-switch"] {
        assert!(serves(&ours2, key).await, "oxcd2 serves {key}");
    }
    assert_eq!(vocabulary_of(&oxcd2).await, "oxcd");
    promote_and_lead(&ours, oxcd2_id).await;
    let mut ours2 = ours2;
    ours2.put("from-oxcd2", "v", None).await.expect("put");
    assert!(
        serves(&ours, "from-oxcd2").await,
        "oxcd1 applies oxcd2's entries"
    );
    let ttl = ours2
        .lease_time_to_live(lease, None)
        .await
        .expect("time to live")
        .ttl();
    assert!(
        ttl > 0,
        "the lease granted in etcd's vocabulary lives on: {ttl}"
    );
    let rev = revision_at(&mut ours2, "from-oxcd2").await;
    let hashes = [
        peer_hash_kv(&oxcd1_peer_url, rev).await,
        peer_hash_kv(&oxcd2_peer_url, rev).await,
    ];
    eprintln!("/members/hashkv at {rev}: {hashes:?}");
    assert_eq!(hashes[0], hashes[1], "HashKV equal");
    oxcd2.stop().await;
    oxcd1.stop().await;
}

/// An etcd member `name` added as a learner through `via` and started (data under `dir`)
/// to join the cluster whose other members `others` names (etcd's `--initial-cluster`
/// form): the process, a client of it and its peer URL.
async fn etcd_learner_joins(
    via: &Client,
    dir: &std::path::Path,
    name: &str,
    others: &str,
) -> (crate::common::etcd::Etcd, Client, String) {
    let peer = free_port();
    let peer_url = format!("http://127.0.0.1:{peer}");
    add_learner(via, &peer_url).await;
    let cluster = format!("{others},{name}={peer_url}");
    let etcd = crate::common::etcd::join_etcd(&dir.join(name), name, peer, &cluster, &[]);
    let c = Client::connect([format!("http://{}", etcd.endpoint)], None)
        .await
        .expect("connect to the etcd learner");
    (etcd, c, peer_url)
}

/// The log vocabulary `m` reports (`oxcd_log_vocabulary`).
pub(crate) async fn vocabulary_of(m: &InProc) -> String {
    let text = crate::common::scrape(&m.endpoint()).await;
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix("oxcd_log_vocabulary{vocabulary=\"")?;
            let (name, value) = rest.split_once("\"} ")?;
            (value.trim() == "1").then(|| name.to_string())
        })
        .unwrap_or_default()
}
