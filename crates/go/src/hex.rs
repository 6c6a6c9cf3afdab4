//! Go's `%016x` of an `int64` (how etcdctl prints lease ids), which differs from Rust's
//! `{:016x}` for negative numbers: Go prints the sign and the magnitude.
//!
//! Invariant: Go's text for every `i64`.

/// `n` as Go's `%016x`: zero-padded to 16 characters, a negative number as `-` and its
/// magnitude (`-000000000000001`).
pub fn hex016(n: i64) -> String {
    if n < 0 {
        format!("-{:015x}", n.unsigned_abs())
    } else {
        format!("{n:016x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_like_go() {
        assert_eq!(hex016(0x1234), "0000000000001234");
        assert_eq!(hex016(-1), "-000000000000001");
        assert_eq!(hex016(-0x7fff_ffff_ffff_ffff), "-7fffffffffffffff");
        assert_eq!(hex016(i64::MIN), "-8000000000000000");
    }
}
