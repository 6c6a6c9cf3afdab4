//! One scripted session of the Lock and Election services, over raw gRPC, against a
//! real etcd (`oxcd_testkit::reference`) and against oxcd: locks taken, re-taken,
//! waited for, abandoned, refused for an unknown lease; campaigns, proclamations by the
//! leader and by others, resignations, leaders, and what an observer sees. Every answer
//! must be the same but for the ids and term in headers.

use crate::common;

use std::fmt::Debug;
use std::time::{Duration, Instant};

use common::InProc;
use common::etcd::{assert_same_answers, start_etcd};
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::lease_client::LeaseClient;
use oxcd_api::etcdserverpb::{LeaseGrantRequest, RangeRequest, ResponseHeader};
use oxcd_api::v3electionpb::election_client::ElectionClient;
use oxcd_api::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest,
    ProclaimResponse, ResignRequest, ResignResponse,
};
use oxcd_api::v3lockpb::lock_client::LockClient;
use oxcd_api::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// Leases the script holds (fixed ids, so keys are the same on both servers).
const A: i64 = 0x1a;
const B: i64 = 0x2b;
const C: i64 = 0x3c;

/// A response whose header ids and term are masked before it is compared.
trait Masked: Debug {
    fn header(&mut self) -> &mut Option<ResponseHeader>;
}

macro_rules! masked {
    ($($t:ty),*) => {$(
        impl Masked for $t {
            fn header(&mut self) -> &mut Option<ResponseHeader> {
                &mut self.header
            }
        }
    )*};
}

masked!(
    LockResponse,
    UnlockResponse,
    CampaignResponse,
    ProclaimResponse,
    LeaderResponse,
    ResignResponse
);

fn show<T: Masked>(r: Result<tonic::Response<T>, tonic::Status>) -> String {
    match r {
        Ok(r) => {
            let mut r = r.into_inner();
            if let Some(h) = r.header() {
                h.cluster_id = 0;
                h.member_id = 0;
                h.raft_term = 0;
            }
            format!("{r:?}")
        }
        Err(e) => format!("error {:?}: {}", e.code(), e.message()),
    }
}

/// The end of the range of keys starting with `prefix` (no 0xff bytes).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

struct Session {
    channel: Channel,
    lock: LockClient<Channel>,
    election: ElectionClient<Channel>,
    out: Vec<String>,
}

impl Session {
    async fn open(endpoint: &str) -> Session {
        let channel = common::etcd::channel(endpoint).await;
        Session {
            lock: LockClient::new(channel.clone()),
            election: ElectionClient::new(channel.clone()),
            channel,
            out: Vec::new(),
        }
    }

    fn say(&mut self, step: &str, what: String) {
        self.out.push(format!("{step}: {what}"));
    }

    async fn grant(&mut self, id: i64) {
        LeaseClient::new(self.channel.clone())
            .lease_grant(LeaseGrantRequest { ttl: 60, id })
            .await
            .expect("grant");
    }

    /// The keys under `prefix` with their create revisions and values.
    async fn keys(&mut self, step: &str, prefix: &str) {
        let r = KvClient::new(self.channel.clone())
            .range(RangeRequest {
                key: prefix.as_bytes().to_vec(),
                range_end: prefix_end(prefix),
                ..Default::default()
            })
            .await
            .expect("range")
            .into_inner();
        let kvs: Vec<String> = r
            .kvs
            .iter()
            .map(|kv| {
                format!(
                    "{}={} created {} lease {:x}",
                    String::from_utf8_lossy(&kv.key),
                    String::from_utf8_lossy(&kv.value),
                    kv.create_revision,
                    kv.lease
                )
            })
            .collect();
        self.say(step, format!("{kvs:?}"));
    }

    /// Waits until nothing is left under `prefix`... or `n` keys are (an abandoned
    /// request cleans up after the client went away, shortly).
    async fn until_keys(&mut self, prefix: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let count = KvClient::new(self.channel.clone())
                .range(RangeRequest {
                    key: prefix.as_bytes().to_vec(),
                    range_end: prefix_end(prefix),
                    count_only: true,
                    ..Default::default()
                })
                .await
                .expect("range")
                .into_inner()
                .count;
            if count as usize == n {
                return;
            }
            assert!(Instant::now() < deadline, "{count} keys under {prefix}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn lock_in_background(&self, name: &str, lease: i64) -> JoinHandle<String> {
        let mut client = self.lock.clone();
        let req = LockRequest {
            name: name.as_bytes().to_vec(),
            lease,
        };
        tokio::spawn(async move { show(client.lock(req).await) })
    }

    async fn lock(&mut self, step: &str, name: &str, lease: i64) {
        let s = self.lock_in_background(name, lease).await.expect("lock");
        self.say(step, s);
    }

    async fn unlock(&mut self, step: &str, key: &str) {
        let req = UnlockRequest {
            key: key.as_bytes().to_vec(),
        };
        let s = show(self.lock.unlock(req).await);
        self.say(step, s);
    }

    /// Whether a background request is still waiting after a while.
    async fn still_waiting(&mut self, step: &str, h: &JoinHandle<String>) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        self.say(step, format!("waiting {}", !h.is_finished()));
    }

    async fn finished(&mut self, step: &str, h: JoinHandle<String>) {
        let s = tokio::time::timeout(Duration::from_secs(10), h)
            .await
            .expect("answered within 10 s")
            .expect("task");
        self.say(step, s);
    }

    fn campaign_in_background(&self, name: &str, lease: i64, value: &str) -> JoinHandle<String> {
        let mut client = self.election.clone();
        let req = CampaignRequest {
            name: name.as_bytes().to_vec(),
            lease,
            value: value.as_bytes().to_vec(),
        };
        tokio::spawn(async move { show(client.campaign(req).await) })
    }

    async fn campaign(&mut self, step: &str, name: &str, lease: i64, value: &str) -> LeaderKey {
        let req = CampaignRequest {
            name: name.as_bytes().to_vec(),
            lease,
            value: value.as_bytes().to_vec(),
        };
        let r = self.election.campaign(req).await;
        let leader = r
            .as_ref()
            .ok()
            .and_then(|r| r.get_ref().leader.clone())
            .unwrap_or_default();
        let s = show(r);
        self.say(step, s);
        leader
    }

    async fn leader(&mut self, step: &str, name: &str) {
        let req = LeaderRequest {
            name: name.as_bytes().to_vec(),
        };
        let s = show(self.election.leader(req).await);
        self.say(step, s);
    }

    async fn proclaim(&mut self, step: &str, leader: Option<LeaderKey>, value: &str) {
        let req = ProclaimRequest {
            leader,
            value: value.as_bytes().to_vec(),
        };
        let s = show(self.election.proclaim(req).await);
        self.say(step, s);
    }

    async fn resign(&mut self, step: &str, leader: Option<LeaderKey>) {
        let s = show(self.election.resign(ResignRequest { leader }).await);
        self.say(step, s);
    }

    async fn script(&mut self) {
        for id in [A, B, C] {
            self.grant(id).await;
        }
        // Locks.
        self.lock("lock with A", "mylock", A).await;
        self.lock("lock with A again", "mylock", A).await;
        let second = self.lock_in_background("mylock", B);
        self.still_waiting("lock with B", &second).await;
        self.keys("lock keys", "mylock/").await;
        self.unlock("unlock A", "mylock/1a").await;
        self.finished("B gets the lock", second).await;
        self.lock("lock with an unknown lease", "mylock", 0x999)
            .await;
        self.lock("another lock with A", "other", A).await;
        self.lock("lock with an empty name", "", A).await;
        self.keys("keys under /", "/").await;
        self.unlock("unlock the empty-name lock", "/1a").await;
        self.leader("leader of an empty name", "").await;
        self.unlock("unlock a missing key", "mylock/nothere").await;
        self.unlock("unlock without a key", "").await;
        // A waiter whose client goes away deletes its key.
        let mut client = self.lock.clone();
        let req = LockRequest {
            name: b"mylock".to_vec(),
            lease: C,
        };
        let abandoned = tokio::time::timeout(Duration::from_millis(500), client.lock(req)).await;
        self.say("lock with C abandoned", format!("{}", abandoned.is_err()));
        self.until_keys("mylock/", 1).await;
        self.keys("lock keys after C gave up", "mylock/").await;
        self.unlock("unlock B", "mylock/2b").await;
        self.keys("lock keys at the end", "mylock/").await;

        // Elections.
        self.leader("leader of an empty election", "el").await;
        let observer = self.observe("el", 5);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let a = self.campaign("campaign A", "el", A, "v1").await;
        self.leader("leader", "el").await;
        let b = self.campaign_in_background("el", B, "w1");
        self.still_waiting("campaign B", &b).await;
        self.proclaim("proclaim v2 by A", Some(a.clone()), "v2")
            .await;
        self.proclaim("proclaim the same value", Some(a.clone()), "v2")
            .await;
        let stale = LeaderKey {
            rev: a.rev + 100,
            ..a.clone()
        };
        self.proclaim("proclaim by a stale leader", Some(stale.clone()), "x")
            .await;
        let b_key = LeaderKey {
            name: b"el".to_vec(),
            key: b"el/2b".to_vec(),
            rev: a.rev,
            lease: B,
        };
        self.proclaim("proclaim by a candidate", Some(b_key), "x")
            .await;
        self.proclaim("proclaim without a leader", None, "x").await;
        self.campaign("campaign A again with v3", "el", A, "v3")
            .await;
        self.campaign("campaign with an unknown lease", "el", 0x999, "u")
            .await;
        self.leader("leader after v3", "el").await;
        self.keys("election keys", "el/").await;
        self.resign("resign by a stale leader", Some(stale)).await;
        self.resign("resign without a leader", None).await;
        self.resign("resign A", Some(a.clone())).await;
        self.finished("B is elected", b).await;
        self.leader("leader after A resigned", "el").await;
        self.resign("resign A again", Some(a)).await;
        self.unlock("B's key deleted", "el/2b").await;
        self.leader("leader when none", "el").await;
        let empty = self
            .campaign("campaign with an empty name", "", A, "e")
            .await;
        self.leader("leader of the empty name", "").await;
        self.resign("resign the empty name", Some(empty)).await;
        let seen = tokio::time::timeout(Duration::from_secs(10), observer)
            .await
            .expect("observed within 10 s")
            .expect("task");
        for (i, s) in seen.into_iter().enumerate() {
            self.say(&format!("observed {i}"), s);
        }
    }

    /// The first `n` answers of an Observe stream.
    fn observe(&self, name: &str, n: usize) -> JoinHandle<Vec<String>> {
        let mut client = self.election.clone();
        let req = LeaderRequest {
            name: name.as_bytes().to_vec(),
        };
        tokio::spawn(async move {
            let mut stream = client.observe(req).await.expect("observe").into_inner();
            let mut seen = Vec::new();
            while seen.len() < n {
                match stream.message().await {
                    Ok(Some(r)) => seen.push(show(Ok(tonic::Response::new(r)))),
                    Ok(None) => {
                        seen.push("stream ended".into());
                        break;
                    }
                    Err(e) => {
                        seen.push(format!("error {:?}: {}", e.code(), e.message()));
                        break;
                    }
                }
            }
            seen
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_and_election_session_answers_as_etcd_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(&dir.path().join("etcd"));
    let oxcd = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let mut theirs = Session::open(&etcd.endpoint).await;
    let mut ours = Session::open(&oxcd.endpoint().replace("http://", "")).await;
    theirs.script().await;
    ours.script().await;
    if std::env::var_os("SHOW_STEPS").is_some() {
        for o in &ours.out {
            eprintln!("{o}");
        }
    }
    assert_same_answers("lock and election", &theirs.out, &ours.out);
    oxcd.stop().await;
}
