use super::*;
use oxcd_storage::backend::Backend;

fn member(id: u64, url: &str, learner: bool) -> MemberInfo {
    MemberInfo {
        id,
        name: format!("m{id}"),
        peer_urls: vec![url.to_string()],
        client_urls: Vec::new(),
        is_learner: learner,
    }
}

fn add(id: u64, url: &str, learner: bool) -> Change {
    Change::Add {
        member: member(id, url, learner),
        max_learners: 1,
    }
}

fn three() -> MembershipState {
    let mut s = MembershipState::default();
    for (id, url) in [
        (1, "http://a:2380"),
        (2, "http://b:2380"),
        (3, "http://c:2380"),
    ] {
        s.apply(&add(id, url, false));
    }
    s
}

#[test]
fn changes_are_checked_with_etcds_rules() {
    let mut s = three();
    assert_eq!(
        s.validate(&add(2, "http://x:2380", false)),
        Err(ChangeRefused::IdExists)
    );
    assert_eq!(
        s.validate(&add(4, "http://b:2380", false)),
        Err(ChangeRefused::PeerUrlExists)
    );
    assert_eq!(
        s.validate(&Change::Promote { id: 2 }),
        Err(ChangeRefused::NotLearner)
    );
    assert_eq!(
        s.validate(&Change::Promote { id: 9 }),
        Err(ChangeRefused::IdNotFound)
    );
    assert_eq!(
        s.validate(&Change::Remove { id: 9 }),
        Err(ChangeRefused::IdNotFound)
    );
    assert_eq!(
        s.validate(&Change::Update {
            id: 9,
            peer_urls: vec!["http://z:2380".into()]
        }),
        Err(ChangeRefused::IdNotFound)
    );
    assert_eq!(
        s.validate(&Change::Update {
            id: 1,
            peer_urls: vec!["http://c:2380".into()]
        }),
        Err(ChangeRefused::PeerUrlExists),
        "another member's URL"
    );
    assert_eq!(
        s.validate(&Change::Update {
            id: 1,
            peer_urls: vec!["http://a:2380".into(), "http://a2:2380".into()]
        }),
        Ok(()),
        "its own URL stays"
    );
    // One learner at most (the limit the proposer sent), then a second is refused.
    s.apply(&add(4, "http://d:2380", true));
    assert_eq!(s.learners(), 1);
    assert_eq!(
        s.validate(&add(5, "http://e:2380", true)),
        Err(ChangeRefused::TooManyLearners)
    );
    assert_eq!(
        s.validate(&Change::Add {
            member: member(5, "http://e:2380", true),
            max_learners: 2
        }),
        Ok(())
    );
    assert_eq!(s.voters(), vec![1, 2, 3]);
    s.apply(&Change::Promote { id: 4 });
    assert_eq!(s.voters(), vec![1, 2, 3, 4]);
    // A removed id never comes back.
    s.apply(&Change::Remove { id: 2 });
    for again in [
        add(2, "http://b:2380", false),
        Change::Remove { id: 2 },
        Change::Promote { id: 2 },
    ] {
        assert_eq!(s.validate(&again), Err(ChangeRefused::IdRemoved));
    }
    assert_eq!(
        s.validate(&add(6, "http://b:2380", false)),
        Ok(()),
        "a removed member's URL is free"
    );
}

#[test]
fn refusals_answer_etcds_grpc_errors() {
    for (refused, grpc) in [
        (ChangeRefused::IdRemoved, "etcdserver: member not found"),
        (ChangeRefused::IdNotFound, "etcdserver: member not found"),
        (
            ChangeRefused::IdExists,
            "etcdserver: member ID already exist",
        ),
        (
            ChangeRefused::PeerUrlExists,
            "etcdserver: Peer URLs already exists",
        ),
        (
            ChangeRefused::TooManyLearners,
            "etcdserver: too many learner members in cluster",
        ),
        (
            ChangeRefused::NotLearner,
            "etcdserver: can only promote a learner member",
        ),
    ] {
        assert_eq!(EtcdError::from(refused).to_string(), grpc);
    }
    assert_eq!(
        ChangeRefused::NotLearner.to_string(),
        "membership: can only promote a learner member"
    );
}

#[test]
fn the_tables_hold_what_the_mirror_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = Backend::open(&dir.path().join("db")).expect("backend");
    let m = Membership::default();
    let changes = [
        add(1, "http://a:2380", false),
        add(2, "http://b:2380", true),
        Change::Promote { id: 2 },
        add(3, "http://c:2380", false),
        Change::Update {
            id: 3,
            peer_urls: vec!["http://c2:2380".into()],
        },
        Change::Remove { id: 1 },
    ];
    let tx = b.begin_batch().expect("batch");
    for c in &changes {
        m.apply(c).expect("valid");
        table::write(&tx, &m.state(), c).expect("write");
    }
    assert_eq!(
        m.apply(&Change::Remove { id: 1 }),
        Err(ChangeRefused::IdRemoved),
        "a refused change changes nothing"
    );
    tx.commit(6, 1, true).expect("commit");
    let loaded = table::load(&b).expect("load");
    assert_eq!(loaded, *m.state());
    assert_eq!(loaded.voters(), vec![2, 3]);
    assert_eq!(loaded.members[&3].peer_urls, vec!["http://c2:2380"]);
    assert!(loaded.removed.contains(&1));
}

/// A published name and client URLs go into the member's row, as etcd's members bucket
/// holds them: a member that replays the attributes entry and one that imported etcd's
/// backend after it hold the same rows (their state hashes are compared). A removed or
/// unknown member is left alone.
#[test]
fn published_attributes_go_into_the_members_row() {
    let mut s = three();
    s.apply(&Change::Remove { id: 3 });
    let m = Membership::of_member(1, s);
    let attrs = |id: u64| oxcd_api::oxcdpb::MemberAttributes {
        id,
        name: format!("n{id}"),
        client_urls: vec![format!("http://c{id}:2379")],
    };
    let row = m.set_attributes(&attrs(2)).expect("a member");
    assert_eq!(row.name, "n2");
    assert_eq!(row.client_urls, ["http://c2:2379"]);
    assert_eq!(row.peer_urls, ["http://b:2380"]);
    assert_eq!(m.state().members[&2], row);
    assert_eq!(m.set_attributes(&attrs(3)), None);
    assert_eq!(m.set_attributes(&attrs(9)), None);
    assert_eq!(m.state().members.len(), 2);
}
