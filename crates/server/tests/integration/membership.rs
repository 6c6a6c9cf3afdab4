//! Membership as replicated state: a new cluster's log starts with one conf change per
//! initial member (as etcd's), which every member applies into its `members` table; a
//! member brought back by snapshot gets the same table; the tables survive restarts and
//! MemberList answers from them.

use crate::common;

use common::cluster::OneAway;
use oxcd_config::settings::Settings;
use oxcd_server::domains::membership::{MembershipState, table};
use oxcd_storage::backend::Backend;

/// The membership a stopped member's backend holds.
fn stored_membership(data_dir: &std::path::Path) -> MembershipState {
    let path = Settings::new("any", data_dir.to_path_buf()).backend_path();
    let backend = Backend::open(&path).expect("backend");
    table::load(&backend).expect("membership")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_holds_the_membership_including_one_brought_back_by_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = OneAway::start(dir.path()).await;
    let mut kv = c.members[0].client().await;
    // Past --snapshot-count (20 here): the member away comes back by snapshot.
    for i in 0..60 {
        kv.put(format!("k{i}"), "v", None).await.expect("put");
    }
    c.bring_back().await;
    let mut back = c.members[2].client().await;
    common::first_write_after(&mut back, "after", std::time::Instant::now()).await;
    let listed = back.member_list().await.expect("member list");
    let mut names: Vec<(String, bool)> = listed
        .members()
        .iter()
        .map(|m| (m.name().to_string(), m.is_learner()))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [("m0", false), ("m1", false), ("m2", false)].map(|(n, l)| (n.to_string(), l))
    );
    let dirs: Vec<_> = c.members.iter().map(|m| m.data_dir.clone()).collect();
    for m in c.members {
        m.stop().await;
    }
    let stored: Vec<MembershipState> = dirs.iter().map(|d| stored_membership(d)).collect();
    assert_eq!(stored[0].members.len(), 3, "{:?}", stored[0]);
    assert!(stored[0].removed.is_empty());
    assert_eq!(stored[0].voters().len(), 3);
    for s in &stored[1..] {
        assert_eq!(*s, stored[0], "every member holds the same membership");
    }
    let mut stored_names: Vec<&str> = stored[0]
        .members
        .values()
        .map(|m| m.name.as_str())
        .collect();
    stored_names.sort();
    assert_eq!(stored_names, ["m0", "m1", "m2"]);
}
