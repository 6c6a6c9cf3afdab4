//! The tables of a side-by-side report: one per round with etcd's and oxcd's figure on
//! each row and the oxcd/etcd ratio, and over several rounds each round's ratio with
//! their median. Rows are lists of (label, figure) so each benchmark only says what it
//! shows.

use std::fmt::Write as _;

use super::{Measured, Round};

/// A numeric row: label, the figure (none: not measured), its digits, and whether it
/// gets an oxcd/etcd ratio.
pub type Num<O> = (&'static str, fn(&O) -> Option<f64>, usize, bool);

/// A text row: label and the figure as text.
pub type Text<O> = (&'static str, fn(&O) -> String);

/// A row of the rounds table: label and the figure compared.
pub type Compared<O> = (&'static str, fn(&O) -> Option<f64>);

pub fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// oxcd / etcd, when both are there and etcd's is not zero.
pub fn ratio(oxcd: Option<f64>, etcd: Option<f64>) -> Option<f64> {
    match (oxcd, etcd) {
        (Some(o), Some(e)) if e > 0.0 && o.is_finite() => Some(o / e),
        _ => None,
    }
}

/// A ratio as `0.42x`, "-" when there is none.
pub fn x(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into())
}

pub fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "**not met**" }
}

/// The middle value (the mean of the two middle ones for an even count).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The cores of this machine, which the load generator shares with the members.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0)
}

/// One line per system: its binary and version.
pub fn binaries(md: &mut String, versions: &[(String, String, String)]) {
    for (system, binary, version) in versions {
        let _ = writeln!(md, "- {system}: `{binary}` ({version})");
    }
}

/// A list of what was odd in a round under "Notes:", nothing when there is none.
pub fn notes(md: &mut String, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(md, "\nNotes:\n");
    for l in lines {
        let _ = writeln!(md, "- {l}");
    }
}

/// Round `n`'s table: a heading naming the order the systems ran in, then the rows.
pub fn round_table<O: Measured>(
    md: &mut String,
    n: usize,
    r: &Round<O>,
    numbers: &[Num<O>],
    texts: &[Text<O>],
) {
    let _ = writeln!(md, "\n## Round {n}: {}\n", r.order().join(", then "));
    let (e, o) = (r.of("etcd"), r.of("oxcd"));
    let _ = writeln!(md, "| | etcd | oxcd | oxcd/etcd |");
    let _ = writeln!(md, "|---|---:|---:|---:|");
    for (label, f, digits, with_ratio) in numbers {
        let show = |s: Option<&O>| {
            s.and_then(f)
                .map(|v| format!("{v:.digits$}"))
                .unwrap_or_else(|| "-".into())
        };
        let rt = if *with_ratio {
            x(ratio(o.and_then(f), e.and_then(f)))
        } else {
            String::new()
        };
        let _ = writeln!(md, "| {label} | {} | {} | {rt} |", show(e), show(o));
    }
    for (label, f) in texts {
        let show = |s: Option<&O>| s.map(f).unwrap_or_else(|| "-".into());
        let _ = writeln!(md, "| {label} | {} | {} | |", show(e), show(o));
    }
}

/// Every round's oxcd/etcd ratio of each row and their median, under a heading that
/// says which way is better (`what`).
pub fn rounds_table<O: Measured>(
    md: &mut String,
    rounds: &[Round<O>],
    rows: &[Compared<O>],
    what: &str,
) {
    let _ = writeln!(md, "\n## {} rounds: oxcd/etcd ({what})\n", rounds.len());
    let _ = writeln!(md, "| | per round | median |");
    let _ = writeln!(md, "|---|---|---:|");
    for (label, f) in rows {
        let per: Vec<f64> = rounds
            .iter()
            .filter_map(|r| ratio(r.of("oxcd").and_then(f), r.of("etcd").and_then(f)))
            .collect();
        let list = per
            .iter()
            .map(|v| x(Some(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(md, "| {label} | {list} | {} |", x(median(per)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn ratios_need_both_figures() {
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(x(None), "-");
        assert_eq!(x(Some(0.256)), "0.26x");
    }
}
