//! What etcd's MVCC counts of the operations its transactions make
//! (`etcd_mvcc_range_total`, `etcd_mvcc_put_total`, `etcd_mvcc_delete_total`,
//! `etcd_mvcc_txn_total`, the older `etcd_debugging_mvcc_range_total`, and the bytes
//! put, `etcd_debugging_mvcc_total_put_size_in_bytes`), counted
//! the way etcd 3.5 counts them (`server/mvcc/metrics_txn.go`): each Range, Put and
//! DeleteRange call one of its transactions makes, added when the transaction ends, and
//! the transaction itself when it made more than one.
//!
//! A [`super::TxnWrite`] tallies its puts and deletes itself; ranges are tallied by
//! its callers where etcd calls Range (a request's range, a compare, the read of a
//! previous value), since the store also reads for itself where etcd reads its index.

use std::sync::atomic::{AtomicU64, Ordering};

/// The operations one etcd transaction made so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Range calls.
    pub ranges: u64,
    /// Put calls.
    pub puts: u64,
    /// DeleteRange calls.
    pub deletes: u64,
    /// The keys' and values' bytes of its puts.
    pub put_bytes: u64,
}

/// The member's counts since it started.
#[derive(Debug, Default)]
pub struct OpCounts {
    ranges: AtomicU64,
    puts: AtomicU64,
    deletes: AtomicU64,
    txns: AtomicU64,
    put_bytes: AtomicU64,
}

impl OpCounts {
    /// Adds one ended transaction's `tally` (a transaction of more than one operation
    /// counts as a txn).
    pub fn add(&self, tally: Tally) {
        if tally.ranges + tally.puts + tally.deletes > 1 {
            self.txns.fetch_add(1, Ordering::Relaxed);
        }
        for (counter, n) in [
            (&self.ranges, tally.ranges),
            (&self.puts, tally.puts),
            (&self.deletes, tally.deletes),
            (&self.put_bytes, tally.put_bytes),
        ] {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Adds a Range made outside a write: a transaction of that one operation (a range
    /// request served from the store, the health check's read).
    pub fn add_range(&self) {
        self.add(Tally {
            ranges: 1,
            ..Tally::default()
        });
    }

    /// Range calls.
    pub fn ranges(&self) -> u64 {
        self.ranges.load(Ordering::Relaxed)
    }

    /// Put calls.
    pub fn puts(&self) -> u64 {
        self.puts.load(Ordering::Relaxed)
    }

    /// DeleteRange calls.
    pub fn deletes(&self) -> u64 {
        self.deletes.load(Ordering::Relaxed)
    }

    /// Transactions of more than one operation.
    pub fn txns(&self) -> u64 {
        self.txns.load(Ordering::Relaxed)
    }

    /// The keys' and values' bytes put (`etcd_debugging_mvcc_total_put_size_in_bytes`).
    pub fn put_bytes(&self) -> u64 {
        self.put_bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_of_more_than_one_operation_is_a_txn() {
        let c = OpCounts::default();
        c.add(Tally {
            ranges: 1,
            ..Tally::default()
        });
        c.add(Tally {
            ranges: 1,
            puts: 1,
            deletes: 0,
            put_bytes: 3,
        });
        c.add(Tally::default());
        assert_eq!((c.ranges(), c.puts(), c.deletes(), c.txns()), (2, 1, 0, 1));
    }
}
