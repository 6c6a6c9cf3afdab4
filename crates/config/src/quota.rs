//! The space quota `--quota-backend-bytes` sets, as etcd 3.5 reads it: the limit, and
//! whether a request of a given cost fits a backend of a given size. What a request
//! costs is the server's (it knows the requests).

/// The quota when `--quota-backend-bytes` is 0: etcd's 2 GiB.
pub const DEFAULT_QUOTA_BYTES: u64 = 2 << 30;

/// The quota a member enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// The limit in bytes; None: disabled.
    limit: Option<u64>,
    /// The flag's value (negative when disabled).
    flag: i64,
}

impl Quota {
    /// The quota `--quota-backend-bytes` sets: 0 is etcd's 2 GiB default, a negative
    /// value disables the quota, as in etcd.
    pub fn from_flag(bytes: i64) -> Quota {
        Quota {
            limit: match bytes {
                0 => Some(DEFAULT_QUOTA_BYTES),
                b => u64::try_from(b).ok(),
            },
            flag: bytes,
        }
    }

    /// What etcd's `etcd_server_quota_backend_bytes` gauge shows: the limit, or the
    /// flag's negative value when disabled.
    pub fn gauge(&self) -> i64 {
        self.limit
            .map_or(self.flag, |l| i64::try_from(l).unwrap_or(i64::MAX))
    }

    /// The limit in bytes (None: disabled).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Whether a request costing `cost` fits a backend whose size `size` tells: etcd's
    /// `size + cost < quota`. A request that costs nothing always fits, and then (as
    /// without a quota) the size is not asked: it is a `stat` of the database file.
    pub fn admits(&self, cost: u64, size: impl FnOnce() -> u64) -> bool {
        match self.limit {
            _ if cost == 0 => true,
            None => true,
            Some(limit) => size().saturating_add(cost) < limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_as_etcd_reads_them() {
        assert_eq!(Quota::from_flag(0).limit(), Some(2 << 30));
        assert_eq!(Quota::from_flag(-1).limit(), None);
        assert_eq!(Quota::from_flag(65536).limit(), Some(65536));
        assert!(Quota::from_flag(-1).admits(1000, || u64::MAX));
        assert_eq!(Quota::from_flag(0).gauge(), 2 << 30);
        assert_eq!(Quota::from_flag(-5).gauge(), -5);
    }

    #[test]
    fn admits_strictly_below_the_quota() {
        let q = Quota::from_flag(1000);
        assert!(q.admits(299, || 700));
        assert!(
            !q.admits(300, || 700),
            "size + cost must stay below the quota"
        );
        assert!(
            q.admits(0, || 5000),
            "a request that costs nothing always passes"
        );
        assert!(!q.admits(1, || u64::MAX), "no overflow");
    }
}
