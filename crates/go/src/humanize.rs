//! go-humanize's `Bytes` (v1.0.0), which etcdctl and etcdutl print sizes with: SI units
//! (base 1000), one decimal below 10 of a unit.
//!
//! Invariant: go-humanize's text for every `u64`, down to Go's `%.0f`/`%.1f` rounding
//! (half to even, as Rust's).

const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];

/// `n` bytes as go-humanize prints them (`20 kB`, `1.5 MB`, `7 B`).
pub fn bytes(n: u64) -> String {
    if n < 10 {
        return format!("{n} B");
    }
    let x = n as f64;
    let e = (x.ln() / 1000f64.ln()).floor();
    let unit = UNITS[(e as usize).min(UNITS.len() - 1)];
    let val = (x / 1000f64.powf(e) * 10.0 + 0.5).floor() / 10.0;
    if val < 10.0 {
        format!("{val:.1} {unit}")
    } else {
        format!("{val:.0} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn as_go_humanize() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(5), "5 B");
        assert_eq!(bytes(9), "9 B");
        assert_eq!(bytes(10), "10 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1000), "1.0 kB");
        assert_eq!(bytes(20480), "20 kB");
        // 20.5 kB: Go's %.0f rounds half to even.
        assert_eq!(bytes(20_500), "20 kB");
        assert_eq!(bytes(21_500), "22 kB");
        assert_eq!(bytes(573_440), "573 kB");
        assert_eq!(bytes(1_056_768), "1.1 MB");
        assert_eq!(bytes(1_536_000), "1.5 MB");
        assert_eq!(bytes(2 << 30), "2.1 GB");
    }
}
