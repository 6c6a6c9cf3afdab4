//! Tables drawn as etcdctl's tablewriter draws them: centred upper-case headers, cells
//! aligned right, `+---+` borders.

/// Renders `header` and `rows`.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, c) in row.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let border = format!(
        "+{}+\n",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("+")
    );
    let mut out = border.clone();
    let cells: Vec<String> = header
        .iter()
        .zip(&widths)
        .map(|(h, w)| {
            let pad = w - h.chars().count();
            let left = pad / 2;
            format!(
                " {}{}{} ",
                " ".repeat(left),
                h.to_uppercase(),
                " ".repeat(pad - left)
            )
        })
        .collect();
    out.push_str(&format!("|{}|\n", cells.join("|")));
    out.push_str(&border);
    for row in rows {
        let cells: Vec<String> = (0..n)
            .map(|i| {
                let c = row.get(i).map(String::as_str).unwrap_or("");
                format!(" {}{} ", " ".repeat(widths[i] - c.chars().count()), c)
            })
            .collect();
        out.push_str(&format!("|{}|\n", cells.join("|")));
    }
    out.push_str(&border);
    out
}
