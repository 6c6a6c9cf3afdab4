//! Range as etcd answers it: fetch, filter by revisions, sort, limit, strip values.
//! Shared by plain reads (committed store) and reads inside a txn (its own view).

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use oxcd_api::mvccpb::KeyValue;
use oxcd_mvcc::{KeyRange, MvccError, RangeOptions, RangeResult, Store, TxnWrite};

use crate::machine::applier::ApplyError;

/// Something that can be read at a revision.
pub trait ReadView {
    /// Reads a key range.
    fn read(&self, range: KeyRange<'_>, opts: RangeOptions) -> Result<RangeResult, MvccError>;
}

impl ReadView for Store {
    fn read(&self, range: KeyRange<'_>, opts: RangeOptions) -> Result<RangeResult, MvccError> {
        self.range(range, opts)
    }
}

impl ReadView for TxnWrite<'_> {
    fn read(&self, range: KeyRange<'_>, opts: RangeOptions) -> Result<RangeResult, MvccError> {
        self.range(range, opts)
    }
}

/// Executes a validated range request against `view`. On the read path, map the error
/// with [`ApplyError::into_read_error`].
pub fn range(view: &impl ReadView, r: &RangeRequest) -> Result<RangeResponse, ApplyError> {
    let order = SortOrder::try_from(r.sort_order).map_err(|_| EtcdError::InvalidSortOption)?;
    let target = SortTarget::try_from(r.sort_target).map_err(|_| EtcdError::InvalidSortOption)?;
    let filtered = revision_filtered(r);
    // Sorting or filtering needs every key; otherwise fetch one extra to learn `more`.
    let fetch_limit = if order != SortOrder::None || filtered || r.limit <= 0 {
        0
    } else {
        r.limit as usize + 1
    };
    let res = view.read(
        KeyRange::new(&r.key, &r.range_end),
        RangeOptions {
            limit: fetch_limit,
            rev: r.revision,
            count_only: r.count_only,
        },
    )?;
    let mut kvs = res.kvs;
    kvs.retain(|kv| {
        !(r.max_mod_revision != 0 && kv.mod_revision > r.max_mod_revision
            || r.min_mod_revision != 0 && kv.mod_revision < r.min_mod_revision
            || r.max_create_revision != 0 && kv.create_revision > r.max_create_revision
            || r.min_create_revision != 0 && kv.create_revision < r.min_create_revision)
    });
    // Results come in ascending key order already: sort only when that is not what is asked.
    let order = match (order, target) {
        (SortOrder::None, SortTarget::Key) => SortOrder::None,
        (SortOrder::None, _) => SortOrder::Ascend,
        (SortOrder::Ascend, SortTarget::Key) => SortOrder::None,
        (o, _) => o,
    };
    if order != SortOrder::None {
        sort(&mut kvs, target, order == SortOrder::Descend);
    }
    let mut more = false;
    if r.limit > 0 && kvs.len() > r.limit as usize {
        kvs.truncate(r.limit as usize);
        more = true;
    }
    if r.keys_only {
        for kv in &mut kvs {
            kv.value.clear();
        }
    }
    Ok(RangeResponse {
        header: Some(ResponseHeader {
            revision: res.rev,
            ..Default::default()
        }),
        kvs,
        more,
        count: res.count as i64,
    })
}

/// Whether `r` filters keys by their revisions (any min/max mod/create revision set).
pub fn revision_filtered(r: &RangeRequest) -> bool {
    r.min_mod_revision != 0
        || r.max_mod_revision != 0
        || r.min_create_revision != 0
        || r.max_create_revision != 0
}

/// Sorts `kvs` by `target`, descending when `descend`.
pub fn sort(kvs: &mut [KeyValue], target: SortTarget, descend: bool) {
    // Stable, like Go's sort for the small slices etcd's tests use; ties keep key order.
    let key = |a: &KeyValue, b: &KeyValue| match target {
        SortTarget::Key => a.key.cmp(&b.key),
        SortTarget::Version => a.version.cmp(&b.version),
        SortTarget::Create => a.create_revision.cmp(&b.create_revision),
        SortTarget::Mod => a.mod_revision.cmp(&b.mod_revision),
        SortTarget::Value => a.value.cmp(&b.value),
    };
    if descend {
        kvs.sort_by(|a, b| key(b, a));
    } else {
        kvs.sort_by(key);
    }
}
