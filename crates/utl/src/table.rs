//! The tables etcdutl prints with olekukonko/tablewriter: upper-case headers centered,
//! cells right-aligned, a border of `+`, `-` and `|`, one space of padding.

/// The table of `header` over `rows`, as tablewriter renders it with right alignment.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.to_uppercase()).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line: String = widths
        .iter()
        .map(|w| format!("+{}", "-".repeat(w + 2)))
        .collect::<String>()
        + "+\n";
    let mut out = line.clone();
    for (h, w) in header.iter().zip(&widths) {
        let gap = w - h.chars().count();
        let left = gap / 2;
        out.push_str(&format!(
            "| {}{h}{} ",
            " ".repeat(left),
            " ".repeat(gap - left)
        ));
    }
    out.push_str("|\n");
    out.push_str(&line);
    for row in rows {
        for (c, w) in row.iter().zip(&widths) {
            out.push_str(&format!("| {c:>w$} "));
        }
        out.push_str("|\n");
    }
    out.push_str(&line);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn as_tablewriter() {
        let t = super::render(
            &["hash", "revision", "total keys", "total size"],
            &[vec![
                "d0e688ca".into(),
                "8".into(),
                "17".into(),
                "20 kB".into(),
            ]],
        );
        assert_eq!(
            t,
            "+----------+----------+------------+------------+\n\
             |   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE |\n\
             +----------+----------+------------+------------+\n\
             | d0e688ca |        8 |         17 |      20 kB |\n\
             +----------+----------+------------+------------+\n"
        );
    }
}
