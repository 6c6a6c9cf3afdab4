use std::time::Duration;

use super::*;

fn lessor() -> Lessor {
    Lessor::empty(2)
}

#[test]
fn min_ttl_is_etcds() {
    // etcd: (3 * ticks / 2) * heartbeat, rounded up to seconds.
    assert_eq!(Lessor::min_ttl_for(Duration::from_millis(100), 10), 2);
    assert_eq!(Lessor::min_ttl_for(Duration::from_millis(100), 5), 1);
    assert_eq!(Lessor::min_ttl_for(Duration::from_millis(500), 10), 8);
    assert_eq!(Lessor::min_ttl_for(Duration::from_millis(100), 11), 2);
}

#[test]
fn keys_follow_puts_deletes_and_revocations() {
    let l = lessor();
    l.granted(1, 10);
    l.granted(2, 10);
    l.attach(b"a", 1);
    l.attach(b"b", 1);
    l.attach(b"c", 2);
    assert_eq!(l.keys_of(1), Some(vec![b"a".to_vec(), b"b".to_vec()]));
    // Moving a key to another lease, or to none, detaches it.
    l.attach(b"a", 2);
    l.attach(b"b", 0);
    assert_eq!(l.keys_of(1), Some(vec![]));
    assert_eq!(l.keys_of(2), Some(vec![b"a".to_vec(), b"c".to_vec()]));
    l.detach(&[b"c".to_vec()]);
    assert_eq!(l.keys_of(2), Some(vec![b"a".to_vec()]));
    l.revoked(2);
    assert_eq!(l.keys_of(2), None);
    assert!(l.lock().key_lease.is_empty());
    assert_eq!(l.ids(), vec![1]);
}

#[test]
fn expired_leases_are_taken_once_per_retry_interval() {
    let l = lessor();
    l.granted(7, 0);
    l.granted(8, 100);
    assert!(l.is_expired(7));
    assert_eq!(l.take_expired(10), vec![7]);
    assert_eq!(
        l.take_expired(10),
        Vec::<i64>::new(),
        "already being revoked"
    );
    // A renewal restarts the clock and ends the revocation attempt.
    assert_eq!(l.renewed(7), Some(0));
    assert_eq!(l.renewed(9), None);
}

#[test]
fn promotion_gives_a_grace_period_and_keeps_longer_clocks() {
    let l = lessor();
    l.granted(1, 0);
    l.granted(2, 1000);
    l.promote(Duration::from_secs(5));
    assert!(!l.is_expired(1));
    let ttl = |id| l.time_to_live(id, false).map(|t| t.remaining);
    assert_eq!(ttl(1), Some(4), "5 s grace, truncated");
    assert_eq!(ttl(2), Some(999));
}

#[test]
fn new_ids_are_positive_and_unused() {
    let l = lessor();
    let a = l.new_id(1);
    l.granted(a, 5);
    let b = l.new_id(1);
    assert!(a > 0 && b > 0 && a != b);
}
