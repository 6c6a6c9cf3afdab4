//! A sampled CPU profile in the pprof format (`perftools.profiles.Profile`, the
//! protocol buffer `go tool pprof` reads), written with oxcd's own message types: the
//! samples (count, and CPU nanoseconds at the sampling period), one location per
//! distinct frame with its inlined functions innermost first, each function once, the
//! strings once in the string table (entry 0 empty, as the format requires).

use std::collections::HashMap;
use std::time::SystemTime;

use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "3")]
    address: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

/// The string table being built: each string once, `""` first.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.id("");
        s
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// One symbol of a frame: its name, file and line.
type SymbolKey = (String, String, i64);

/// `report` (sampled at `hz`, started at `started`) as an encoded pprof profile.
pub fn encode(report: &pprof::Report, hz: i32, started: SystemTime) -> Vec<u8> {
    let mut strings = Strings::new();
    let samples_t = ValueType {
        r#type: strings.id("samples"),
        unit: strings.id("count"),
    };
    let cpu_t = ValueType {
        r#type: strings.id("cpu"),
        unit: strings.id("nanoseconds"),
    };
    let period = 1_000_000_000 / i64::from(hz.max(1));
    let thread_key = strings.id("thread");
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    let mut function_list = Vec::new();
    let mut locations: HashMap<Vec<SymbolKey>, u64> = HashMap::new();
    let mut location_list = Vec::new();
    let mut samples = Vec::new();
    for (frames, count) in &report.data {
        let mut ids = Vec::with_capacity(frames.frames.len());
        for frame in &frames.frames {
            let key: Vec<SymbolKey> = frame
                .iter()
                .map(|s| {
                    let file = s
                        .filename
                        .as_ref()
                        .map(|f| f.display().to_string())
                        .unwrap_or_default();
                    (s.name(), file, i64::from(s.lineno.unwrap_or(0)))
                })
                .collect();
            let next = location_list.len() as u64 + 1;
            let id = *locations.entry(key.clone()).or_insert_with(|| {
                let lines = key
                    .iter()
                    .map(|(name, file, line)| {
                        let fnext = function_list.len() as u64 + 1;
                        let function_id = *functions
                            .entry((name.clone(), file.clone()))
                            .or_insert_with(|| {
                                let name_id = strings.id(name);
                                function_list.push(Function {
                                    id: fnext,
                                    name: name_id,
                                    system_name: name_id,
                                    filename: strings.id(file),
                                });
                                fnext
                            });
                        Line {
                            function_id,
                            line: *line,
                        }
                    })
                    .collect();
                location_list.push(Location {
                    id: next,
                    address: 0,
                    line: lines,
                });
                next
            });
            ids.push(id);
        }
        let count = *count as i64;
        samples.push(Sample {
            location_id: ids,
            value: vec![count, count * period],
            label: vec![Label {
                key: thread_key,
                str: strings.id(&frames.thread_name),
            }],
        });
    }
    let time_nanos = started
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default();
    let duration_nanos = started
        .elapsed()
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default();
    Profile {
        sample_type: vec![samples_t, cpu_t.clone()],
        sample: samples,
        location: location_list,
        function: function_list,
        string_table: strings.table,
        time_nanos,
        duration_nanos,
        period_type: Some(cpu_t),
        period,
    }
    .encode_to_vec()
}
