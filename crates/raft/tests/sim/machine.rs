//! The simulated state machine: it folds every applied entry into a hash, so two members
//! that applied the same index must hold the same hash, and keeps the configuration its
//! conf changes gave (in the hash too). Its durable copy is what a crash leaves (a
//! backend commit, taken at random moments).

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
}

impl Default for Machine {
    fn default() -> Machine {
        Machine {
            applied: 0,
            hash: 0xcbf2_9ce4_8422_2325,
            writes: 0,
            conf: ConfState::default(),
        }
    }
}

impl Machine {
    /// Applies one committed entry (in order).
    pub fn apply(&mut self, e: &Entry) {
        self.applied = e.index;
        self.hash = fnv(self.hash, &e.index.to_le_bytes());
        self.hash = fnv(self.hash, &e.term.to_le_bytes());
        self.hash = fnv(self.hash, &e.data);
        if !e.data.is_empty() {
            self.writes += 1;
        }
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
        let mut out: Vec<u8> = [self.applied, self.hash, self.writes]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
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
            conf: ConfState::parse_from_bytes(b.get(24..)?).ok()?,
        })
    }
}
