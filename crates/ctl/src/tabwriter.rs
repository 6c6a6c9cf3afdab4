//! Go's `text/tabwriter` as etcdctl's help uses it (`minwidth 0, tabwidth 8, padding 1,
//! padchar '\t'`): tab-terminated cells in consecutive lines form a column, padded with
//! tabs to the widest cell plus one, rounded up to a tab stop.

const TABWIDTH: usize = 8;

struct Cell<'a> {
    text: &'a str,
    width: usize,
}

/// Aligns `text` as tabwriter would.
pub fn align(text: &str) -> String {
    let body = text.strip_suffix('\n');
    let lines: Vec<Vec<Cell>> = body
        .unwrap_or(text)
        .split('\n')
        .map(|l| {
            l.split('\t')
                .map(|c| Cell {
                    text: c,
                    width: c.chars().count(),
                })
                .collect()
        })
        .collect();
    let mut out = String::new();
    format(&mut out, &lines, 0, lines.len(), &mut Vec::new());
    if body.is_none() {
        out.pop();
    }
    out
}

fn format(
    out: &mut String,
    lines: &[Vec<Cell>],
    line0: usize,
    line1: usize,
    widths: &mut Vec<usize>,
) {
    let column = widths.len();
    let mut start = line0;
    let mut this = line0;
    while this < line1 {
        if column + 1 >= lines[this].len() {
            this += 1;
            continue;
        }
        write_lines(out, &lines[start..this], widths);
        start = this;
        let mut width = 0;
        while this < line1 && column + 1 < lines[this].len() {
            width = width.max(lines[this][column].width + 1);
            this += 1;
        }
        widths.push(width);
        format(out, lines, start, this, widths);
        widths.pop();
        start = this;
    }
    write_lines(out, &lines[start..line1], widths);
}

fn write_lines(out: &mut String, lines: &[Vec<Cell>], widths: &[usize]) {
    for line in lines {
        for (j, c) in line.iter().enumerate() {
            out.push_str(c.text);
            if j < widths.len() && j + 1 < line.len() {
                let cellw = widths[j].div_ceil(TABWIDTH) * TABWIDTH;
                out.push_str(&"\t".repeat((cellw - c.width).div_ceil(TABWIDTH)));
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_like_go() {
        let t = "NAME:\n\tget - x\n\nOPTIONS:\n      --consistency=\"l\"\tL\n      --print-value-only[=false]\tO\n";
        assert_eq!(
            align(t),
            "NAME:\n\tget - x\n\nOPTIONS:\n      --consistency=\"l\"\t\t\tL\n      --print-value-only[=false]\tO\n"
        );
        assert_eq!(align("a\tb"), "a\tb");
    }
}
