//! Keys and values of a given size: request `n` writes key number `n % space`
//! (sequential) or a pseudo-random key number in the space, deterministic in `n`; the
//! flags that shape them ([`KeyArgs`]); and `Put`, the request writing request `n`'s
//! key, which the `put` and `watch` workloads share.

use clap::Args;
use oxcd_api::etcdserverpb::PutRequest;
use oxcd_client::Client;

use crate::driver::{self, Request};

/// Key and value shape shared by the writing workloads.
#[derive(Debug, Clone, Args)]
pub struct KeyArgs {
    /// Key size in bytes.
    #[arg(long, default_value_t = 8)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 8)]
    pub val_size: usize,
    /// How many distinct keys are written.
    #[arg(long, default_value_t = 1)]
    pub key_space_size: u64,
    /// Write keys in order instead of at random.
    #[arg(long)]
    pub sequential_keys: bool,
}

impl KeyArgs {
    /// Keys of `key_size` bytes with values of `val_size`, `key_space_size` distinct
    /// keys, written in order if `sequential_keys`.
    pub fn new(
        key_size: usize,
        val_size: usize,
        key_space_size: u64,
        sequential_keys: bool,
    ) -> KeyArgs {
        KeyArgs {
            key_size,
            val_size,
            key_space_size,
            sequential_keys,
        }
    }
}

/// Makes the keys and the value of a run.
#[derive(Debug, Clone)]
pub struct KeyGen {
    size: usize,
    space: u64,
    sequential: bool,
    value: Vec<u8>,
}

/// SplitMix64: a stateless, well-mixed hash of `n`.
pub fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl KeyGen {
    /// From the command line's key flags.
    pub fn new(a: &KeyArgs) -> KeyGen {
        KeyGen {
            size: a.key_size.max(1),
            space: a.key_space_size.max(1),
            sequential: a.sequential_keys,
            value: vec![b'v'; a.val_size],
        }
    }

    /// The key number request `n` (or its `i`th op) uses.
    pub fn number(&self, n: u64) -> u64 {
        if self.sequential {
            n % self.space
        } else {
            mix(n) % self.space
        }
    }

    /// The `i`th key number of the space in order (wrapping at its end).
    pub fn number_at(&self, i: u64) -> u64 {
        i % self.space
    }

    /// Key number `k` as a `size`-byte key: zero-padded decimal, or big-endian bytes
    /// when the decimal does not fit.
    pub fn key(&self, k: u64) -> Vec<u8> {
        let dec = format!("{k:0width$}", width = self.size);
        if dec.len() == self.size {
            return dec.into_bytes();
        }
        let be = k.to_be_bytes();
        let mut out = vec![0u8; self.size];
        let take = self.size.min(8);
        out[self.size - take..].copy_from_slice(&be[8 - take..]);
        out
    }

    /// The value every put writes.
    pub fn value(&self) -> Vec<u8> {
        self.value.clone()
    }
}

/// One put of request `n`'s key (the key generator's choice) with its value.
pub(crate) struct Put(pub(crate) KeyGen);

impl Request for Put {
    async fn issue(&self, n: u64, conn: Client) -> Result<(), String> {
        let req = PutRequest {
            key: self.0.key(self.0.number(n)),
            value: self.0.value(),
            ..PutRequest::default()
        };
        conn.kv().put(req).await.map(drop).map_err(driver::message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(size: usize, space: u64, sequential: bool) -> KeyArgs {
        KeyArgs::new(size, 3, space, sequential)
    }

    #[test]
    fn keys_have_the_asked_size_and_stay_in_the_space() {
        let g = KeyGen::new(&args(8, 1000, false));
        for n in 0..10_000 {
            let k = g.number(n);
            assert!(k < 1000);
            assert_eq!(g.key(k).len(), 8);
        }
        assert_eq!(g.key(42), b"00000042");
        let small = KeyGen::new(&args(2, 100_000, true));
        assert_eq!(small.number(100_001), 1);
        assert_eq!(small.key(70_000), vec![0x11, 0x70]);
        assert_eq!(small.value(), b"vvv");
    }
}
