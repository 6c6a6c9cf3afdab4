//! oxcdctl against etcdctl 3.4, both talking to real etcd servers (`oxcd_testkit::reference`:
//! 3.5.16 in CI, else Debian's 3.4).
//!
//! Two etcd servers are started with the same name, token and advertised peer URL, so
//! they get the same cluster and member ids; every line of `etcd_session.txt` runs
//! through etcdctl against server A and through oxcdctl against server B, so both see
//! the same history and every output — writes included — must be identical: stdout,
//! stderr and exit code. Read-only lines also run through oxcdctl against server A, to
//! compare the two CLIs on one server. Only what legitimately differs is masked: the
//! servers' addresses, the program's name, timings (`took`), database sizes and the
//! timestamps of log lines. The lease commands are compared in [`lease`], the member
//! commands in [`member`] (against oxcd members too).

mod lease;
mod member;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ETCDCTL: &str = "/usr/bin/etcdctl";
const OXCDCTL: &str = env!("CARGO_BIN_EXE_oxcdctl");
const SESSION: &str = include_str!("etcd_session.txt");
const AUTH_SESSION: &str = include_str!("../../../../testdata/etcdctl-auth-session.txt");

/// A running etcd server; killed (and its data removed) when dropped, even when the test
/// fails.
struct Etcd {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    oxcd_testkit::ports::free_port().expect("a free loopback port")
}

/// Starts etcd listening on free ports, advertising `peer_url` (not listened on; a
/// single member never dials itself), and waits until it serves.
fn start_etcd(peer_url: &str) -> Etcd {
    start_etcd_with(peer_url, &[])
}

/// [`start_etcd`] with more flags.
fn start_etcd_with(peer_url: &str, flags: &[String]) -> Etcd {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, peer) = (free_port(), free_port());
    let addr = format!("127.0.0.1:{client}");
    let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
    let child = Command::new(oxcd_testkit::reference::etcd_binary())
        .arg("--name=default")
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--listen-client-urls=http://{addr}"))
        .arg(format!("--advertise-client-urls=http://{addr}"))
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=default={peer_url}"))
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start etcd");
    let etcd = Etcd {
        child,
        addr,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ok = Command::new(ETCDCTL)
            .arg(format!("--endpoints={}", etcd.addr))
            .args(["endpoint", "health"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return etcd;
        }
        assert!(Instant::now() < deadline, "etcd did not start serving");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One line of the session.
struct Step {
    line: String,
    env: Vec<(String, String)>,
    args: Vec<String>,
    stdin: Vec<u8>,
}

/// Splits words as a shell would: '...' literal, "..." with backslash escapes.
fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                cur.extend(chars.by_ref().take_while(|&q| q != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => cur.extend(chars.next()),
                        q => cur.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// `\n`, `\t`, `\\` and `\xHH` in stdin text.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 3 < b.len() => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("zz");
                    out.push(u8::from_str_radix(hex, 16).expect("\\xHH in session"));
                    i += 4;
                    continue;
                }
                other => out.extend([b'\\', other]),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn session(text: &str) -> Vec<Step> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (cmd, stdin) = match l.split_once(" <<<") {
                Some((c, i)) => (c, unescape(i.strip_prefix(' ').unwrap_or(i))),
                None => (l, Vec::new()),
            };
            let mut words = shell_words(cmd);
            let env_words = words
                .iter()
                .take_while(|w| {
                    w.split_once('=').is_some_and(|(k, _)| {
                        !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    })
                })
                .count();
            let env = words
                .drain(..env_words)
                .filter_map(|w| {
                    w.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                })
                .collect();
            Step {
                line: l.to_string(),
                env,
                args: words,
                stdin,
            }
        })
        .collect()
}

/// What a run printed and returned.
#[derive(Debug, PartialEq)]
struct Outcome {
    stdout: Vec<u8>,
    stderr: String,
    code: i32,
}

/// Runs `bin` for `step` against `addr` (with `--endpoints` unless the line says `@EP`).
fn run(bin: &str, addr: &str, step: &Step) -> Outcome {
    let fill = |s: &str| s.replace("@EP", addr);
    let mut cmd = Command::new(bin);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ETCDCTL_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in &step.env {
        cmd.env(k, fill(v));
    }
    if !step.line.contains("@EP") {
        cmd.arg(format!("--endpoints={addr}"));
    }
    cmd.args(step.args.iter().map(|a| fill(a)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn cli");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(&step.stdin);
    }
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let so = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let se = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    // A CLI that hangs (etcdctl does on some bad input) is killed, not waited for.
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.code().unwrap_or(-1),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break -1;
            }
        }
    };
    let out = so.join().unwrap_or_default();
    let err = se.join().unwrap_or_default();
    Outcome {
        stdout: out,
        stderr: String::from_utf8_lossy(&err).into_owned(),
        code,
    }
}

fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// Replaces each number (digits and dots) that `unit` says is followed by a unit, and
/// the unit, with `mask`.
fn mask_numbers(s: &str, unit: impl Fn(&str) -> usize, mask: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(|c: char| c.is_ascii_digit()) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let u = unit(&rest[n..]);
        if u > 0 {
            out.push_str(mask);
            rest = &rest[n + u..];
        } else {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
        }
    }
    out.push_str(rest);
    out
}

/// Length of a Go duration's units at the start of `s` (`1m2.5s`, `3ms`, `7µs`).
fn duration_unit(s: &str) -> usize {
    let mut len = 0;
    let mut rest = s;
    loop {
        let u = ["ns", "µs", "us", "ms", "s", "m", "h"]
            .iter()
            .find(|u| rest.starts_with(**u));
        let Some(u) = u else { return len };
        len += u.len();
        rest = &rest[u.len()..];
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return len;
        }
        let after = &rest[digits..];
        if !["ns", "µs", "us", "ms", "s", "m", "h"]
            .iter()
            .any(|u| after.starts_with(u))
        {
            return len;
        }
        len += digits;
        rest = after;
    }
}

/// Size units at the start of `s` (`" kB"`, `" B"`), or a JSON/fields db size.
fn size_unit(s: &str) -> usize {
    [" kB", " MB", " GB", " B"]
        .iter()
        .find(|u| s.starts_with(**u))
        .map_or(0, |u| u.len())
}

/// What may differ between the two runs, masked; stdout stays bytes unless a mask
/// applies to it.
fn normalize(o: Outcome, addr: &str, etcdctl: bool, step: &Step) -> Outcome {
    let mut stdout = replace_bytes(&o.stdout, addr.as_bytes(), b"EP");
    let mut stderr = o.stderr.replace(addr, "EP");
    if etcdctl {
        stdout = replace_bytes(&stdout, b"etcdctl", b"oxcdctl");
        stderr = stderr.replace("etcdctl", "oxcdctl");
    }
    // etcdctl's client library logs JSON lines; capnslog lines carry a timestamp.
    stderr = stderr
        .lines()
        .filter(|l| !l.starts_with("{\"level\""))
        .map(|l| match l.get(26..) {
            Some(rest) if l.as_bytes().get(4) == Some(&b'-') && rest.starts_with(" ") => {
                format!("TIMESTAMP{rest}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    // `endpoint health` and `endpoint status`, also as prefixes (`en stat`).
    let names = |full: &str| {
        step.args
            .iter()
            .any(|w| w.len() >= 4 && full.starts_with(w.as_str()))
    };
    if names("health") || names("status") {
        let mut text = String::from_utf8_lossy(&stdout).into_owned();
        if names("health") {
            text = mask_numbers(&text, duration_unit, "D");
            stderr = mask_numbers(&stderr, duration_unit, "D");
        } else {
            text = mask_numbers(&text, size_unit, "SIZE");
            for key in ["\"dbSize\":", "\"dbSizeInUse\":", "\"DBSize\" : "] {
                let parts: Vec<&str> = text.split(key).collect();
                let mut joined = parts[0].to_string();
                for p in &parts[1..] {
                    let n = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
                    joined.push_str(key);
                    joined.push('N');
                    joined.push_str(&p[n..]);
                }
                text = joined;
            }
        }
        // Table widths follow the masked cells.
        text.retain(|c| c != ' ' && c != '-');
        stdout = text.into_bytes();
    }
    Outcome {
        stdout,
        stderr,
        code: o.code,
    }
}

fn show(o: &Outcome) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        o.code,
        String::from_utf8_lossy(&o.stdout),
        o.stderr
    )
}

fn read_only(step: &Step) -> bool {
    matches!(
        step.args.first().map(String::as_str),
        Some("get" | "endpoint" | "help")
    ) && step.env.is_empty()
}

/// Runs each line of `text` through etcdctl against server A and oxcdctl against server
/// B (and read-only lines through oxcdctl against A too); the lines whose outcomes differ.
fn compare_session(text: &str, a: &Etcd, b: &Etcd) -> Vec<String> {
    let mut mismatches = Vec::new();
    let steps = session(text);
    for step in &steps {
        let want = normalize(run(ETCDCTL, &a.addr, step), &a.addr, true, step);
        let got = normalize(run(OXCDCTL, &b.addr, step), &b.addr, false, step);
        if want != got {
            mismatches.push(format!(
                "{}\n== etcdctl (server A)\n{}== oxcdctl (server B)\n{}",
                step.line,
                show(&want),
                show(&got)
            ));
        }
        if read_only(step) {
            let same = normalize(run(OXCDCTL, &a.addr, step), &a.addr, false, step);
            if want != same {
                mismatches.push(format!(
                    "{}\n== etcdctl (server A)\n{}== oxcdctl (server A)\n{}",
                    step.line,
                    show(&want),
                    show(&same)
                ));
            }
        }
    }
    eprintln!(
        "{} lines compared, {} mismatches",
        steps.len(),
        mismatches.len()
    );
    mismatches
}

/// Two etcd servers with the same ids (see the module doc).
fn two_servers() -> (Etcd, Etcd) {
    assert!(
        Path::new(ETCDCTL).exists(),
        "{ETCDCTL} is missing: this test runs etcdctl 3.4; install it with `apt-get install -y etcd-client`"
    );
    let peer_url = format!("http://127.0.0.1:{}", free_port());
    (start_etcd(&peer_url), start_etcd(&peer_url))
}

#[test]
fn oxcdctl_prints_what_etcdctl_prints_against_etcd() {
    let (a, b) = two_servers();
    let mismatches = compare_session(SESSION, &a, &b);
    assert!(
        mismatches.is_empty(),
        "oxcdctl differs from etcdctl:\n\n{}",
        mismatches.join("\n\n")
    );

    // What oxcdctl prints of its own: its version, and etcd 3.5's --count-only.
    let own = |args: &str| {
        let step = Step {
            line: args.to_string(),
            env: Vec::new(),
            args: shell_words(args),
            stdin: Vec::new(),
        };
        run(OXCDCTL, &b.addr, &step)
    };
    let v = own("version");
    assert_eq!(
        String::from_utf8_lossy(&v.stdout),
        format!(
            "oxcdctl version: {}\nAPI version: 3.6\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let c = own("get a/ --prefix --count-only -w fields");
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(c.code == 0 && text.contains("\"Count\" : "), "{}", show(&c));
    assert!(
        !text.contains("\"Key\""),
        "count-only returns no keys: {text}"
    );
    let c = own("get a/ --prefix --count-only");
    assert_eq!(
        (c.code, c.stderr.as_str()),
        (
            128,
            "Error: --count-only is only for `--write-out=fields`\n"
        )
    );
    drop((a, b));
}

/// Every user, role and auth command (`testdata/etcdctl-auth-session.txt`), with their errors, and
/// requests as users whose grants change.
#[test]
fn oxcdctl_auth_commands_print_what_etcdctl_prints() {
    let (a, b) = two_servers();
    let mut mismatches = compare_session(AUTH_SESSION, &a, &b);
    // `auth status` is etcdctl 3.5's: compared with the etcdctl that comes with the
    // reference etcd, when it is 3.5.
    let etcdctl35 = oxcd_testkit::reference::etcd_binary().with_file_name("etcdctl");
    if oxcd_testkit::reference::etcd_version().starts_with("3.5") && etcdctl35.exists() {
        let bin = etcdctl35.to_string_lossy().into_owned();
        let lines = [
            "auth status",
            "auth status -w json",
            "auth status -w fields",
            "auth status -w table",
            "auth status -w protobuf",
            "auth status extra",
        ];
        for line in lines {
            let step = Step {
                line: line.to_string(),
                env: Vec::new(),
                args: shell_words(line),
                stdin: Vec::new(),
            };
            let want = normalize(run(&bin, &a.addr, &step), &a.addr, true, &step);
            let got = normalize(run(OXCDCTL, &a.addr, &step), &a.addr, false, &step);
            if want != got {
                mismatches.push(format!(
                    "{line}\n== etcdctl 3.5\n{}== oxcdctl\n{}",
                    show(&want),
                    show(&got)
                ));
            }
        }
        eprintln!(
            "auth status compared with etcdctl 3.5 in {} forms",
            lines.len()
        );
    }
    assert!(
        mismatches.is_empty(),
        "oxcdctl differs from etcdctl:\n\n{}",
        mismatches.join("\n\n")
    );
}

/// What a watching CLI printed before it exited or was stopped.
#[derive(Debug, PartialEq)]
struct Watched {
    stdout: Vec<u8>,
    stderr: String,
    /// The exit code; `None` when it was still watching and was stopped.
    code: Option<i32>,
}

/// Starts `program watch <args>` against `addr`.
fn start_watch(program: &str, addr: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(program)
        .arg(format!("--endpoints={addr}"))
        .arg("watch")
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a watch")
}

/// Waits up to `for_` for a watching CLI to exit, then stops it; what it printed.
fn finish_watch(child: Child, for_: Duration) -> Watched {
    let (code, out) = super::wait_or_kill(child, for_);
    Watched {
        stdout: out.stdout,
        stderr: super::without_json_logs(&out.stderr),
        code,
    }
}

/// `oxcdctl watch` and etcdctl 3.4's `watch`, side by side on one real etcd: replays of
/// history in every output format, a command run per event, live events, a compacted
/// start revision (the watch ends) and argument errors.
#[test]
fn oxcdctl_watch_prints_what_etcdctl_prints() {
    assert!(Path::new(ETCDCTL).exists(), "needs etcdctl 3.4");
    let peer_url = format!("http://127.0.0.1:{}", free_port());
    let etcd = start_etcd(&peer_url);
    let ctl = |args: &[&str]| {
        let ok = Command::new(ETCDCTL)
            .arg(format!("--endpoints={}", etcd.addr))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "etcdctl {args:?}");
    };
    for args in [
        &["put", "a", "1"][..],
        &["put", "a", "2"],
        &["put", "b", "x y"],
        &["del", "b"],
        &["put", "c", "\u{1}bin"],
    ] {
        ctl(args);
    }
    let echo =
        "echo \"$ETCD_WATCH_EVENT_TYPE $ETCD_WATCH_KEY $ETCD_WATCH_VALUE $ETCD_WATCH_REVISION\"";
    let history: Vec<Vec<&str>> = vec![
        vec!["--rev", "2", "--prefix", "", "--prev-kv"],
        vec!["--rev", "2", "--prefix", "", "--prev-kv", "-w", "json"],
        vec!["--rev", "2", "--prefix", "", "--prev-kv", "-w", "fields"],
        vec!["--rev", "2", "--prefix", "", "--prev-kv", "-w", "protobuf"],
        vec!["--rev", "2", "--prefix", "", "--hex"],
        vec!["--rev", "2", "a", "c"],
        vec!["--rev", "3", "a", "--", "sh", "-c", echo],
        // More than two keys: etcdctl watches the first alone.
        vec!["--rev", "2", "a", "b", "c"],
    ];
    let mut mismatches = Vec::new();
    let mut compared = 0;
    let mut compare = |what: String, want: Watched, got: Watched| {
        compared += 1;
        if want != got {
            mismatches.push(format!("{what}\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"));
        }
    };
    let run_both = |args: &[&str], env: &[(&str, &str)], for_: Duration| {
        let start = Instant::now();
        let a = start_watch(ETCDCTL, &etcd.addr, args, env);
        let b = start_watch(OXCDCTL, &etcd.addr, args, env);
        let a = finish_watch(a, for_);
        (a, finish_watch(b, for_.saturating_sub(start.elapsed())))
    };
    for args in &history {
        let (want, got) = run_both(args, &[], Duration::from_millis(1500));
        compare(format!("watch {args:?}"), want, got);
    }
    // Live events: both watch before the writes.
    let live = ["--prefix", "l/", "--prev-kv"];
    let a = start_watch(ETCDCTL, &etcd.addr, &live, &[]);
    let b = start_watch(OXCDCTL, &etcd.addr, &live, &[]);
    std::thread::sleep(Duration::from_millis(800));
    for args in [
        &["put", "l/1", "one"][..],
        &["put", "l/1", "uno"],
        &["del", "l/", "--prefix"],
    ] {
        ctl(args);
    }
    let (want, got) = (
        finish_watch(a, Duration::from_millis(1000)),
        finish_watch(b, Duration::from_millis(10)),
    );
    compare(format!("live watch {live:?}"), want, got);
    ctl(&["compaction", "4"]);
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let ending: Vec<Case> = vec![
        (vec!["--rev", "2", "a"], vec![]),
        (vec!["--rev", "2", "a", "-w", "json"], vec![]),
        (vec![], vec![]),
        (vec!["a", "b", "--prefix"], vec![]),
        (vec![], vec![("ETCDCTL_WATCH_RANGE_END", "z")]),
        (vec!["--rev", "1"], vec![("ETCDCTL_WATCH_KEY", "a")]),
        (vec!["b"], vec![("ETCDCTL_WATCH_KEY", "a")]),
        (vec!["a", "--"], vec![]),
    ];
    for (args, env) in &ending {
        let (want, got) = run_both(args, env, Duration::from_secs(10));
        compare(format!("watch {args:?} with {env:?}"), want, got);
    }
    println!(
        "{compared} watch commands compared, {} mismatches",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
