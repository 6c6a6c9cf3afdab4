//! One scripted Lease session, over raw gRPC, against a real etcd
//! (`oxcd_testkit::reference`) and against oxcd: grants at and around etcd's TTL limits,
//! puts and txns with leases, TimeToLive with keys, Leases, keepalives, revocations and
//! an expiry, with the watch events they cause. Every answer must be the same but for
//! the ids and term in headers and the seconds a lease has left.

use crate::common;

use std::time::{Duration, Instant};

use common::InProc;
use common::etcd::{assert_same_answers, mask, start_etcd};
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::lease_client::LeaseClient;
use oxcd_api::etcdserverpb::request_op::Request as Op;
use oxcd_api::etcdserverpb::watch_client::WatchClient;
use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest, LeaseRevokeRequest,
    LeaseTimeToLiveRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest,
    WatchRequest,
};
use tonic::transport::Channel;

struct Session {
    kv: KvClient<Channel>,
    lease: LeaseClient<Channel>,
    channel: Channel,
    out: Vec<String>,
}

/// The end of the range of keys starting with `prefix` (a prefix without 0xff bytes).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

fn err(s: tonic::Status) -> String {
    format!("error {:?}: {}", s.code(), s.message())
}

fn put(key: &str, lease: i64) -> PutRequest {
    PutRequest {
        key: key.as_bytes().to_vec(),
        value: b"v".to_vec(),
        lease,
        ..Default::default()
    }
}

impl Session {
    async fn open(endpoint: &str) -> Session {
        let channel = common::etcd::channel(endpoint).await;
        Session {
            kv: KvClient::new(channel.clone()),
            lease: LeaseClient::new(channel.clone()),
            channel,
            out: Vec::new(),
        }
    }

    fn say(&mut self, step: &str, what: String) {
        self.out.push(format!("{step}: {what}"));
    }

    async fn grant(&mut self, step: &str, id: i64, ttl: i64) {
        let r = self.lease.lease_grant(LeaseGrantRequest { ttl, id }).await;
        let s = match r {
            Ok(r) => {
                let mut r = r.into_inner();
                mask(&mut r.header);
                if id == 0 {
                    assert!(r.id > 0, "a server-chosen id is positive");
                    r.id = -2;
                }
                format!("{r:?}")
            }
            Err(e) => err(e),
        };
        self.say(step, s);
    }

    async fn put(&mut self, step: &str, req: PutRequest) {
        let s = match self.kv.put(req).await {
            Ok(r) => format!("{:?}", r.into_inner().header.map(|h| h.revision)),
            Err(e) => err(e),
        };
        self.say(step, s);
    }

    async fn time_to_live(&mut self, step: &str, id: i64, keys: bool) {
        let s = match self
            .lease
            .lease_time_to_live(LeaseTimeToLiveRequest { id, keys })
            .await
        {
            Ok(r) => {
                let mut r = r.into_inner();
                mask(&mut r.header);
                // Seconds left depend on timing: only their range is compared.
                if r.ttl > 0 {
                    assert!(r.ttl <= r.granted_ttl, "{r:?}");
                    assert!(r.ttl >= r.granted_ttl - 5, "{r:?}");
                    r.ttl = -2;
                }
                format!("{r:?}")
            }
            Err(e) => err(e),
        };
        self.say(step, s);
    }

    async fn keep_alive(&mut self, step: &str, id: i64) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(LeaseKeepAliveRequest { id }).await.expect("queue");
        let s = match self
            .lease
            .lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
        {
            Ok(r) => match r.into_inner().message().await {
                Ok(Some(mut r)) => {
                    mask(&mut r.header);
                    format!("{r:?}")
                }
                Ok(None) => "stream ended".into(),
                Err(e) => err(e),
            },
            Err(e) => err(e),
        };
        self.say(step, s);
    }

    async fn revoke(&mut self, step: &str, id: i64) {
        let s = match self.lease.lease_revoke(LeaseRevokeRequest { id }).await {
            Ok(r) => {
                let mut r = r.into_inner();
                mask(&mut r.header);
                format!("{r:?}")
            }
            Err(e) => err(e),
        };
        self.say(step, s);
    }

    async fn keys(&mut self, step: &str, prefix: &str) {
        let r = self
            .kv
            .range(RangeRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix),
                ..Default::default()
            })
            .await
            .expect("range");
        let kvs: Vec<String> = r
            .into_inner()
            .kvs
            .iter()
            .map(|kv| format!("{} lease {}", String::from_utf8_lossy(&kv.key), kv.lease))
            .collect();
        self.say(step, format!("{kvs:?}"));
    }

    /// The events of revisions `from..` on keys under `prefix`, waiting for `n`. With
    /// `by_revision`, only which events share a revision is compared, not the order of
    /// the revisions (leases expiring together are revoked in either order).
    async fn events(&mut self, step: &str, prefix: &str, from: i64, n: usize, by_revision: bool) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix),
                start_revision: from,
                ..Default::default()
            })),
        })
        .await
        .expect("queue");
        let mut stream = WatchClient::new(self.channel.clone())
            .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect("watch")
            .into_inner();
        let mut seen = Vec::new();
        let mut groups: std::collections::BTreeMap<i64, Vec<String>> = Default::default();
        while seen.len() < n {
            let r = tokio::time::timeout(Duration::from_secs(10), stream.message())
                .await
                .expect("events within 10 s")
                .expect("stream")
                .expect("open");
            for e in r.events {
                let kv = e.kv.expect("kv");
                groups.entry(kv.mod_revision).or_default().push(format!(
                    "{} {}",
                    e.r#type,
                    String::from_utf8_lossy(&kv.key)
                ));
                seen.push(format!(
                    "{} {} at {}",
                    e.r#type,
                    String::from_utf8_lossy(&kv.key),
                    kv.mod_revision
                ));
            }
        }
        if by_revision {
            let mut groups: Vec<Vec<String>> = groups.into_values().collect();
            groups.sort();
            self.say(step, format!("{groups:?}"));
        } else {
            self.say(step, format!("{seen:?}"));
        }
    }

    /// Waits until lease `id` is gone (expired and revoked by the leader).
    async fn until_gone(&mut self, step: &str, id: i64) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let r = self
                .lease
                .lease_time_to_live(LeaseTimeToLiveRequest { id, keys: false })
                .await
                .expect("time to live")
                .into_inner();
            if r.ttl == -1 {
                break;
            }
            assert!(Instant::now() < deadline, "lease {id} still there: {r:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.say(step, "gone".into());
    }

    async fn script(&mut self) {
        self.grant("grant 100 for 60 s", 100, 60).await;
        self.grant("grant 100 again", 100, 60).await;
        self.grant("grant 101 for 0 s", 101, 0).await;
        self.grant("grant 102 for 1 s", 102, 1).await;
        self.grant("grant 103 for -5 s", 103, -5).await;
        self.grant("grant over the maximum", 104, 9_000_000_001)
            .await;
        self.grant("grant the maximum", 105, 9_000_000_000).await;
        self.grant("grant with a server-chosen id", 0, 30).await;
        self.put("put a with 100", put("la", 100)).await;
        self.put("put b with 100", put("lb", 100)).await;
        self.put("put c with 100", put("lc", 100)).await;
        self.put("put d with an unknown lease", put("ld", 999))
            .await;
        let txn = TxnRequest {
            success: vec![RequestOp {
                request: Some(Op::RequestPut(put("le", 999))),
            }],
            ..Default::default()
        };
        let s = match self.kv.txn(txn).await {
            Ok(r) => format!("{:?}", r.into_inner().succeeded),
            Err(e) => err(e),
        };
        self.say("txn put with an unknown lease", s);
        self.put("move b to 105", put("lb", 105)).await;
        self.put("put c without a lease", put("lc", 0)).await;
        let keep = PutRequest {
            ignore_lease: true,
            ..put("la", 0)
        };
        self.put("put a keeping its lease", keep).await;
        self.keys("keys", "l").await;
        self.time_to_live("time to live of 100 with keys", 100, true)
            .await;
        self.time_to_live("time to live of 105", 105, false).await;
        self.time_to_live("time to live of 105 with keys", 105, true)
            .await;
        self.time_to_live("time to live of an unknown lease", 999, true)
            .await;
        let mut leases = self
            .lease
            .lease_leases(LeaseLeasesRequest {})
            .await
            .expect("leases")
            .into_inner();
        mask(&mut leases.header);
        // etcd lists them in map order: compared as a set.
        let mut ids: Vec<i64> = leases.leases.iter().map(|l| l.id).collect();
        ids.sort_unstable();
        let chosen = ids.iter().filter(|id| **id > 200).count();
        ids.retain(|id| *id <= 200);
        self.say(
            "leases",
            format!("{:?} {ids:?} and {chosen} chosen", leases.header),
        );
        self.keep_alive("keep 100 alive", 100).await;
        self.keep_alive("keep an unknown lease alive", 999).await;
        let before = self
            .kv
            .range(RangeRequest {
                key: b"l".to_vec(),
                ..Default::default()
            })
            .await
            .expect("range")
            .into_inner()
            .header
            .expect("header")
            .revision;
        self.put("put f with 100", put("lf", 100)).await;
        self.revoke("revoke 100", 100).await;
        self.events("events of the revocation", "l", before + 1, 3, false)
            .await;
        self.revoke("revoke 100 again", 100).await;
        self.revoke("revoke an unknown lease", 999).await;
        self.keys("keys after the revocation", "l").await;
        self.time_to_live("time to live of 100 after it", 100, false)
            .await;
        self.put("put g with 101 (2 s)", put("lg", 101)).await;
        self.put("put h with 101 (2 s)", put("lh", 101)).await;
        self.put("put i with 102 (2 s)", put("li", 102)).await;
        self.until_gone("101 expires", 101).await;
        self.until_gone("102 expires", 102).await;
        self.keys("keys after the expiry", "l").await;
        self.events("events of the expiry", "l", before + 6, 3, true)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_session_answers_as_etcd_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(&dir.path().join("etcd"));
    // etcd's default timing, on which its minimum TTL (2 s) depends.
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        s.heartbeat = Duration::from_millis(100);
        s.election_timeout = Duration::from_millis(1000);
    })
    .await;
    let mut theirs = Session::open(&etcd.endpoint).await;
    let mut ours = Session::open(&oxcd.endpoint().replace("http://", "")).await;
    theirs.script().await;
    ours.script().await;
    assert_same_answers("lease", &theirs.out, &ours.out);
    oxcd.stop().await;
}
