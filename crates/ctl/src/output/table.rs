//! Tables drawn as etcdctl's tablewriter draws them: centred upper-case headers (with
//! `_`, and `.` outside numbers, read as spaces), cells aligned right, `+---+` borders.

/// A header as tablewriter's `Title` writes it: `hash_revision` → `HASH REVISION`.
fn title(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let num_or_space = |c: char| c.is_ascii_digit() || c == ' ';
    let spaced: String = chars
        .iter()
        .enumerate()
        .map(|(i, &c)| match c {
            '_' => ' ',
            '.' if (i != 0 && !num_or_space(chars[i - 1]))
                || (i + 1 != chars.len() && !num_or_space(chars[i + 1])) =>
            {
                ' '
            }
            c => c,
        })
        .collect();
    let trimmed = spaced.trim();
    if trimmed.is_empty() && !name.is_empty() {
        return " ".to_string();
    }
    trimmed.to_uppercase()
}

/// Renders `header` and `rows`.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| title(h)).collect();
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
            format!(" {}{}{} ", " ".repeat(left), h, " ".repeat(pad - left))
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

#[cfg(test)]
mod tests {
    #[test]
    fn headers_as_tablewriter_titles_them() {
        assert_eq!(super::title("hash_revision"), "HASH REVISION");
        assert_eq!(super::title("raft term"), "RAFT TERM");
        assert_eq!(super::title("v3.5"), "V3.5");
        assert_eq!(super::title("db.size"), "DB SIZE");
        assert_eq!(super::title("1.5"), "1.5");
        let t = super::render(
            &["endpoint", "hash_revision"],
            &[vec!["e".into(), "2".into()]],
        );
        assert!(t.contains("| ENDPOINT | HASH REVISION |"), "{t}");
    }
}
