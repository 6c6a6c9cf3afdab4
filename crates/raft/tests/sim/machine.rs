//! The simulated state machine: it folds every applied entry into a hash, so two members
//! that applied the same index must hold the same hash. Its durable copy is what a
//! crash leaves (a backend commit, taken at random moments).

use raft::prelude::Entry;

/// FNV-1a over `bytes`, continuing from `h`.
pub fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The state: the applied index and the hash of everything applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// The last index applied.
    pub applied: u64,
    /// Every applied entry's index, term and data, folded in order.
    pub hash: u64,
    /// How many entries with data were applied.
    pub writes: u64,
}

impl Default for Machine {
    fn default() -> Machine {
        Machine {
            applied: 0,
            hash: 0xcbf2_9ce4_8422_2325,
            writes: 0,
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

    /// The snapshot data a member sends.
    pub fn encode(&self) -> Vec<u8> {
        [self.applied, self.hash, self.writes]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
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
        })
    }
}
