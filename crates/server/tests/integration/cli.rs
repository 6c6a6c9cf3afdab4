//! The `oxcd` binary as an operator meets it: flags and `ETCD_*` variables with etcd's
//! error messages, `--version`, readiness line, clean stop on SIGTERM, and a refused
//! second process on a data dir in use.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use common::{OxcdProcess, free_port, oxcd_command};

fn run(c: &mut Command) -> Output {
    c.stdin(Stdio::null()).output().expect("run oxcd")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_flag_is_refused_like_etcd() {
    let o = run(oxcd_command().arg("--foo"));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("flag provided but not defined: -foo"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_number_is_refused_like_etcd() {
    let o = run(oxcd_command().args(["--snapshot-count", "abc"]));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("invalid value \"abc\" for flag -snapshot-count"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn flag_and_variable_together_is_fatal_like_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(oxcd_command()
        .env("ETCD_NAME", "x")
        .args(["--name", "y"])
        .arg("--data-dir")
        .arg(dir.path()));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(
            "conflicting environment variable \"ETCD_NAME\" is shadowed by corresponding command-line flag (either unset environment variable or disable flag)"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn malformed_url_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(oxcd_command()
        .args(["--listen-client-urls", "foo"])
        .arg("--data-dir")
        .arg(dir.path()));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("foo"),
        "names the bad URL: {}",
        stderr(&o)
    );
}

#[test]
fn unbuilt_feature_flag_stops_with_not_supported_yet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = run(oxcd_command()
        .arg("--enable-log-rotation")
        .arg("--data-dir")
        .arg(dir.path()));
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("enable-log-rotation") && e.contains("not supported yet"),
        "{e}"
    );
}

#[test]
// etcd's four lines first, as `etcd --version` prints them
// (etcd v3.6.14:server/etcdmain/config.go, `(*config).parse`), then oxcd's own.
fn version_prints_etcds_lines_then_oxcds() {
    let o = run(oxcd_command().arg("--version"));
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"etcd Version: 3.6.14"), "{out}");
    assert!(
        lines.get(1).is_some_and(|l| l.starts_with("Git SHA: ")),
        "{out}"
    );
    assert!(
        lines.get(2).is_some_and(|l| l.starts_with("Go Version: ")),
        "{out}"
    );
    assert!(
        lines
            .get(3)
            .is_some_and(|l| l.starts_with("Go OS/Arch: linux/")),
        "{out}"
    );
    assert_eq!(
        lines.get(4).copied(),
        Some(format!("oxcd Version: {}", env!("CARGO_PKG_VERSION")).as_str()),
        "{out}"
    );
    let o = run(oxcd_command().args(["--version", "--emulated-version=3.5"]));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("etcd Version: 3.5.17\n"), "{out}");
}

#[test]
fn sigterm_stops_cleanly_and_data_dir_from_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("from-env");
    let url = format!("http://127.0.0.1:{}", free_port());
    let mut child = oxcd_command()
        .env("ETCD_DATA_DIR", &data)
        .env("ETCD_LISTEN_CLIENT_URLS", &url)
        .env("ETCD_ADVERTISE_CLIENT_URLS", &url)
        .env(
            "ETCD_LISTEN_PEER_URLS",
            format!("http://127.0.0.1:{}", free_port()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let err = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(err).lines().map_while(Result::ok);
    assert!(
        lines.any(|l| l.contains("ready to serve client requests")),
        "no readiness line"
    );
    assert!(
        data.join("member").join("wal").is_dir(),
        "ETCD_DATA_DIR was used"
    );
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let rest: Vec<String> = lines.collect();
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "exit after SIGTERM: {status:?}\n{}",
        rest.join("\n")
    );
    assert!(
        rest.iter().any(|l| l.contains("stopped serving")),
        "{}",
        rest.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_process_on_a_data_dir_in_use_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let first = OxcdProcess::start(&data, free_port());
    let url = first.url.clone();
    let other = format!("http://127.0.0.1:{}", free_port());
    let o = run(oxcd_command().arg("--data-dir").arg(&data).args([
        "--listen-client-urls",
        &other,
        "--advertise-client-urls",
        &other,
    ]));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("in use by another process"),
        "{}",
        stderr(&o)
    );
    // The running member is unharmed.
    let mut c = etcd_client::Client::connect([url], None)
        .await
        .expect("connect");
    c.put("still", "here", None)
        .await
        .expect("first member still writes");
    drop(first);
}

#[test]
fn joining_an_existing_cluster_nobody_answers_for_fails_fast() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (free_port(), free_port());
    let client = format!("http://127.0.0.1:{}", free_port());
    let o = run(oxcd_command().args([
        "--name",
        "a",
        "--data-dir",
        &dir.path().join("a").to_string_lossy(),
        "--listen-client-urls",
        &client,
        "--advertise-client-urls",
        &client,
        "--listen-peer-urls",
        &format!("http://127.0.0.1:{a}"),
        "--initial-advertise-peer-urls",
        &format!("http://127.0.0.1:{a}"),
        "--initial-cluster",
        &format!("a=http://127.0.0.1:{a},b=http://127.0.0.1:{b}"),
        "--initial-cluster-state",
        "existing",
    ]));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cannot fetch cluster info from peer urls"),
        "{}",
        stderr(&o)
    );
}
