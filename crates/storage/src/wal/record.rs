//! WAL record framing.
//!
//! A record on disk is `len: u32 LE | crc: u32 LE | kind: u8 | payload[len]`. The CRC is
//! CRC-32C over `kind | payload`, seeded with the CRC of the record before it (across
//! segments too: each segment opens with a [`RecordKind::Crc`] record carrying the chain
//! value), so a record can't be dropped, reordered or spliced in from elsewhere unnoticed.

/// Bytes before the payload: length, CRC, kind.
pub const HEADER_LEN: usize = 9;
/// The largest payload we accept; anything bigger is damage, not data.
pub const MAX_PAYLOAD: u32 = 256 << 20;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// Carries the CRC chain value at the start of a segment (payload: u32 LE).
    Crc = 1,
    /// Opaque member metadata (cluster and member identity).
    Metadata = 2,
    /// A raft log entry: index u64 LE, then the encoded entry.
    Entry = 3,
    /// The raft hard state (encoded by the caller).
    HardState = 4,
    /// A snapshot mark: entries up to this index live in the backend (encoded by the caller).
    Snapshot = 5,
    /// A snapshot received from the leader replaced the whole log: entries recorded
    /// before it are void, whatever their index (same payload as `Snapshot`).
    SnapshotInstall = 6,
}

impl RecordKind {
    fn from_u8(b: u8) -> Option<RecordKind> {
        Some(match b {
            1 => RecordKind::Crc,
            2 => RecordKind::Metadata,
            3 => RecordKind::Entry,
            4 => RecordKind::HardState,
            5 => RecordKind::Snapshot,
            6 => RecordKind::SnapshotInstall,
            _ => return None,
        })
    }
}

/// Appends one framed record to `out` and returns the new chain CRC.
pub fn encode(out: &mut Vec<u8>, prev_crc: u32, kind: RecordKind, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(prev_crc, &[kind as u8]), payload);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(payload);
    crc
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The record runs past the end of the data (a write that never finished).
    Truncated,
    /// The bytes are all there but wrong.
    Bad(String),
}

/// A decoded record borrowed from the buffer.
#[derive(Debug)]
pub struct Decoded<'a> {
    /// What the record holds.
    pub kind: RecordKind,
    /// The payload bytes.
    pub payload: &'a [u8],
    /// The record's CRC (the chain value after it).
    pub crc: u32,
    /// Total bytes the record occupies.
    pub len: usize,
}

/// Decodes the record at the start of `buf`, checking it against the chain value `prev_crc`.
/// A `Crc` record resets the chain: its own CRC is checked against the value it carries.
pub fn decode(buf: &[u8], prev_crc: u32) -> Result<Decoded<'_>, DecodeError> {
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::Truncated);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let crc = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if len > MAX_PAYLOAD {
        return Err(DecodeError::Bad(format!(
            "record length {len} exceeds the limit"
        )));
    }
    let total = HEADER_LEN + len as usize;
    if buf.len() < total {
        return Err(DecodeError::Truncated);
    }
    let kind = RecordKind::from_u8(buf[8])
        .ok_or_else(|| DecodeError::Bad(format!("unknown record kind {}", buf[8])))?;
    let payload = &buf[HEADER_LEN..total];
    let seed = if kind == RecordKind::Crc {
        // The chain value this segment continues from is the payload itself.
        if payload.len() != 4 {
            return Err(DecodeError::Bad("crc record of wrong size".into()));
        }
        u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]])
    } else {
        prev_crc
    };
    let want = crc32c::crc32c_append(crc32c::crc32c_append(seed, &[kind as u8]), payload);
    if want != crc {
        return Err(DecodeError::Bad(format!(
            "crc mismatch (stored {crc:#010x}, computed {want:#010x})"
        )));
    }
    Ok(Decoded {
        kind,
        payload,
        crc,
        len: total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_chain() {
        let mut buf = Vec::new();
        let c1 = encode(&mut buf, 7, RecordKind::Entry, b"hello");
        let c2 = encode(&mut buf, c1, RecordKind::HardState, b"");
        let r1 = decode(&buf, 7).expect("first");
        assert_eq!(
            (r1.kind, r1.payload, r1.crc),
            (RecordKind::Entry, &b"hello"[..], c1)
        );
        let r2 = decode(&buf[r1.len..], r1.crc).expect("second");
        assert_eq!((r2.kind, r2.crc), (RecordKind::HardState, c2));
        // Wrong chain seed: the record is rejected.
        assert!(matches!(decode(&buf, 8), Err(DecodeError::Bad(_))));
    }

    #[test]
    fn truncation_and_bitflip() {
        let mut buf = Vec::new();
        encode(&mut buf, 0, RecordKind::Entry, b"payload");
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut], 0).err(), Some(DecodeError::Truncated));
        }
        buf[HEADER_LEN + 2] ^= 1;
        assert!(matches!(decode(&buf, 0), Err(DecodeError::Bad(_))));
    }
}
