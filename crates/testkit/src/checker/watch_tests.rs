//! The watch check on small hand-made runs: one that holds, and one broken copy per
//! guarantee, each refused with the reason.

use super::*;

fn op(id: usize, op: Op, invoke: u64, outcome: Outcome) -> Operation {
    Operation {
        id,
        client: id,
        op,
        invoke,
        complete: invoke + 10,
        outcome,
    }
}

fn history() -> Vec<Operation> {
    vec![
        op(
            0,
            Op::Put {
                key: "k1".into(),
                value: "a".into(),
            },
            0,
            Outcome::Ok(Response::Write { rev: 2 }),
        ),
        op(
            1,
            Op::Put {
                key: "k2".into(),
                value: "b".into(),
            },
            20,
            Outcome::Ok(Response::Write { rev: 3 }),
        ),
        op(
            2,
            Op::Delete { key: "k1".into() },
            40,
            Outcome::Indeterminate("timed out".into()),
        ),
        op(
            3,
            Op::Get {
                key: "k2".into(),
                serializable: false,
            },
            60,
            Outcome::Ok(Response::Get {
                rev: 4,
                kv: Some(("b".into(), 3)),
            }),
        ),
        op(
            4,
            Op::CasValue {
                key: "k2".into(),
                expect: Some("b".into()),
                value: "c".into(),
            },
            80,
            Outcome::Ok(Response::Cas {
                rev: 5,
                succeeded: true,
            }),
        ),
    ]
}

fn put(rev: i64, key: &str, value: &str, create_rev: i64, version: i64) -> Event {
    Event {
        rev,
        key: key.into(),
        value: Some(value.into()),
        create_rev,
        version,
        prev: None,
    }
}

/// The events the history made, by revision.
fn events() -> Vec<Event> {
    vec![
        put(2, "k1", "a", 2, 1),
        put(3, "k2", "b", 3, 1),
        Event {
            rev: 4,
            key: "k1".into(),
            value: None,
            create_rev: 0,
            version: 0,
            prev: Some(("a".into(), 2)),
        },
        Event {
            prev: Some(("b".into(), 3)),
            ..put(5, "k2", "c", 3, 2)
        },
    ]
}

fn at(events: &[Event], at: u64) -> Record {
    Record::Events {
        at,
        events: events.to_vec(),
    }
}

/// Watcher 0 in one stream; watcher 1 resumed after a bookmark at 3.
fn logs() -> Vec<WatchLog> {
    logs_of(&events())
}

fn logs_of(e: &[Event]) -> Vec<WatchLog> {
    let one = WatchLog {
        records: vec![
            Record::Started { member: 0, from: 1 },
            at(&e[0..2], 30),
            at(&e[2..3], 70),
            at(&e[3..4], 90),
        ],
    };
    let two = WatchLog {
        records: vec![
            Record::Started { member: 1, from: 1 },
            at(&e[0..1], 30),
            at(&e[1..2], 31),
            Record::Progress { rev: 3 },
            Record::Started { member: 2, from: 4 },
            at(&e[2..4], 95),
        ],
    };
    vec![one, two]
}

fn ending() -> Ending {
    Ending {
        base_rev: 1,
        final_rev: 5,
        finals: vec![vec![("k2".into(), "c".into(), 5)]],
        reference: Some(events()),
    }
}

fn refused(h: &[Operation], logs: &[WatchLog], ending: &Ending, want: &str) {
    match check(h, logs, ending) {
        Ok(s) => panic!("accepted ({s:?}); wanted a refusal with {want:?}"),
        Err(e) => assert!(e.contains(want), "{e:?} does not say {want:?}"),
    }
}

#[test]
fn a_run_that_keeps_every_guarantee_passes() {
    let s = check(&history(), &logs(), &ending()).expect("holds");
    assert_eq!(s.events, 8);
    assert_eq!(s.resumed, 1);
    assert_eq!(s.progress, 1);
    assert_eq!(s.revisions, 4);
    assert_eq!(s.reads, 1);
    assert!(s.fresh_reference);
}

#[test]
fn the_watchers_together_are_the_reference_when_revision_1_was_compacted() {
    let ending = Ending {
        base_rev: 1,
        reference: None,
        ..ending()
    };
    let s = check(&history(), &logs(), &ending).expect("holds");
    assert!(!s.fresh_reference);
}

#[test]
fn a_missed_revision_is_refused() {
    let mut logs = logs();
    logs[0].records.remove(2);
    refused(&history(), &logs, &ending(), "missed revision 4");
}

#[test]
fn a_gap_is_allowed_only_where_a_compaction_was_reported() {
    let mut logs = logs();
    logs[0].records = vec![
        Record::Started { member: 0, from: 1 },
        at(&events()[0..1], 30),
        Record::Compacted { rev: 5 },
        Record::Started { member: 0, from: 5 },
        at(&events()[3..4], 90),
    ];
    let s = check(&history(), &logs, &ending()).expect("the gap was compacted");
    assert_eq!(s.compacted, 1);
}

#[test]
fn a_repeated_revision_is_refused() {
    let mut logs = logs();
    logs[1].records[4] = Record::Started { member: 2, from: 3 };
    logs[1].records[5] = at(&events()[1..4], 95);
    refused(&history(), &logs, &ending(), "resumed on member 2 from 3");
    logs[1].records.remove(4);
    refused(
        &history(),
        &logs,
        &ending(),
        "out of order, repeated or split",
    );
}

#[test]
fn an_event_at_or_below_a_bookmark_is_refused() {
    let mut logs = logs();
    logs[1].records[3] = Record::Progress { rev: 4 };
    logs[1].records[4] = Record::Started { member: 2, from: 5 };
    refused(&history(), &logs, &ending(), "out of order");
    let mut logs = self::logs();
    logs[1].records[3] = Record::Progress { rev: 1 };
    refused(
        &history(),
        &logs,
        &ending(),
        "progress at revision 1 after an event at 3",
    );
}

#[test]
fn a_revision_split_over_two_responses_is_refused() {
    let both = vec![put(2, "k1", "a", 2, 1), put(2, "k2", "a", 2, 1)];
    let h = vec![op(
        0,
        Op::MultiPut {
            kvs: vec![("k1".into(), "a".into()), ("k2".into(), "a".into())],
        },
        0,
        Outcome::Ok(Response::Write { rev: 2 }),
    )];
    let ending = Ending {
        base_rev: 1,
        final_rev: 2,
        finals: vec![vec![
            ("k1".into(), "a".into(), 2),
            ("k2".into(), "a".into(), 2),
        ]],
        reference: Some(both.clone()),
    };
    let whole = WatchLog {
        records: vec![Record::Started { member: 0, from: 1 }, at(&both, 5)],
    };
    check(&h, std::slice::from_ref(&whole), &ending).expect("one response holds");
    let split = WatchLog {
        records: vec![
            Record::Started { member: 0, from: 1 },
            at(&both[0..1], 5),
            at(&both[1..2], 6),
        ],
    };
    refused(&h, &[split], &ending, "split");
}

#[test]
fn an_event_the_history_did_not_make_is_refused() {
    let mut e = events();
    e[3].value = Some("x".into());
    let ending = Ending {
        base_rev: 1,
        reference: Some(e.clone()),
        ..ending()
    };
    refused(
        &history(),
        &logs_of(&e),
        &ending,
        "revision 5: watchers received",
    );
    let mut h = history();
    h[4].outcome = Outcome::Indeterminate("timed out".into());
    refused(
        &h,
        &logs_of(&e),
        &ending,
        "puts \"x\", which no request wrote",
    );
    let mut e = events();
    e[3].version = 1;
    let ending = Ending {
        base_rev: 1,
        reference: Some(e.clone()),
        ..self::ending()
    };
    refused(
        &history(),
        &logs_of(&e),
        &ending,
        "revision 5: watchers received",
    );
}

#[test]
fn a_watcher_that_disagrees_with_the_reference_is_refused() {
    let mut logs = logs();
    let mut e = events()[3].clone();
    e.prev = None;
    logs[0].records[3] = at(&[e], 90);
    refused(&history(), &logs, &ending(), "received");
}

#[test]
fn a_read_the_watched_history_cannot_explain_is_refused() {
    let mut h = history();
    h[3].outcome = Outcome::Ok(Response::Get {
        rev: 4,
        kv: Some(("a".into(), 2)),
    });
    refused(&h, &logs(), &ending(), "read #3 at revision 4");
}

#[test]
fn an_event_before_its_request_was_sent_is_refused() {
    let mut h = history();
    h[4].invoke = 200;
    refused(&h, &logs(), &ending(), "before request #4 was sent");
}

#[test]
fn a_member_whose_final_keys_differ_is_refused() {
    let mut ending = ending();
    ending.finals.push(vec![("k2".into(), "b".into(), 3)]);
    refused(&history(), &logs(), &ending, "member 1's final keys differ");
}

#[test]
fn an_answered_write_no_watcher_received_is_refused() {
    let mut h = history();
    h.push(op(
        5,
        Op::Put {
            key: "k3".into(),
            value: "z".into(),
        },
        100,
        Outcome::Ok(Response::Write { rev: 6 }),
    ));
    refused(
        &h,
        &logs(),
        &ending(),
        "revision 6, which no watcher received",
    );
}
