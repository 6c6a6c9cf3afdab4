use super::*;
use std::sync::mpsc::channel;

use crate::persist;
use raft::prelude::{ConfState, SnapshotMetadata};

fn cfg(dir: &std::path::Path, applied: u64) -> NodeConfig {
    NodeConfig {
        id: 1,
        cluster_id: 9,
        voters: vec![1],
        members: Vec::new(),
        bootstrap_contexts: Vec::new(),
        conf_state: None,
        wal_dir: dir.join("wal"),
        heartbeat: Duration::from_millis(10),
        election_ticks: 10,
        pre_vote: true,
        unsafe_no_fsync: false,
        applied,
        format: None,
        max_wals: 5,
        catch_up_entries: CATCH_UP_ENTRIES,
        fixed_election_timeout: false,
        incarnation: incarnation(),
        force_new_cluster: None,
    }
}

/// Proposes `n` entries and collects the normal entries applied, reporting them applied.
fn propose_and_apply(h: &RaftHandle, events: &Receiver<Event>, n: usize) -> Vec<Vec<u8>> {
    for i in 0..n {
        let (tx, rx) = channel();
        h.propose(format!("p{i}").into_bytes(), None, move |r| {
            let _ = tx.send(r.is_ok());
        });
        // Retry until the single member has elected itself.
        if !rx.recv().unwrap_or(false) {
            std::thread::sleep(Duration::from_millis(20));
            return propose_and_apply(h, events, n);
        }
    }
    let mut got = Vec::new();
    while got.len() < n {
        match events
            .recv_timeout(Duration::from_secs(5))
            .expect("committed entries")
        {
            Event::Committed(ents) => {
                for e in ents {
                    if !e.data.is_empty() {
                        got.push(e.data.to_vec());
                    }
                    h.applied(e.index, None).expect("applied");
                }
            }
            Event::Snapshot(_) => panic!("unexpected snapshot"),
        }
    }
    got
}

#[test]
fn single_member_commits_and_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, events, thread) = start(cfg(dir.path(), 0), NoPeers).expect("start");
    let got = propose_and_apply(&h, &events, 20);
    assert_eq!(got.len(), 20);
    assert_eq!(got[19], b"p19");
    let (tx, rx) = channel();
    h.read_index(move |r| {
        let _ = tx.send(r);
    });
    let ri = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("read index")
        .expect("ok");
    assert!(
        ri >= 21,
        "read index {ri} covers the 20 proposals and the leader's empty entry"
    );
    h.stop();
    thread.join().expect("join").expect("clean stop");
    drop(events);

    // Restart with applied = 0: every entry is delivered again, in order.
    let (h, events, thread) = start(cfg(dir.path(), 0), NoPeers).expect("restart");
    let mut replayed = Vec::new();
    while replayed.len() < 20 {
        if let Event::Committed(ents) = events.recv_timeout(Duration::from_secs(5)).expect("replay")
        {
            replayed.extend(
                ents.into_iter()
                    .filter(|e| !e.data.is_empty())
                    .map(|e| e.data.to_vec()),
            );
        }
    }
    assert_eq!(replayed, got);
    let deadline = Instant::now() + Duration::from_secs(5);
    while h.status().term() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        h.status().term() >= 2,
        "a restart elects again in a new term"
    );
    h.stop();
    thread.join().expect("join").expect("clean stop");
}

#[test]
fn compaction_keeps_replay_after_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, events, thread) = start(cfg(dir.path(), 0), NoPeers).expect("start");
    propose_and_apply(&h, &events, 30);
    // Every entry the loop committed was handed over and reported applied.
    let applied = h.status().commit();
    h.compact(applied - 5, 0).expect("compact");
    h.stop();
    thread.join().expect("join").expect("clean stop");
    drop(events);
    // The state machine durably applied up to `applied - 5`; entries after it come back.
    let (h, events, thread) = start(cfg(dir.path(), applied - 5), NoPeers).expect("restart");
    let mut n = 0;
    while n < 5 {
        if let Event::Committed(ents) = events.recv_timeout(Duration::from_secs(5)).expect("replay")
        {
            n += ents.iter().filter(|e| !e.data.is_empty()).count();
            assert!(ents.iter().all(|e| e.index > applied - 5));
        }
    }
    h.stop();
    thread.join().expect("join").expect("clean stop");
}

#[test]
fn a_snapshot_installed_in_the_wal_but_not_the_backend_is_handed_over_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, events, thread) = start(cfg(dir.path(), 0), NoPeers).expect("start");
    propose_and_apply(&h, &events, 3);
    h.stop();
    thread.join().expect("join").expect("clean stop");
    drop(events);
    // As if a leader's snapshot at 100 was recorded and the member died before the
    // state machine installed it.
    let (mut wal, _) = Wal::open(&dir.path().join("wal"), DEFAULT_SEGMENT_SIZE).expect("open");
    let mut meta = SnapshotMetadata {
        index: 100,
        term: 1,
        ..Default::default()
    };
    meta.set_conf_state(ConfState {
        voters: vec![1],
        ..Default::default()
    });
    wal.install_snapshot(100, &persist::encode_snapshot_meta(&meta));
    wal.sync().expect("sync");
    drop(wal);
    let (h, events, thread) = start(cfg(dir.path(), 4), NoPeers).expect("restart");
    match events.recv_timeout(Duration::from_secs(5)).expect("event") {
        Event::Snapshot(s) => assert_eq!(s.get_metadata().index, 100),
        Event::Committed(e) => panic!("expected the snapshot first, got entries {e:?}"),
    }
    h.applied(100, None).expect("applied");
    let got = propose_and_apply(&h, &events, 2);
    assert_eq!(got.len(), 2);
    assert!(h.status().last_index() > 100);
    h.stop();
    thread.join().expect("join").expect("clean stop");
}

/// Regression (found by the 50,000-writes catch-up test in CI): a follower that timed out
/// while its state machine was still installing a leader's snapshot panicked, because
/// raft looked for the entries below the snapshot when it campaigned.
#[test]
fn a_follower_can_campaign_while_the_state_machine_installs_a_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(dir.path(), 0);
    c.voters = vec![1, 2, 3];
    let (h, events, thread) = start(c, NoPeers).expect("start");
    let mut meta = SnapshotMetadata {
        index: 100,
        term: 1,
        ..Default::default()
    };
    meta.set_conf_state(ConfState {
        voters: vec![1, 2, 3],
        ..Default::default()
    });
    let mut snap = Snapshot::default();
    snap.set_metadata(meta);
    let mut m = Message::default();
    m.set_msg_type(raft::prelude::MessageType::MsgSnapshot);
    m.from = 2;
    m.to = 1;
    m.term = 1;
    m.set_snapshot(snap);
    h.step(m).expect("step");
    loop {
        match events.recv_timeout(Duration::from_secs(5)).expect("event") {
            Event::Snapshot(s) => {
                assert_eq!(s.get_metadata().index, 100);
                break;
            }
            Event::Committed(_) => {}
        }
    }
    // The state machine has not reported the snapshot applied yet; the election timeout
    // passes (or a campaign is asked for) meanwhile.
    h.campaign().expect("campaign");
    std::thread::sleep(Duration::from_millis(300));
    h.stop();
    thread
        .join()
        .expect("the raft thread did not panic")
        .expect("clean stop");
}

#[test]
fn leadership_is_published_when_the_member_becomes_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, events, thread) = start(cfg(dir.path(), 0), NoPeers).expect("start");
    let mut leadership = h.leadership();
    propose_and_apply(&h, &events, 1);
    let now = *leadership.borrow_and_update();
    assert_eq!(now.leader, 1, "the single member leads: {now:?}");
    assert!(now.term >= 1);
    assert_eq!(
        (now.leader, now.term),
        (h.status().leader(), h.status().term())
    );
    h.stop();
    thread.join().expect("join").expect("clean stop");
}

#[test]
fn forcing_a_new_cluster_drops_uncommitted_entries_and_removes_the_others() {
    use raft::prelude::{ConfChange, ConfChangeType, Entry, EntryType};
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cfg(dir.path(), 3);
    let normal = |index: u64| Entry {
        index,
        term: 2,
        data: b"x".to_vec().into(),
        ..Default::default()
    };
    let add = |index: u64, id: u64| {
        let mut cc = ConfChange::default();
        cc.set_change_type(ConfChangeType::AddLearnerNode);
        cc.node_id = id;
        let mut e = Entry {
            index,
            term: 2,
            data: persist::encode_conf_change(&cc).into(),
            ..Default::default()
        };
        e.set_entry_type(EntryType::EntryConfChange);
        e
    };
    let mut core = crate::log_store::LogCore {
        conf_state: ConfState {
            voters: vec![1, 2, 3],
            ..Default::default()
        },
        entries: vec![
            normal(1),
            normal(2),
            normal(3),
            add(4, 4),
            normal(5),
            normal(6),
        ],
        ..Default::default()
    };
    core.hard_state.term = 2;
    // Committed up to the learner's addition (applied only to 3); 5 and 6 may be lost.
    core.hard_state.commit = 4;
    let added = recovery::force_new_cluster(&mut core, &c, b"me".to_vec()).expect("forced");
    let removed: Vec<u64> = added
        .iter()
        .map(|e| {
            let cc = persist::decode_conf_change(&e.data).expect("conf change");
            assert_eq!(cc.get_change_type(), ConfChangeType::RemoveNode);
            assert_eq!(e.term, 2);
            cc.node_id
        })
        .collect();
    assert_eq!(removed, [2, 3, 4], "every other member, the learner too");
    assert_eq!(
        core.entries.iter().map(|e| e.index).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7],
        "5 and 6 replaced by the removals"
    );
    assert_eq!(core.hard_state.commit, 7);
}

/// A restart holds only the catch-up entries before the applied index: the log starts
/// at an anchor after the last snapshot mark, and the member goes on from there.
#[test]
fn a_restart_holds_the_catch_up_entries_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, events, thread) = start(cfg(dir.path(), 0), NoPeers).expect("start");
    propose_and_apply(&h, &events, 30);
    let applied = h.status().commit();
    h.stop();
    thread.join().expect("join").expect("clean stop");
    drop(events);
    let mut restart = cfg(dir.path(), applied);
    restart.catch_up_entries = 5;
    let (_, log, _) = open_log(&restart).expect("open");
    {
        let core = log.rl();
        assert_eq!(
            core.start.0,
            applied - 5,
            "anchored at the catch-up entries"
        );
        assert_eq!(core.last_index(), applied);
        assert_eq!(core.hard_state.commit, applied);
        assert_eq!(
            core.snapshot.as_ref().map(|s| s.get_metadata().index),
            Some(applied - 5)
        );
    }
    drop(log);
    let (h, events, thread) = start(restart, NoPeers).expect("restart");
    let got = propose_and_apply(&h, &events, 3);
    assert_eq!(got.len(), 3);
    h.stop();
    thread.join().expect("join").expect("clean stop");
}
