//! `lock`, `elect`, `watch -i` and `make-mirror`: oxcdctl and etcdctl 3.4 run side by
//! side against the same oxcd members (real binaries on loopback), and what each
//! prints, and its exit code, must be the same. Lease ids in lock and leader keys and
//! lock revisions are masked where the two runs get their own by nature.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::parity::member;

const ETCDCTL: &str = "/usr/bin/etcdctl";
const OXCDCTL: &str = env!("CARGO_BIN_EXE_oxcdctl");

/// What a CLI printed and how it ended (`None`: killed by the test).
#[derive(Debug, PartialEq, Clone)]
struct Ran {
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

fn spawn(bin: &str, ep: &str, args: &[&str]) -> Child {
    Command::new(bin)
        .arg(format!("--endpoints={ep}"))
        .args(args)
        .env_remove("ETCDCTL_API")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a cli")
}

/// Sends SIGINT (as Ctrl-C) to a CLI.
fn interrupt(child: &Child) {
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -INT");
}

/// Waits up to `limit` for the CLI to exit (killing it after), and collects its output;
/// clientv3's JSON log lines are left out.
fn finish(mut child: Child, limit: Duration) -> Ran {
    drop(child.stdin.take());
    let (code, out) = super::wait_or_kill(child, limit);
    Ran {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: super::without_json_logs(&out.stderr),
        code,
    }
}

fn run(bin: &str, ep: &str, args: &[&str]) -> Ran {
    finish(spawn(bin, ep, args), Duration::from_secs(20))
}

/// Both CLIs, one after the other; their outcomes, the program names made equal.
fn both(ep: &str, args: &[&str]) -> (Ran, Ran) {
    let mut want = run(ETCDCTL, ep, args);
    want.stdout = want.stdout.replace("etcdctl", "oxcdctl");
    want.stderr = want.stderr.replace("etcdctl", "oxcdctl");
    (want, run(OXCDCTL, ep, args))
}

/// Replaces the hex digits of a lease id after each `<name>/` with `LEASE`, and the
/// digits after `rev=` with `N`.
fn mask(s: &str, name: &str) -> String {
    let pat = format!("{name}/");
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(&pat) {
        out.push_str(&rest[..i + pat.len()]);
        rest = &rest[i + pat.len()..];
        let n = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        out.push_str(if n > 0 { "LEASE" } else { "" });
        rest = &rest[n..];
    }
    out.push_str(rest);
    let mut masked = String::new();
    let mut rest = out.as_str();
    while let Some(i) = rest.find("rev=") {
        masked.push_str(&rest[..i + 4]);
        rest = &rest[i + 4..];
        let n = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        masked.push_str(if n > 0 { "N" } else { "" });
        rest = &rest[n..];
    }
    masked.push_str(rest);
    masked
}

fn masked(r: Ran, name: &str) -> Ran {
    Ran {
        stdout: mask(&r.stdout, name),
        stderr: mask(&r.stderr, name),
        code: r.code,
    }
}

fn needs_etcdctl() {
    assert!(
        Path::new(ETCDCTL).exists(),
        "needs etcdctl 3.4: apt-get install -y etcd-client"
    );
}

/// Waits until `child` printed at least `lines` lines on stdout; returns them.
fn read_lines(child: &mut Child, lines: usize) -> String {
    let mut got = Vec::new();
    let out = child.stdout.as_mut().expect("stdout");
    let mut byte = [0u8; 1];
    while got.iter().filter(|&&b| b == b'\n').count() < lines {
        match out.read(&mut byte) {
            Ok(1) => got.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_prints_runs_and_fails_as_etcdctl() {
    needs_etcdctl();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(dir.path()).await;
    tokio::task::spawn_blocking(move || {
        let script = "echo \"key=$ETCD_LOCK_KEY rev=$ETCD_LOCK_REV\"; echo err >&2; exit 3";
        let cases: Vec<Vec<&str>> = vec![
            vec!["lock", "L", "--", "sh", "-c", script],
            vec!["lock", "--ttl", "5", "L", "--", "true"],
            vec!["lock", "L", "--", "sh", "-c", "kill -9 $$"],
            vec!["lock", "L", "no-such-command-here"],
            vec!["lock", "L", "./no/such/file"],
            vec!["lock", "L", "-c"],
            vec!["lock"],
            vec!["lock", "--ttl", "x", "L"],
        ];
        let mut mismatches = Vec::new();
        for args in &cases {
            let (want, got) = both(&ep, args);
            let (want, got) = (masked(want, "L"), masked(got, "L"));
            if want != got {
                mismatches.push(format!("{args:?}\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"));
            }
        }
        // The variables themselves: the key is the lock's, the revision its creation.
        let r = run(OXCDCTL, &ep, &["lock", "L", "--", "sh", "-c", script]);
        assert!(r.stdout.starts_with("key=L/"), "{r:?}");
        // Held until interrupted, then released: the key printed as `get` prints it.
        let mut held = Vec::new();
        for bin in [ETCDCTL, OXCDCTL] {
            let mut c = spawn(bin, &ep, &["lock", "held"]);
            let first = read_lines(&mut c, 2);
            let during = run(ETCDCTL, &ep, &["get", "--prefix", "held", "--keys-only"]);
            assert_eq!(mask(&during.stdout, "held"), "held/LEASE\n\n", "{bin}");
            interrupt(&c);
            let mut r = finish(c, Duration::from_secs(10));
            r.stdout = first + &r.stdout;
            held.push(masked(r, "held"));
            let after = run(ETCDCTL, &ep, &["get", "--prefix", "held"]);
            assert_eq!(after.stdout, "", "{bin} released the lock");
        }
        if held[0] != held[1] {
            mismatches.push(format!(
                "held lock\n  etcdctl: {:?}\n  oxcdctl: {:?}",
                held[0], held[1]
            ));
        }
        println!(
            "{} lock runs compared, {} mismatches",
            cases.len() + 1,
            mismatches.len()
        );
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    })
    .await
    .expect("join");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_locker_waits_for_the_first_command() {
    needs_etcdctl();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(dir.path()).await;
    tokio::task::spawn_blocking(move || {
        for (first, second) in [(OXCDCTL, ETCDCTL), (ETCDCTL, OXCDCTL)] {
            let log = dir.path().join("order.log");
            let _ = std::fs::remove_file(&log);
            let f = log.display().to_string();
            let hold = format!("echo first-start >> {f}; sleep 1.5; echo first-end >> {f}");
            let after = format!("echo second >> {f}");
            let a = spawn(first, &ep, &["lock", "W", "--", "sh", "-c", &hold]);
            std::thread::sleep(Duration::from_millis(600));
            let b = spawn(second, &ep, &["lock", "W", "--", "sh", "-c", &after]);
            let (ra, rb) = (
                finish(a, Duration::from_secs(15)),
                finish(b, Duration::from_secs(15)),
            );
            assert_eq!((ra.code, rb.code), (Some(0), Some(0)), "{ra:?} {rb:?}");
            let order = std::fs::read_to_string(&log).expect("log");
            assert_eq!(
                order, "first-start\nfirst-end\nsecond\n",
                "{first} then {second}"
            );
        }
    })
    .await
    .expect("join");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_campaigns_and_observes_as_etcdctl() {
    needs_etcdctl();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(dir.path()).await;
    tokio::task::spawn_blocking(move || {
        let mut mismatches = Vec::new();
        for args in [
            &["elect"][..],
            &["elect", "E"],
            &["elect", "-l", "E", "p"],
            &["elect", "a", "b", "c"],
        ] {
            let (want, got) = both(&ep, args);
            if want != got {
                mismatches.push(format!("{args:?}\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"));
            }
        }
        let obs_e = spawn(ETCDCTL, &ep, &["elect", "-l", "E"]);
        let obs_o = spawn(OXCDCTL, &ep, &["elect", "-l", "E"]);
        std::thread::sleep(Duration::from_millis(500));
        let mut c1 = spawn(OXCDCTL, &ep, &["elect", "E", "p1"]);
        let led1 = read_lines(&mut c1, 2);
        let mut c2 = spawn(ETCDCTL, &ep, &["elect", "E", "p2"]);
        std::thread::sleep(Duration::from_millis(500));
        interrupt(&c1);
        let led2 = read_lines(&mut c2, 2);
        let c3 = spawn(OXCDCTL, &ep, &["elect", "E", "p3"]);
        std::thread::sleep(Duration::from_millis(500));
        // A waiting candidate interrupted: etcdctl's "context canceled".
        interrupt(&c3);
        let r3 = finish(c3, Duration::from_secs(10));
        interrupt(&c2);
        let (r1, r2) = (
            finish(c1, Duration::from_secs(10)),
            finish(c2, Duration::from_secs(10)),
        );
        assert_eq!(mask(&led1, "E"), "E/LEASE\np1\n");
        assert_eq!(mask(&led2, "E"), "E/LEASE\np2\n");
        assert_eq!((r1.code, r2.code), (Some(0), Some(0)), "{r1:?} {r2:?}");
        assert_eq!(
            (r3.stdout.as_str(), r3.stderr.as_str(), r3.code),
            ("", "Error: context canceled\n", Some(1))
        );
        std::thread::sleep(Duration::from_millis(300));
        interrupt(&obs_e);
        interrupt(&obs_o);
        let (want, got) = (
            finish(obs_e, Duration::from_secs(10)),
            finish(obs_o, Duration::from_secs(10)),
        );
        assert_eq!(
            mask(&want.stdout, "E"),
            "E/LEASE\np1\nE/LEASE\np2\n",
            "etcdctl's observer"
        );
        if want != got {
            mismatches.push(format!("elect -l\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"));
        }
        let left = run(ETCDCTL, &ep, &["get", "--prefix", "E/"]);
        assert_eq!(left.stdout, "", "every candidate resigned or withdrew");
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    })
    .await
    .expect("join");
}

/// Feeds `steps` to both CLIs' `watch -i` at once: text for stdin, or a pause, or
/// writes through etcdctl.
enum Feed<'a> {
    Lines(&'a str),
    Pause(u64),
    Put(&'a str, &'a str),
}

fn interactive(ep: &str, steps: &[Feed]) -> (Ran, Ran) {
    let mut e = spawn(ETCDCTL, ep, &["watch", "-i"]);
    let mut o = spawn(OXCDCTL, ep, &["watch", "-i"]);
    for s in steps {
        match s {
            Feed::Lines(t) => {
                for c in [&mut e, &mut o] {
                    if let Some(i) = c.stdin.as_mut() {
                        let _ = i.write_all(t.as_bytes());
                        let _ = i.flush();
                    }
                }
            }
            Feed::Pause(ms) => std::thread::sleep(Duration::from_millis(*ms)),
            Feed::Put(k, v) => {
                let r = run(ETCDCTL, ep, &["put", k, v]);
                assert_eq!(r.code, Some(0), "{r:?}");
            }
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut want = finish(e, Duration::from_secs(10));
    want.stderr = want.stderr.replace("etcdctl", "oxcdctl");
    (want, finish(o, Duration::from_secs(10)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_watch_prints_what_etcdctl_prints() {
    needs_etcdctl();
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(dir.path()).await;
    tokio::task::spawn_blocking(move || {
        use Feed::*;
        let sessions: Vec<Vec<Feed>> = vec![
            // Watches on disjoint keys, writes apart: etcdctl prints each watch from
            // its own goroutine, so only one watch's events at a time have an order.
            vec![
                Lines("watch k1\nwatch --prefix p/ --prev-kv\nbogus x\n\nwatch\n"),
                Lines("watch a b --prefix\nwatch -- echo hi\n"),
                Pause(500),
                Put("k1", "v1"),
                Pause(200),
                Put("p/1", "a"),
                Pause(200),
                Put("k1", "v1b"),
                Pause(200),
                Put("p/1", "b"),
                Pause(500),
                Lines("progress\n"),
                Pause(500),
                Lines("watch --rev 2 k1 -- sh -c \"echo $ETCD_WATCH_KEY=$ETCD_WATCH_VALUE\"\n"),
                Pause(800),
                Lines("watch 'k2' x y\n"),
                Pause(300),
                Put("k2", "v2"),
                Pause(300),
            ],
            vec![Lines("watch --bogus x\nwatch k1\n")],
            vec![Lines("watch -h x\n")],
            vec![Lines("watch --prefix\n")],
            vec![Lines("watch k1 --\n")],
            vec![Lines("watch --rev x k1\n")],
            vec![Lines("watch -w json k1\n")],
            vec![Lines("watch k1")],
        ];
        let mut mismatches = Vec::new();
        for (i, s) in sessions.iter().enumerate() {
            let (want, got) = interactive(&ep, s);
            if want != got {
                mismatches.push(format!(
                    "session {i}\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"
                ));
            }
        }
        println!(
            "{} interactive sessions compared, {} mismatches",
            sessions.len(),
            mismatches.len()
        );
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    })
    .await
    .expect("join");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn make_mirror_copies_and_follows_as_etcdctl() {
    needs_etcdctl();
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, _s) = member(&dir.path().join("src")).await;
    let (to_e, _e) = member(&dir.path().join("e")).await;
    let (to_o, _o) = member(&dir.path().join("o")).await;
    tokio::task::spawn_blocking(move || {
        let mut mismatches = Vec::new();
        for args in [
            &["make-mirror"][..],
            &["make-mirror", "a", "b"],
            &[
                "make-mirror",
                "--dest-prefix",
                "x",
                "--no-dest-prefix",
                &to_e,
            ],
            &["make-mirror", "--dest-cert", "/no/such/cert", &to_e],
        ] {
            let (want, got) = both(&src, args);
            if want != got {
                mismatches.push(format!("{args:?}\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"));
            }
        }
        let put = |k: &str, v: &str| {
            let r = run(ETCDCTL, &src, &["put", k, v]);
            assert_eq!(r.code, Some(0), "{r:?}");
        };
        put("m/a", "1");
        put("m/b", "2");
        put("other", "x");
        let flags = ["make-mirror", "--prefix", "m/", "--dest-prefix", "n/"];
        let me = spawn(ETCDCTL, &src, &[&flags[..], &[to_e.as_str()]].concat());
        let mo = spawn(OXCDCTL, &src, &[&flags[..], &[to_o.as_str()]].concat());
        std::thread::sleep(Duration::from_millis(1000));
        put("m/c", "3");
        put("other", "y");
        let del = run(ETCDCTL, &src, &["del", "m/a"]);
        assert_eq!(del.code, Some(0));
        let mut txn = spawn(ETCDCTL, &src, &["txn"]);
        if let Some(i) = txn.stdin.as_mut() {
            let _ = i.write_all(b"\nput m/t1 x\nput m/t2 y\n\n\n");
        }
        assert_eq!(finish(txn, Duration::from_secs(10)).code, Some(0));
        // etcdctl prints its count every 30 seconds.
        std::thread::sleep(Duration::from_secs(31));
        let (want, got) = (finish(me, Duration::ZERO), finish(mo, Duration::ZERO));
        assert_eq!(want.stdout, "6\n", "etcdctl's count: {want:?}");
        if want != got {
            mismatches.push(format!(
                "make-mirror\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"
            ));
        }
        let on_e = run(ETCDCTL, &to_e, &["get", "", "--prefix"]);
        let on_o = run(ETCDCTL, &to_o, &["get", "", "--prefix"]);
        assert_eq!(on_e.stdout, "n/b\n2\nn/c\n3\nn/t1\nx\nn/t2\ny\n");
        if on_e != on_o {
            mismatches.push(format!(
                "mirrored keys\n  etcdctl's: {on_e:?}\n  oxcdctl's: {on_o:?}"
            ));
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    })
    .await
    .expect("join");
}
