//! Prometheus' text exposition, written as etcd's Go client writes it: families sorted
//! by name, each with its HELP and TYPE lines, label pairs sorted by name, numbers in
//! Go's shortest form (`20480`, `2.147483648e+09`, `0.000690815`).

use std::fmt::Write as _;

use oxcd_storage::timing::HistogramSnapshot;

/// A number as Go's `strconv.FormatFloat(v, 'g', -1, 64)` writes it.
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v == 0.0 {
        return "0".into();
    }
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{v}")
}

/// One metric family being written.
pub struct Family {
    name: &'static str,
    text: String,
}

/// The kinds of metric.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Any value.
    Gauge,
    /// Observations in buckets.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Label pairs, written sorted by name.
fn labels(pairs: &[(&str, &str)], extra: Option<(&str, &str)>) -> String {
    let mut all: Vec<(&str, &str)> = pairs.to_vec();
    all.extend(extra);
    if all.is_empty() {
        return String::new();
    }
    all.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::from("{");
    for (i, (k, v)) in all.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(out, "{k}=\"{v}\"");
    }
    out.push('}');
    out
}

impl Family {
    /// A family named `name` of `kind`, described by `help`.
    pub fn new(name: &'static str, kind: Kind, help: &str) -> Family {
        let mut text = String::with_capacity(128);
        let _ = write!(
            text,
            "# HELP {name} {help}\n# TYPE {name} {}\n",
            kind.as_str()
        );
        Family { name, text }
    }

    /// A sample of a counter or gauge.
    pub fn sample(&mut self, pairs: &[(&str, &str)], value: f64) -> &mut Family {
        let _ = writeln!(
            self.text,
            "{}{} {}",
            self.name,
            labels(pairs, None),
            go_float(value)
        );
        self
    }

    /// A histogram's buckets, sum and count.
    pub fn histogram(&mut self, pairs: &[(&str, &str)], h: &HistogramSnapshot) -> &mut Family {
        let name = self.name;
        for (bound, count) in &h.buckets {
            let le = go_float(*bound);
            let _ = writeln!(
                self.text,
                "{name}_bucket{} {count}",
                labels(pairs, Some(("le", &le)))
            );
        }
        let _ = writeln!(
            self.text,
            "{name}_bucket{} {}",
            labels(pairs, Some(("le", "+Inf"))),
            h.count
        );
        let l = labels(pairs, None);
        let _ = writeln!(self.text, "{name}_sum{l} {}", go_float(h.sum));
        let _ = writeln!(self.text, "{name}_count{l} {}", h.count);
        self
    }
}

/// The families of one scrape, written sorted by name.
#[derive(Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    /// Adds a family.
    pub fn add(&mut self, family: Family) {
        self.families.push(family);
    }

    /// A family with one sample without labels.
    pub fn single(&mut self, name: &'static str, kind: Kind, help: &str, value: f64) {
        let mut f = Family::new(name, kind, help);
        f.sample(&[], value);
        self.add(f);
    }

    /// The text of every family.
    pub fn finish(mut self) -> String {
        self.families.sort_by(|a, b| a.name.cmp(b.name));
        let mut out = String::with_capacity(self.families.iter().map(|f| f.text.len()).sum());
        for f in self.families {
            out.push_str(&f.text);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_go_writes_them() {
        assert_eq!(go_float(20480.0), "20480");
        assert_eq!(go_float(2147483648.0), "2.147483648e+09");
        assert_eq!(go_float(0.000690815), "0.000690815");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(1.8446744073709552e19), "1.8446744073709552e+19");
        assert_eq!(go_float(1795756804.08), "1.79575680408e+09");
        assert_eq!(go_float(100000.0), "100000");
        assert_eq!(go_float(0.29), "0.29");
        assert_eq!(go_float(8.192), "8.192");
        assert_eq!(go_float(0.0), "0");
        assert_eq!(go_float(f64::INFINITY), "+Inf");
    }

    #[test]
    fn families_come_sorted_with_sorted_labels() {
        let mut e = Exposition::default();
        e.single("b_total", Kind::Counter, "B.", 2.0);
        let mut f = Family::new("a", Kind::Gauge, "A.");
        f.sample(&[("type", "readyz"), ("name", "x")], 1.0);
        e.add(f);
        assert_eq!(
            e.finish(),
            "# HELP a A.\n# TYPE a gauge\na{name=\"x\",type=\"readyz\"} 1\n# HELP b_total B.\n# TYPE b_total counter\nb_total 2\n"
        );
    }
}
