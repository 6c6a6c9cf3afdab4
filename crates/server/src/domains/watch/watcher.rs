//! One watcher: what it watches (a key, a range, a prefix, from a key), its filters and
//! options, and the next revision it needs; and splitting a response into fragments.

use oxcd_api::etcdserverpb::WatchCreateRequest;
use oxcd_api::etcdserverpb::WatchResponse;
use oxcd_api::etcdserverpb::watch_create_request::FilterType;
use oxcd_api::mvccpb::Event;
use oxcd_api::mvccpb::event::EventType;
use oxcd_mvcc::KeyRange;
use prost::Message;

/// etcd's reason when range_end is not after key.
pub const EMPTY_RANGE: &str = "mvcc: watcher range is empty";
/// etcd's reason when the client picked a watch id already in use on the stream.
pub const DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";

/// A watcher on one stream (its id is the stream's key for it). Kept small: a stream may
/// hold a hundred thousand of them, so the range is one allocation and the options are
/// bits.
#[derive(Debug)]
pub struct Watcher {
    /// The first key watched, followed by the end of the range.
    range: Box<[u8]>,
    /// Where the key ends and the range's end begins in `range`.
    key_len: u32,
    flags: u8,
    /// The next revision this watcher needs: every event below it was sent.
    pub next_rev: i64,
}

const NO_PUT: u8 = 1;
const NO_DELETE: u8 = 1 << 1;
const PREV_KV: u8 = 1 << 2;
const PROGRESS_NOTIFY: u8 = 1 << 3;
const FRAGMENT: u8 = 1 << 4;
const SENT: u8 = 1 << 5;

impl Watcher {
    /// A watcher for `req` as etcd reads it: an empty key is `\0`, the smallest key;
    /// range_end `\0` is every key from `key` on. Errors with etcd's reason when the
    /// range is empty.
    pub fn new(req: &WatchCreateRequest, next_rev: i64) -> Result<Watcher, &'static str> {
        let key: &[u8] = if req.key.is_empty() { &[0] } else { &req.key };
        let end = req.range_end.as_slice();
        if !end.is_empty() && end != [0] && key >= end {
            return Err(EMPTY_RANGE);
        }
        // Keys are at most the request size limit, far below u32::MAX.
        let key_len = u32::try_from(key.len()).map_err(|_| EMPTY_RANGE)?;
        let filtered = |f: FilterType| req.filters.contains(&(f as i32));
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        Ok(Watcher {
            range: [key, end].concat().into_boxed_slice(),
            key_len,
            flags: flag(filtered(FilterType::Noput), NO_PUT)
                | flag(filtered(FilterType::Nodelete), NO_DELETE)
                | flag(req.prev_kv, PREV_KV)
                | flag(req.progress_notify, PROGRESS_NOTIFY)
                | flag(req.fragment, FRAGMENT),
            next_rev,
        })
    }

    /// The first key watched (`\0` for an empty key).
    pub fn key(&self) -> &[u8] {
        &self.range[..self.key_len as usize]
    }

    /// The end of the range watched (empty: the key alone; `\0`: every key from it).
    pub fn end(&self) -> &[u8] {
        &self.range[self.key_len as usize..]
    }

    fn has(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }

    /// Whether each event goes out with the key's previous value.
    pub fn prev_kv(&self) -> bool {
        self.has(PREV_KV)
    }

    /// Whether progress notifications are sent to it when idle.
    pub fn progress_notify(&self) -> bool {
        self.has(PROGRESS_NOTIFY)
    }

    /// Whether large responses are split for it.
    pub fn fragment(&self) -> bool {
        self.has(FRAGMENT)
    }

    /// Whether events went out to it since the last progress notification.
    pub fn sent(&self) -> bool {
        self.has(SENT)
    }

    /// Records whether events went out since the last progress notification.
    pub fn set_sent(&mut self, sent: bool) {
        if sent {
            self.flags |= SENT;
        } else {
            self.flags &= !SENT;
        }
    }

    /// Whether `e` is for this watcher (its key, its filters, not yet sent).
    pub fn wants(&self, e: &Event) -> bool {
        let Some(kv) = &e.kv else { return false };
        if kv.mod_revision < self.next_rev
            || !KeyRange::new(self.key(), self.end()).contains(&kv.key)
        {
            return false;
        }
        let is_put = e.r#type == EventType::Put as i32;
        !(is_put && self.has(NO_PUT) || !is_put && self.has(NO_DELETE))
    }

    /// The events of `events` for this watcher.
    pub fn select(&self, events: &[Event]) -> Vec<Event> {
        events.iter().filter(|e| self.wants(e)).cloned().collect()
    }
}

/// Splits `resp` as etcd does when the watcher asked for fragments: a response of at
/// least `max_bytes` with two or more events goes out in pieces that each stay below
/// `max_bytes` (a piece holds at least one event), all marked `fragment` but the last.
pub fn fragments(resp: WatchResponse, max_bytes: usize) -> Vec<WatchResponse> {
    if resp.encoded_len() < max_bytes || resp.events.len() < 2 {
        return vec![resp];
    }
    let mut base = resp.clone();
    base.events = Vec::new();
    base.fragment = true;
    let base_len = base.encoded_len();
    let mut out = Vec::new();
    let mut cur = base.clone();
    let mut cur_len = base_len;
    for ev in resp.events {
        // A repeated message field adds a tag byte, the length's varint and the body.
        let body = ev.encoded_len();
        let add = 1 + prost::length_delimiter_len(body) + body;
        if !cur.events.is_empty() && cur_len + add >= max_bytes {
            out.push(std::mem::replace(&mut cur, base.clone()));
            cur_len = base_len;
        }
        cur.events.push(ev);
        cur_len += add;
    }
    cur.fragment = false;
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::mvccpb::KeyValue;

    fn event(key: &str, rev: i64, put: bool) -> Event {
        Event {
            r#type: if put {
                EventType::Put as i32
            } else {
                EventType::Delete as i32
            },
            kv: Some(KeyValue {
                key: key.as_bytes().to_vec(),
                mod_revision: rev,
                value: vec![b'x'; 100],
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    fn create(key: &str, end: &[u8], filters: &[FilterType]) -> WatchCreateRequest {
        WatchCreateRequest {
            key: key.as_bytes().to_vec(),
            range_end: end.to_vec(),
            filters: filters.iter().map(|f| *f as i32).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn ranges_filters_and_start_revision() {
        let one = Watcher::new(&create("a", b"", &[]), 5).expect("key");
        assert!(one.wants(&event("a", 5, true)));
        assert!(
            !one.wants(&event("a", 4, true)),
            "before the start revision"
        );
        assert!(!one.wants(&event("ab", 5, true)));
        let prefix = Watcher::new(&create("a", b"b", &[]), 1).expect("prefix");
        assert!(prefix.wants(&event("ab", 2, true)) && !prefix.wants(&event("b", 2, true)));
        let from = Watcher::new(&create("m", &[0], &[]), 1).expect("from key");
        assert!(from.wants(&event("z", 2, true)) && !from.wants(&event("a", 2, true)));
        let all = Watcher::new(&create("", &[0], &[]), 1).expect("all keys");
        assert!(all.wants(&event("a", 2, false)));
        let no_put = Watcher::new(&create("a", b"", &[FilterType::Noput]), 1).expect("noput");
        assert!(!no_put.wants(&event("a", 2, true)) && no_put.wants(&event("a", 3, false)));
        let no_del = Watcher::new(&create("a", b"", &[FilterType::Nodelete]), 1).expect("nodelete");
        assert!(no_del.wants(&event("a", 2, true)) && !no_del.wants(&event("a", 3, false)));
        assert_eq!(
            Watcher::new(&create("b", b"a", &[]), 1).err(),
            Some(EMPTY_RANGE)
        );
        assert_eq!(
            Watcher::new(&create("b", b"b", &[]), 1).err(),
            Some(EMPTY_RANGE)
        );
    }

    #[test]
    fn fragments_stay_below_the_limit_and_only_the_last_is_unmarked() {
        let resp = WatchResponse {
            watch_id: 3,
            events: (0..10).map(|i| event(&format!("k{i}"), 2, true)).collect(),
            ..Default::default()
        };
        assert_eq!(fragments(resp.clone(), 1 << 20).len(), 1, "small enough");
        let pieces = fragments(resp.clone(), 400);
        assert!(pieces.len() > 1);
        let n: usize = pieces.iter().map(|p| p.events.len()).sum();
        assert_eq!(n, 10);
        for (i, p) in pieces.iter().enumerate() {
            assert_eq!(p.fragment, i + 1 < pieces.len());
            assert_eq!(p.watch_id, 3);
            assert!(p.encoded_len() < 400 || p.events.len() == 1);
        }
        // One event never splits, however large.
        let single = WatchResponse {
            events: vec![event("k", 2, true)],
            ..Default::default()
        };
        assert_eq!(fragments(single, 10).len(), 1);
    }
}
