//! etcdctl 3.6's commands and outputs that etcdctl 3.4 has not, against an oxcd member
//! (no etcdctl 3.6 runs here; each test names the etcdctl 3.6.14 file it follows):
//! `downgrade`, `member list --consistency` and `endpoint hashkv`'s hash revision.

use std::time::Duration;

use super::parity::member;
use super::snapshot::run;

/// oxcdctl against `ep`, run in `dir`: stdout, stderr, exit code.
fn oxcdctl(ep: &str, dir: &std::path::Path, args: &[&str]) -> (String, String, Option<i32>) {
    let mut a = vec![format!("--endpoints={ep}")];
    a.extend(args.iter().map(|s| s.to_string()));
    run(env!("CARGO_BIN_EXE_oxcdctl"), dir, &a)
}

// etcdctl 3.6's `downgrade` (v3.6.14 etcdctl/ctlv3/command/downgrade_command.go and
// printer_simple.go; no etcdctl 3.6 runs here): its output, argument errors and exit
// codes, against an oxcd member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_commands_are_etcdctl_3_6s() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(&dir.path().join("m")).await;
    let ctl = |args: &[&str]| oxcdctl(&ep, dir.path(), args);
    // The cluster version is decided a moment after the member starts.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let out = ctl(&["downgrade", "validate", "3.5"]);
        if out.2 == Some(0) {
            assert_eq!(out.0, "Downgrade validate success, cluster version 3.6\n");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        ctl(&["downgrade", "validate"]),
        (
            String::new(),
            "Error: TARGET_VERSION not provided\n".into(),
            Some(128)
        )
    );
    assert_eq!(
        ctl(&["downgrade", "enable", "3.5", "3.4"]),
        (
            String::new(),
            "Error: too many arguments\n".into(),
            Some(128)
        )
    );
    assert_eq!(
        ctl(&["downgrade", "validate", "3.4"]),
        (
            String::new(),
            "Error: etcdserver: invalid downgrade target version\n".into(),
            Some(1)
        )
    );
    assert_eq!(
        ctl(&["downgrade", "cancel"]),
        (
            "Downgrade cancel success, cluster version 3.6\n".into(),
            String::new(),
            Some(0)
        )
    );
    assert_eq!(
        ctl(&["-w", "table", "downgrade", "cancel"]),
        (
            String::new(),
            "Error: table not supported as output format\n".into(),
            Some(4)
        )
    );
    let json = ctl(&["-w", "json", "downgrade", "validate", "3.5"]);
    assert!(
        json.0.contains("\"version\":\"3.6\"") && json.0.starts_with("{\"header\":"),
        "{json:?}"
    );
    assert_eq!(
        ctl(&["downgrade", "enable", "3.5"]),
        (
            "Downgrade enable success, cluster version 3.6\n".into(),
            String::new(),
            Some(0)
        )
    );
    // In progress until the leader lowers the cluster version; then 3.5 is no longer
    // one minor below it (the target is checked first).
    let again = ctl(&["downgrade", "enable", "3.5"]);
    assert!(
        again.2 == Some(1)
            && [
                "Error: etcdserver: cluster has a downgrade job in progress\n",
                "Error: etcdserver: invalid downgrade target version\n"
            ]
            .contains(&again.1.as_str()),
        "{again:?}"
    );
}

// v3.6.14 etcdctl/ctlv3/command/member_command.go (`--consistency`, l or s) and
// printer.go makeEndpointHashKVTable, printer_fields.go EndpointHashKV, printer_json.go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_list_consistency_and_the_hash_revision_are_etcdctl_3_6s() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(&dir.path().join("m")).await;
    let ctl = |args: &[&str]| oxcdctl(&ep, dir.path(), args);
    let l = ctl(&["member", "list"]);
    assert_eq!(l.2, Some(0), "{l:?}");
    for c in ["l", "s"] {
        assert_eq!(ctl(&["member", "list", "--consistency", c]), l);
    }
    assert_eq!(
        ctl(&["member", "list", "--consistency=x"]),
        (
            String::new(),
            "Error: unknown consistency flag \"x\"\n".into(),
            Some(4)
        )
    );

    assert_eq!(ctl(&["put", "k", "v"]).0, "OK\n");
    ctl(&["put", "k", "w"]);
    // Revision 3 hashed; at --rev 2, 2.
    let simple = ctl(&["endpoint", "hashkv"]);
    let hash = simple
        .0
        .trim_end()
        .split(", ")
        .nth(1)
        .expect("hash")
        .to_string();
    assert_eq!(simple.0, format!("{ep}, {hash}, 3\n"));
    let at2 = ctl(&["endpoint", "hashkv", "--rev", "2"]).0;
    assert!(at2.ends_with(", 2\n"), "{at2}");
    let table = ctl(&["endpoint", "hashkv", "-w", "table"]).0;
    let head: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(
        head,
        ["", "ENDPOINT", "HASH", "HASH REVISION", ""],
        "{table}"
    );
    let fields = ctl(&["endpoint", "hashkv", "-w", "fields"]).0;
    assert!(
        fields.contains(&format!("\"Hash\" : {hash}\n\"HashRevision\" : 3\n\n")),
        "{fields}"
    );
    let json = ctl(&["endpoint", "hashkv", "-w", "json"]).0;
    assert!(
        json.contains(&format!(
            "\"hash\":{hash},\"compact_revision\":-1,\"hash_revision\":3}}"
        )),
        "{json}"
    );
}
