//! `--enable-pprof`: `/debug/pprof/` on the client port as etcd mounts Go's
//! `net/http/pprof` (etcd v3.5.16 `server/embed/serve.go`, `pkg/debugutil/pprof.go`):
//! the index, a CPU profile in the pprof format (decoded here by its field numbers, as
//! `go tool pprof` reads it), Go-only profiles refused, nothing without the flag.

use prost::Message;

use crate::common;
use common::InProc;

/// The parts of `perftools.profiles.Profile` checked here.
#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
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
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
}

async fn curl(args: &[&str]) -> (String, Vec<u8>) {
    let out = tokio::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .await
        .expect("curl");
    let mut body = out.stdout;
    let split = body.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let code = String::from_utf8_lossy(&body[split + 1..]).into_owned();
    body.truncate(split);
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_profile_in_pprofs_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| s.enable_pprof = true).await;
    let base = m.endpoint();
    let (code, index) = curl(&[&format!("{base}/debug/pprof/")]).await;
    assert_eq!(code, "200");
    assert!(String::from_utf8_lossy(&index).contains("profile"));
    let (code, _) = curl(&[&format!("{base}/debug/pprof/heap")]).await;
    assert_eq!(code, "404", "Go's heap profile is not oxcd's");

    // Work to sample while the profile runs.
    let endpoint = base.clone();
    let load = tokio::spawn(async move {
        let mut c = etcd_client::Client::connect([endpoint], None)
            .await
            .expect("connect");
        for i in 0..3000 {
            let _ = c.put(format!("p{i}"), vec![b'x'; 512], None).await;
        }
    });
    let (code, body) = curl(&[&format!("{base}/debug/pprof/profile?seconds=2")]).await;
    load.abort();
    assert_eq!(code, "200");
    let p = Profile::decode(body.as_slice()).expect("a pprof profile");
    let s = |i: i64| p.string_table.get(i as usize).cloned().unwrap_or_default();
    assert_eq!(p.string_table.first().map(String::as_str), Some(""));
    let types: Vec<(String, String)> = p
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("samples".to_string(), "count".to_string()),
            ("cpu".to_string(), "nanoseconds".to_string())
        ]
    );
    assert_eq!(p.period, 10_000_000, "100 Hz");
    assert!(!p.sample.is_empty(), "samples taken under load");
    assert!(
        p.sample
            .iter()
            .all(|x| x.value.len() == 2 && x.value[1] == x.value[0] * p.period)
    );
    assert!(
        p.function.iter().any(|f| s(f.name).contains("oxcd")),
        "oxcd's own functions are named"
    );
    m.stop().await;

    let plain = InProc::start(dir.path().join("n"), |_| {}).await;
    let (code, _) = curl(&[&format!("{}/debug/pprof/", plain.endpoint())]).await;
    assert_eq!(code, "404", "nothing without --enable-pprof");
    plain.stop().await;
}
