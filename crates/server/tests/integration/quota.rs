//! The space quota and the NOSPACE alarm, as etcd 3.5 has them: a member whose backend
//! would grow past `--quota-backend-bytes` refuses puts, txns with puts and lease grants
//! with "etcdserver: mvcc: database space exceeded" and raises its NOSPACE alarm; while
//! the alarm is raised every member refuses those (and only those) requests, across
//! restarts, until an operator frees space and disarms it. Driven by the etcd-client
//! crate and etcdctl 3.4; `quota_parity` compares the answers with a real etcd's.

use std::path::Path;
use std::process::Command;

use etcd_client::{
    AlarmAction, AlarmOptions, AlarmType, Client, Compare, CompareOp, DeleteOptions, Error, Txn,
    TxnOp,
};

use oxcd_storage::backend::Backend;

use crate::common::{self, InProc};

const NO_SPACE: &str = "etcdserver: mvcc: database space exceeded";

/// The value of the puts that fill a backend (etcd's verification used 12 KB values).
fn big_value() -> Vec<u8> {
    vec![b'a'; 12_000]
}

fn assert_no_space<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    match r {
        Err(Error::GRpcStatus(s)) => assert_eq!(
            (s.code(), s.message()),
            (tonic::Code::ResourceExhausted, NO_SPACE),
            "{what}"
        ),
        other => panic!("{what}: expected NOSPACE, got {other:?}"),
    }
}

/// Runs etcdctl 3.4 against `endpoint`: stdout, stderr without the client's JSON log
/// lines (its retry warnings), exit code.
fn etcdctl(endpoint: &str, args: &[&str]) -> (String, String, i32) {
    let out = Command::new("/usr/bin/etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .output()
        .expect("etcdctl (apt-get install -y etcd-client)");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        without_json_lines(&String::from_utf8_lossy(&out.stderr)),
        out.status.code().unwrap_or(-1),
    )
}

/// `text` without its JSON lines (etcdctl's client log).
pub(crate) fn without_json_lines(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A txn whose success branch holds a put (when `in_success`), else its failure branch.
fn txn_with_put(in_success: bool) -> Txn {
    let put = vec![TxnOp::put("t", "v", None)];
    let get = vec![TxnOp::get("k0", None)];
    let txn = Txn::new().when([Compare::version("k0", CompareOp::Greater, 0)]);
    if in_success {
        txn.and_then(put).or_else(get)
    } else {
        txn.and_then(get).or_else(put)
    }
}

async fn member_id(c: &mut Client) -> u64 {
    c.status()
        .await
        .expect("status")
        .header()
        .expect("header")
        .member_id()
}

/// The alarms raised, as (member, type).
async fn alarms(c: &mut Client) -> Vec<(u64, AlarmType)> {
    c.alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .expect("alarm list")
        .alarms()
        .iter()
        .map(|a| (a.member_id(), a.alarm()))
        .collect()
}

/// What passes while NOSPACE is raised: reads, deletes, txns without puts, compactions,
/// lease revocations, keepalives and TimeToLive, alarm, auth and member requests.
async fn what_costs_nothing_passes(c: &mut Client, lease: i64) {
    c.get("k0", None).await.expect("get");
    let txn = Txn::new().and_then([TxnOp::get("k0", None), TxnOp::delete("gone", None)]);
    c.txn(txn).await.expect("a txn without puts");
    c.delete("k1", None).await.expect("delete");
    let rev = common::revision_at(c, "k0").await;
    c.compact(rev, None).await.expect("compact");
    let (mut keeper, mut answers) = c.lease_keep_alive(lease).await.expect("keepalive");
    keeper.keep_alive().await.expect("send keepalive");
    let answer = answers.message().await.expect("answer").expect("one");
    assert!(answer.ttl() > 0, "the lease is renewed");
    c.lease_time_to_live(lease, None).await.expect("ttl");
    c.lease_revoke(lease).await.expect("revoke");
    c.user_add("u", "p", None)
        .await
        .expect("auth requests pass");
    c.user_delete("u").await.expect("auth requests pass");
    c.member_list().await.expect("member list");
}

/// A raised NOSPACE alarm refuses what costs space on its own, whatever the backend's
/// size: here the quota is etcd's 2 GiB default and the alarm is raised by hand for a
/// member that does not exist (any member's alarm caps the cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_nospace_alarm_refuses_what_costs_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    let mut c = m.client().await;
    c.put("k0", "v0", None).await.expect("put");
    c.put("k1", "v1", None).await.expect("put");
    let lease = c.lease_grant(60, None).await.expect("grant").id();

    let other = 0x1234_u64;
    let mut on = AlarmOptions::new();
    on.with_member(other);
    let r = c
        .alarm(AlarmAction::Activate, AlarmType::Nospace, Some(on))
        .await
        .expect("raise");
    assert_eq!(r.alarms().len(), 1);
    assert_eq!(alarms(&mut c).await, [(other, AlarmType::Nospace)]);
    // A GET naming a type lists only alarms of that type, as etcd's.
    for (asked, listed) in [(AlarmType::Nospace, 1), (AlarmType::Corrupt, 0)] {
        let got = c.alarm(AlarmAction::Get, asked, None).await.expect("get");
        assert_eq!(got.alarms().len(), listed, "{asked:?}");
    }
    let status = c.status().await.expect("status");
    assert_eq!(
        status.errors(),
        [format!("memberID:{other} alarm:NOSPACE ")]
    );

    assert_no_space("put", c.put("k0", "v", None).await);
    assert_no_space("txn, put on success", c.txn(txn_with_put(true)).await);
    assert_no_space("txn, put on failure", c.txn(txn_with_put(false)).await);
    let nested = Txn::new().and_then([TxnOp::txn(
        Txn::new().and_then([TxnOp::put("n", "v", None)]),
    )]);
    assert_no_space("a put in a nested txn", c.txn(nested).await);
    assert_no_space("lease grant", c.lease_grant(60, None).await);
    assert_eq!(
        c.get("k0", None).await.expect("get").kvs()[0].value(),
        b"v0",
        "nothing refused was written"
    );
    let endpoint = m.addr.to_string();
    assert_eq!(
        etcdctl(&endpoint, &["put", "k0", "v"]),
        (String::new(), format!("Error: {NO_SPACE}\n"), 1)
    );
    assert_eq!(
        etcdctl(&endpoint, &["lease", "grant", "60"]),
        (
            String::new(),
            format!("Error: failed to grant lease ({NO_SPACE})\n"),
            1
        )
    );
    what_costs_nothing_passes(&mut c, lease).await;

    // The alarm is replicated state: a restart keeps it.
    m.stop().await;
    let m = InProc::start(data, |_| {}).await;
    let mut c = m.client().await;
    assert_eq!(alarms(&mut c).await, [(other, AlarmType::Nospace)]);
    assert_no_space("put after a restart", c.put("k0", "v", None).await);

    let endpoint = m.addr.to_string();
    assert_eq!(
        etcdctl(&endpoint, &["alarm", "disarm"]),
        (
            format!("memberID:{other} alarm:NOSPACE \n"),
            String::new(),
            0
        )
    );
    assert!(alarms(&mut c).await.is_empty());
    c.put("k0", "v2", None)
        .await
        .expect("writes pass once disarmed");
    c.txn(txn_with_put(true)).await.expect("txn with a put");
    c.lease_grant(60, None).await.expect("lease grant");
    assert!(c.status().await.expect("status").errors().is_empty());
    m.stop().await;
}

/// The quota the filling tests set: room for some puts beyond a fresh backend file
/// (oxcd's redb file starts larger than etcd's bbolt one, and may shrink on its first
/// commits, so the quota is set relative to the file a fresh backend creates).
pub(crate) fn small_quota(dir: &Path) -> i64 {
    let fresh = Backend::open(&dir.join("probe.db"))
        .expect("a fresh backend")
        .size();
    i64::try_from(fresh + 256 * 1024).expect("quota")
}

/// Puts 12 KB values under `big/` until one is refused; returns how many passed. The
/// refusal must be etcd's NOSPACE.
async fn fill(c: &mut Client) -> usize {
    let value = big_value();
    for i in 0..2000 {
        match c.put(format!("big/{i:04}"), value.clone(), None).await {
            Ok(_) => {}
            Err(e) => {
                assert_no_space("the put past the quota", Err::<(), _>(e));
                return i;
            }
        }
    }
    panic!("2000 puts of 12 KB never reached the quota");
}

/// A member filled to its quota raises its own NOSPACE alarm once (however many
/// requests are refused together), keeps it across a restart, and accepts writes again
/// once an operator has deleted data, compacted, defragmented and disarmed the alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filling_the_quota_raises_nospace_until_an_operator_frees_space() {
    let dir = tempfile::tempdir().expect("tempdir");
    let quota = small_quota(dir.path());
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |s| s.quota_backend_bytes = quota).await;
    let mut c = m.client().await;
    let me = member_id(&mut c).await;
    c.put("k0", "v0", None).await.expect("put");
    c.put("k1", "v1", None).await.expect("put");
    let lease = c.lease_grant(60, None).await.expect("grant").id();
    let passed = fill(&mut c).await;
    assert!(passed > 0, "the quota leaves room for some puts");

    assert_eq!(alarms(&mut c).await, [(me, AlarmType::Nospace)]);
    let endpoint = m.addr.to_string();
    assert_eq!(
        etcdctl(&endpoint, &["alarm", "list"]),
        (format!("memberID:{me} alarm:NOSPACE \n"), String::new(), 0)
    );
    assert_eq!(
        c.status().await.expect("status").errors(),
        [format!("memberID:{me} alarm:NOSPACE ")]
    );

    // Requests refused together raise the alarm once: still one alarm, and each refusal
    // is etcd's.
    let refused = futures::future::join_all((0..8).map(|i| {
        let mut c = c.clone();
        async move { c.put(format!("more/{i}"), big_value(), None).await }
    }))
    .await;
    for r in refused {
        assert_no_space("a put racing others", r);
    }
    assert_eq!(alarms(&mut c).await, [(me, AlarmType::Nospace)]);

    assert_no_space("a small put", c.put("small", "v", None).await);
    assert_no_space("txn, put on success", c.txn(txn_with_put(true)).await);
    assert_no_space("txn, put on failure", c.txn(txn_with_put(false)).await);
    assert_no_space("lease grant", c.lease_grant(60, None).await);
    assert_eq!(
        etcdctl(&endpoint, &["put", "small", "v"]),
        (String::new(), format!("Error: {NO_SPACE}\n"), 1)
    );
    what_costs_nothing_passes(&mut c, lease).await;

    m.stop().await;
    let m = InProc::start(data, |s| s.quota_backend_bytes = quota).await;
    let mut c = m.client().await;
    assert_eq!(
        alarms(&mut c).await,
        [(me, AlarmType::Nospace)],
        "the alarm survives a restart"
    );
    assert_no_space("a put after the restart", c.put("small", "v", None).await);

    // Recovery, as etcd's documentation has it: free space, compact, defragment, disarm.
    c.delete("big/", Some(DeleteOptions::new().with_prefix()))
        .await
        .expect("delete the big values");
    let rev = common::revision_at(&mut c, "k0").await;
    c.compact(rev, None).await.expect("compact");
    c.defragment().await.expect("defragment");
    assert!(
        c.status().await.expect("status").db_size() < quota,
        "defragmenting gives the space back"
    );
    assert_no_space(
        "a put while the alarm is still raised",
        c.put("small", "v", None).await,
    );
    let endpoint = m.addr.to_string();
    assert_eq!(
        etcdctl(&endpoint, &["alarm", "disarm"]),
        (format!("memberID:{me} alarm:NOSPACE \n"), String::new(), 0)
    );
    c.put("small", "v", None).await.expect("writes pass again");
    c.txn(txn_with_put(true)).await.expect("txn with a put");
    c.lease_grant(60, None).await.expect("lease grant");
    assert!(alarms(&mut c).await.is_empty());
    m.stop().await;
}

/// etcd's `TestAlarm` (etcd's `tests/common/alarm_test.go`) against `endpoint`, whose
/// quota is 13 pages: what each step answered, and how many 4 KiB puts fitted.
async fn etcds_alarm_test(endpoint: &str) -> (Vec<String>, usize) {
    let mut c = Client::connect([endpoint], None).await.expect("connect");
    let answer = |r: Result<(), Error>| match r {
        Ok(()) => "ok".to_string(),
        Err(Error::GRpcStatus(s)) => format!("{:?}: {}", s.code(), s.message()),
        Err(e) => format!("{e}"),
    };
    let mut steps = Vec::new();
    let small = "a".repeat(64);
    steps.push(answer(
        c.put("1st_test", small.clone(), None).await.map(drop),
    ));
    // Chunks of a page until the quota refuses one.
    let chunk = "b".repeat(4096);
    let mut fitted = 0;
    loop {
        match c.put("2nd_test", chunk.clone(), None).await {
            Ok(_) if fitted < 10_000 => fitted += 1,
            r => {
                steps.push(answer(r.map(drop)));
                break;
            }
        }
    }
    let raised = alarms(&mut c).await;
    steps.push(format!(
        "alarms: {:?}",
        raised.iter().map(|a| a.1).collect::<Vec<_>>()
    ));
    steps.push(answer(
        c.put("3rd_test", small.clone(), None).await.map(drop),
    ));
    let rev = c
        .status()
        .await
        .expect("status")
        .header()
        .expect("header")
        .revision();
    let physical = etcd_client::CompactionOptions::new().with_physical();
    steps.push(answer(c.compact(rev, Some(physical)).await.map(drop)));
    steps.push(answer(c.defragment().await.map(drop)));
    for (member, alarm) in raised {
        let mut who = AlarmOptions::new();
        who.with_member(member);
        steps.push(answer(
            c.alarm(AlarmAction::Deactivate, alarm, Some(who))
                .await
                .map(drop),
        ));
    }
    steps.push(answer(c.put("4th_test", small, None).await.map(drop)));
    (steps, fitted)
}

/// A quota of a few pages, as etcd's own alarm tests set (13 pages): a fresh member
/// takes the small put etcd takes, fills up, raises NOSPACE, and takes a small put again
/// once compacted, defragmented and disarmed, step for step as etcd 3.5.16. How many
/// page-sized puts fit is not compared: etcd's check reads the size its last backend
/// commit left (every 100 ms), so it takes a burst of puts past its quota. oxcd's quota counts
/// the data beyond a fresh member's backend on top of etcd's empty one
/// (`Backend::quota_size`): its fresh file is 84-92 KiB, bbolt's 20 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_of_a_few_pages_takes_what_etcd_takes() {
    const QUOTA: i64 = 13 * 4096;
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--quota-backend-bytes".to_string(), QUOTA.to_string()];
    let etcd = crate::common::etcd::start_etcd_with(&dir.path().join("etcd"), "http", &flags, &[]);
    let (theirs, etcd_fitted) = etcds_alarm_test(&etcd.endpoint).await;
    drop(etcd);

    let m = InProc::start(dir.path().join("oxcd"), |s| s.quota_backend_bytes = QUOTA).await;
    let fresh = {
        let mut c = m.client().await;
        c.status().await.expect("status").db_size()
    };
    let (ours, oxcd_fitted) = etcds_alarm_test(&m.addr.to_string()).await;
    m.stop().await;
    eprintln!("4 KiB puts that fitted in 13 pages: etcd {etcd_fitted}, oxcd {oxcd_fitted}");
    assert!(
        u64::try_from(fresh).expect("size") <= oxcd_storage::backend::EMPTY_SIZE,
        "a fresh member's backend ({fresh} B) is larger than the quota takes as empty"
    );
    assert_eq!(ours, theirs);
}
