//! `oxcdctl lease` against etcdctl 3.4's `lease`, on two real etcd servers with the same
//! cluster and member ids (see [`super`]): each invocation runs through etcdctl against
//! server A and through oxcdctl against server B, and stdout, stderr and exit codes must
//! match.
//!
//! etcd makes lease ids from its clock, so the servers' ids differ: each side's leases
//! are numbered in the order they were granted (a hidden `etcdctl lease list` after each
//! grant finds the new one), `@L<n>` in an invocation stands for the side's lease n, and
//! in outputs each lease's id, in hex or decimal, reads `L<n>`. Also masked: a lease's
//! remaining TTL in timetolive's answers (it depends on timing) and the API version in
//! group help (oxcdctl speaks 3.5).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{
    ETCDCTL, Etcd, OXCDCTL, Outcome, Step, Watched, finish_watch, free_port, normalize, run,
    shell_words, show, start_etcd,
};

/// The invocations, in order; `@L<n>` is the side's n-th lease.
const STEPS: &[&str] = &[
    // grant in every format (each lease is granted, whatever is printed)
    "lease grant 100",
    "lease grant 200 -w json",
    "lease grant 300 -w fields",
    "lease grant 400 -w protobuf",
    "lease grant 500 -w table",
    "lease grant 0",
    "lease revoke @L6",
    "lease grant -- -5",
    "lease revoke @L7 -w json",
    "lease grant 9000000000",
    "lease gr 600",
    "lease grant 9000000001",
    "lease grant 99999999999999999999",
    "lease grant x",
    "lease grant 0x10",
    "lease grant",
    "lease grant 1 2",
    "lease grant -5",
    "lease grant --ttl 5",
    // keys on leases (one each: etcd answers a lease's keys in no particular order)
    "put --lease @L1 k1 v1",
    "put --lease @L2 'k 2' v2",
    // timetolive
    "lease timetolive @L1",
    "lease timetolive @L1 --keys",
    "lease timetolive @L1 -w json",
    "lease timetolive @L1 --keys -w json",
    "lease timetolive @L1 --keys -w fields",
    "lease timetolive @L1 --keys -w protobuf",
    "lease timetolive @L1 -w table",
    "lease timetolive @L3 --keys",
    "lease timetolive @L3 --keys -w json",
    "lease timetolive @L8 -w fields",
    "lease t @L2 --keys",
    "lease timetolive 1234",
    "lease timetolive 1234 --keys",
    "lease timetolive 1234 -w json",
    "lease timetolive 1234 --keys -w fields",
    "lease timetolive 1234 -w protobuf",
    "lease timetolive -- -1",
    "lease timetolive -- -7fffffffffffffff",
    "lease timetolive zz",
    "lease timetolive zz -w bogus",
    "lease timetolive 8000000000000000",
    "lease timetolive",
    "lease timetolive 1 2",
    "lease timetolive 1234 --key",
    // list
    "lease list",
    "lease list -w json",
    "lease list -w fields",
    "lease list -w protobuf",
    "lease list -w table",
    "lease list extra words",
    // keep-alive
    "lease keep-alive --once @L1",
    "lease keep-alive --once @L1 -w json",
    "lease keep-alive --once @L1 -w fields",
    "lease keep-alive --once @L1 -w protobuf",
    "lease keep-alive --once @L1 -w table",
    "lease k --once @L2",
    "lease keep-alive --once 1234",
    "lease keep-alive --once 1234 -w json",
    "lease keep-alive --once",
    "lease keep-alive --once x",
    "lease keep-alive --once 1 2",
    "lease keep-alive 1234",
    "lease keep-alive 1234 -w json",
    "lease keep-alive 1234 -w fields",
    "lease keep-alive 1234 -w protobuf",
    "lease keep-alive 1234 -w table",
    "lease keep-alive",
    // revoke (a lease's keys go with it)
    "lease revoke @L1",
    "get k --prefix",
    "lease revoke @L1",
    "lease revoke 1234",
    "lease revoke @L2 -w fields",
    "lease revoke @L3 -w protobuf",
    "lease revoke @L4 -w table",
    "lease revoke @L5 -w json",
    "lease revoke @L9 -w protobuf",
    "lease revoke",
    "lease revoke x y",
    "lease revoke 0x10",
    "lease revoke 8000000000000000",
    "lease revoke -- -1",
    "lease revoke zz -w bogus",
    "lease timetolive @L1",
    "lease timetolive @L2 --keys -w json",
    "lease list",
    "lease list -w fields",
    "get '' --prefix -w json",
    // help
    "lease",
    "lease --help",
    "lease bogus",
    "lease grant --help",
    "lease revoke -h",
    "help lease timetolive",
    "lease list --help",
    "lease keep-alive --help",
];

/// One CLI against one server, with the leases granted there so far.
struct Side<'a> {
    bin: &'static str,
    etcd: &'a Etcd,
    leases: Vec<i64>,
}

/// etcdctl's stdout for a hidden request.
fn ctl(addr: &str, args: &[&str]) -> String {
    let out = Command::new(ETCDCTL)
        .arg(format!("--endpoints={addr}"))
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("run etcdctl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first lease id in etcdctl's `lease grant` output.
fn granted(out: &str) -> i64 {
    out.split_whitespace()
        .nth(1)
        .and_then(|h| i64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| panic!("no lease in {out:?}"))
}

impl Side<'_> {
    /// Records the leases the server has that this side does not know yet.
    fn learn_leases(&mut self) {
        let list = ctl(&self.etcd.addr, &["lease", "list", "-w", "json"]);
        for part in list.split("{\"id\":").skip(1) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            let id: i64 = digits.parse().expect("a lease id");
            if !self.leases.contains(&id) {
                self.leases.push(id);
            }
        }
    }

    /// The step with `@L<n>` replaced by this side's lease n (highest n first, so that
    /// `@L1` does not eat into `@L10`).
    fn expand(&self, line: &str) -> Step {
        let mut text = line.to_string();
        for (i, id) in self.leases.iter().enumerate().rev() {
            text = text.replace(&format!("@L{}", i + 1), &format!("{id:016x}"));
        }
        Step {
            line: line.to_string(),
            env: Vec::new(),
            args: shell_words(&text),
            stdin: Vec::new(),
        }
    }

    /// Runs `line` and masks what may differ.
    fn run(&mut self, line: &str) -> Outcome {
        let step = self.expand(line);
        let o = run(self.bin, &self.etcd.addr, &step);
        if line.starts_with("lease gr") {
            self.learn_leases();
        }
        let o = normalize(o, &self.etcd.addr, self.bin == ETCDCTL, &step);
        Outcome {
            stdout: self.mask(&String::from_utf8_lossy(&o.stdout)).into_bytes(),
            stderr: self.mask(&o.stderr),
            code: o.code,
        }
    }

    /// Lease ids as `L<n>`, remaining TTLs as `R`, the API version as `3.x`.
    fn mask(&self, s: &str) -> String {
        let mut s = s.replace("API VERSION:\n\t3.4", "API VERSION:\n\t3.x");
        s = s.replace("API VERSION:\n\t3.5", "API VERSION:\n\t3.x");
        s = s.replace("API VERSION:\n\t3.6", "API VERSION:\n\t3.x");
        for (i, id) in self.leases.iter().enumerate() {
            s = s.replace(&format!("{id:016x}"), &format!("L{}", i + 1));
            s = s.replace(&id.to_string(), &format!("L{}", i + 1));
        }
        if s.contains("remaining(") || s.contains("granted-ttl") || s.contains("GrantedTTL") {
            for key in ["remaining(", "\"ttl\":", "\"TTL\" : "] {
                s = mask_number_after(&s, key);
            }
        }
        s
    }
}

/// Each non-negative number right after `key`, as `R`.
fn mask_number_after(s: &str, key: &str) -> String {
    let mut parts = s.split(key);
    let mut out = parts.next().unwrap_or_default().to_string();
    for p in parts {
        out.push_str(key);
        let n = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
        if n > 0 {
            out.push('R');
        }
        out.push_str(&p[n..]);
    }
    out
}

/// Starts `bin lease keep-alive <args>` against `addr`.
fn start_keep_alive(bin: &str, addr: &str, args: &[String]) -> Child {
    Command::new(bin)
        .arg(format!("--endpoints={addr}"))
        .args(["lease", "keep-alive"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a keep-alive")
}

/// A keep-alive with lease ids masked.
fn masked(w: Watched, id: i64) -> Watched {
    Watched {
        stdout: String::from_utf8_lossy(&w.stdout)
            .replace(&format!("{id:016x}"), "L")
            .replace(&id.to_string(), "L")
            .into_bytes(),
        ..w
    }
}

/// Both CLIs keep a fresh lease of `ttl` seconds alive on their own server; after
/// `wait` the lease is revoked (`interrupt` false) or the CLI gets SIGINT (true).
fn keep_alive_both(
    a: &Etcd,
    b: &Etcd,
    ttl: &str,
    flags: &[&str],
    wait: Duration,
    interrupt: bool,
) -> (Watched, Watched) {
    let ia = granted(&ctl(&a.addr, &["lease", "grant", ttl]));
    let ib = granted(&ctl(&b.addr, &["lease", "grant", ttl]));
    let args = |id: i64| {
        let mut v: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        v.push(format!("{id:016x}"));
        v
    };
    let ca = start_keep_alive(ETCDCTL, &a.addr, &args(ia));
    let cb = start_keep_alive(OXCDCTL, &b.addr, &args(ib));
    std::thread::sleep(wait);
    for (c, etcd, id) in [(&ca, a, ia), (&cb, b, ib)] {
        if interrupt {
            let ok = Command::new("kill")
                .args(["-INT", &c.id().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill -INT");
        } else {
            ctl(&etcd.addr, &["lease", "revoke", &format!("{id:x}")]);
        }
    }
    let wa = finish_watch(ca, Duration::from_secs(10));
    let wb = finish_watch(cb, Duration::from_secs(10));
    (masked(wa, ia), masked(wb, ib))
}

#[test]
fn oxcdctl_lease_prints_what_etcdctl_prints() {
    assert!(std::path::Path::new(ETCDCTL).exists(), "needs etcdctl 3.4");
    let peer_url = format!("http://127.0.0.1:{}", free_port());
    let (a, b) = (start_etcd(&peer_url), start_etcd(&peer_url));
    let mut want_side = Side {
        bin: ETCDCTL,
        etcd: &a,
        leases: Vec::new(),
    };
    let mut got_side = Side {
        bin: OXCDCTL,
        etcd: &b,
        leases: Vec::new(),
    };
    let mut mismatches = Vec::new();
    for line in STEPS {
        let want = want_side.run(line);
        let got = got_side.run(line);
        if want != got {
            mismatches.push(format!(
                "{line}\n== etcdctl (server A)\n{}== oxcdctl (server B)\n{}",
                show(&want),
                show(&got)
            ));
        }
    }
    assert_eq!(
        want_side.leases.len(),
        got_side.leases.len(),
        "both servers granted as many leases"
    );
    // keep-alive until the lease is revoked (keepalives at 0 s, 2 s, then an answer
    // with TTL 0 at 4 s), in two formats, and until interrupted.
    let live = [
        ("6", &[][..], Duration::from_secs(3), false),
        ("6", &["-w", "json"][..], Duration::from_secs(3), false),
        ("60", &[][..], Duration::from_millis(1500), true),
    ];
    for (ttl, flags, wait, interrupt) in live {
        let (want, got) = keep_alive_both(&a, &b, ttl, flags, wait, interrupt);
        // Not vacuous: etcdctl renewed the lease, and ended as the case expects.
        let text = String::from_utf8_lossy(&want.stdout);
        assert!(text.contains("TTL"), "etcdctl renewed nothing: {want:?}");
        let ended = flags.is_empty() && !interrupt;
        assert_eq!(text.contains("expired or revoked."), ended, "{want:?}");
        assert_eq!(want.code.is_none(), interrupt, "{want:?}");
        if want != got {
            mismatches.push(format!(
                "keep-alive (TTL {ttl}, {flags:?}, interrupted: {interrupt})\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"
            ));
        }
    }
    let total = STEPS.len() + live.len();
    println!(
        "{total} lease invocations compared, {} mismatches",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "oxcdctl lease differs from etcdctl:\n\n{}",
        mismatches.join("\n\n")
    );
}
