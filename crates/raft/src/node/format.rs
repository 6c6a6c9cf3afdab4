//! Log formats. The state machine may write its entries in more than one format (the
//! server's vocabularies: oxcd's own entries, or etcd's) and change format at a switch
//! entry, which names the format of every entry after it. The core keeps that true: a
//! leader appends a proposal only when it was written in the format its own log ends in
//! (a proposal says which it was written in, in its entry's context), and only a leader
//! appends a switch ([`super::RaftHandle::switch_format`]). A proposal written before a
//! switch and arriving after it is dropped, never appended in the wrong format.
//!
//! A switch entry's data: `0x00`, [`SWITCH_MARK`], the format byte. No protobuf message
//! starts with a zero byte (field number 0 does not exist), so neither format's requests
//! can be taken for one. Formats are opaque bytes to this crate.

use raft::prelude::Entry;

/// What follows the zero byte of a switch entry.
pub const SWITCH_MARK: &[u8] = b"oxcd-log-format:";

/// The data of a switch to `format`.
pub fn switch_data(format: u8) -> Vec<u8> {
    let mut data = Vec::with_capacity(SWITCH_MARK.len() + 2);
    data.push(0);
    data.extend_from_slice(SWITCH_MARK);
    data.push(format);
    data
}

/// The format `data` switches to, if it is a switch entry's.
pub fn switched_to(data: &[u8]) -> Option<u8> {
    let rest = data.strip_prefix(&[0])?.strip_prefix(SWITCH_MARK)?;
    match rest {
        [format] => Some(*format),
        _ => None,
    }
}

/// The context a proposal written in `format` carries (empty: not said, as from a
/// member that writes one format only; such a proposal is appended whatever the log's
/// format).
pub fn context_of(format: Option<u8>) -> Vec<u8> {
    format.map(|f| vec![f]).unwrap_or_default()
}

/// The format a proposed entry says it was written in.
pub fn written_in(e: &Entry) -> Option<u8> {
    match e.context.as_ref() {
        [f] => Some(*f),
        _ => None,
    }
}

/// The format after `entries`, starting from `base` (the format before the first).
pub fn after(base: Option<u8>, entries: &[Entry]) -> Option<u8> {
    entries
        .iter()
        .rev()
        .find_map(|e| switched_to(&e.data))
        .or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_reads_back_and_nothing_else_does() {
        assert_eq!(switched_to(&switch_data(2)), Some(2));
        assert_eq!(switched_to(b""), None);
        assert_eq!(switched_to(&[0x0a, 1, 2]), None);
        let mut longer = switch_data(1);
        longer.push(1);
        assert_eq!(switched_to(&longer), None);
    }

    #[test]
    fn the_last_switch_decides() {
        let entry = |data: Vec<u8>| Entry {
            data: data.into(),
            ..Default::default()
        };
        let log = [
            entry(switch_data(1)),
            entry(vec![8, 1]),
            entry(switch_data(2)),
        ];
        assert_eq!(after(Some(1), &log), Some(2));
        assert_eq!(after(Some(1), &log[..2]), Some(1));
        assert_eq!(after(Some(3), &log[1..2]), Some(3));
        assert_eq!(after(None, &[]), None);
    }
}
