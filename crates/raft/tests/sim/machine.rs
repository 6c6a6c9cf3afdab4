//! The simulated state machine: it folds every applied entry into a hash, so two members
//! that applied the same index must hold the same hash, and keeps the configuration its
//! conf changes gave (in the hash too). Its durable copy is what a crash leaves (a
//! backend commit, taken at random moments).
//!
//! It also writes in log formats (`oxcd_raft::node::format`): clients write in the
//! format their member last applied, a switch entry names the format of every entry
//! after it, and an entry applied in another format than the one it was written in is
//! an error (in a member, it would be read as something else).

use oxcd_raft::node::format;
use protobuf::Message as _;
use raft::prelude::{ConfState, Entry};

/// FNV-1a over `bytes`, continuing from `h`.
pub fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The state: the applied index, the hash of everything applied, the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// The last index applied.
    pub applied: u64,
    /// Every applied entry's index, term and data, folded in order.
    pub hash: u64,
    /// How many entries with data were applied.
    pub writes: u64,
    /// The configuration the applied conf changes gave.
    pub conf: ConfState,
    /// The log's format after `applied`.
    pub format: u8,
    /// The index of the last switch applied (0: none).
    pub format_since: u64,
}

/// The data of a client's write number `n`, written in `format`.
pub fn write_data(format: u8, n: u64) -> Vec<u8> {
    format!("f{format}:p{n}").into_bytes()
}

/// The format [`write_data`] wrote `data` in (None: not a client's write).
fn written_in(data: &[u8]) -> Option<u8> {
    let rest = data.strip_prefix(b"f")?;
    let colon = rest.iter().position(|b| *b == b':')?;
    std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()
}

impl Default for Machine {
    fn default() -> Machine {
        Machine {
            applied: 0,
            hash: 0xcbf2_9ce4_8422_2325,
            writes: 0,
            conf: ConfState::default(),
            format: 1,
            format_since: 0,
        }
    }
}

impl Machine {
    /// Applies one committed entry (in order); an error when it was written in another
    /// format than the log's at its index.
    pub fn apply(&mut self, e: &Entry) -> Result<(), String> {
        if let Some(to) = format::switched_to(&e.data) {
            self.format = to;
            self.format_since = e.index;
        } else if let Some(written) = written_in(&e.data)
            && written != self.format
        {
            return Err(format!(
                "entry {} written in format {written} is read in format {}",
                e.index, self.format
            ));
        }
        self.applied = e.index;
        self.hash = fnv(self.hash, &e.index.to_le_bytes());
        self.hash = fnv(self.hash, &e.term.to_le_bytes());
        self.hash = fnv(self.hash, &e.data);
        if !e.data.is_empty() {
            self.writes += 1;
        }
        Ok(())
    }

    /// Takes the configuration a conf change gave (into the hash too), its lists sorted:
    /// raft-rs lists members in its hash set's order, which depends on each member's
    /// history.
    pub fn set_conf(&mut self, mut conf: ConfState) {
        conf.voters.sort_unstable();
        conf.learners.sort_unstable();
        conf.voters_outgoing.sort_unstable();
        conf.learners_next.sort_unstable();
        for id in conf.voters.iter().chain([&0]).chain(&conf.learners) {
            self.hash = fnv(self.hash, &id.to_le_bytes());
        }
        self.conf = conf;
    }

    /// The snapshot data a member sends.
    pub fn encode(&self) -> Vec<u8> {
        let words = [
            self.applied,
            self.hash,
            self.writes,
            u64::from(self.format),
            self.format_since,
        ];
        let mut out: Vec<u8> = words.iter().flat_map(|v| v.to_le_bytes()).collect();
        out.extend(self.conf.write_to_bytes().unwrap_or_default());
        out
    }

    /// What [`Machine::encode`] made.
    pub fn decode(b: &[u8]) -> Option<Machine> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        Some(Machine {
            applied: word(0)?,
            hash: word(1)?,
            writes: word(2)?,
            format: u8::try_from(word(3)?).ok()?,
            format_since: word(4)?,
            conf: ConfState::parse_from_bytes(b.get(40..)?).ok()?,
        })
    }
}
