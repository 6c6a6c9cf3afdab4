//! `oxcdctl member` against etcdctl 3.4's `member`, and oxcd's Cluster service against
//! etcd's, on four single-member servers: two real etcd servers and two oxcd members
//! (in this process). Every invocation runs four times — etcdctl against etcd (the
//! reference), oxcdctl against the other etcd, etcdctl against an oxcd member and oxcdctl
//! against the other oxcd member — and stdout, stderr and exit codes must match the
//! reference's.
//!
//! All four servers advertise the same peer URL and cluster token, so they have the same
//! member and cluster ids; the token is chosen so that the member id is small, so that
//! every member added sorts after it (members are listed by id) on every server. etcd
//! makes an added member's id from its peer URLs and the time in seconds, so each add
//! runs on the four servers right after a second begins, and the ids usually agree; they
//! are masked anyway: each side learns the members added on its server (a hidden
//! `etcdctl member list` after each add), `@L<n>` in an invocation stands for the side's
//! n-th added member, `@SER` oxcdctl's `--consistency=s` (etcdctl 3.4 always lists
//! serializably), and in outputs its id — `%16x`, hex or decimal — reads `L<n>`
//! (the server's own id `M0`, the cluster id `C`). Protobuf answers are decoded, their
//! ids replaced, and encoded again (after checking that the bytes were the canonical
//! encoding). When two sides' ids differ in length, tables are compared without their
//! padding. `@PEER` is the servers' own peer URL, `@P<n>` the n-th URL for new members.
//!
//! Members added never start, so they are learners (a voter added to a one-member
//! cluster takes its quorum away; the last add does that, on purpose). etcd 3.5.16 clears
//! a learner's `IsLearner` when its peer URLs are updated (etcd-io/etcd#21737, fixed
//! later; oxcd keeps it): the session updates a learner only right before removing it
//! and never lists it in between.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxcd_api::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListResponse, MemberPromoteResponse,
    MemberRemoveResponse, MemberUpdateResponse, ResponseHeader,
};
use oxcd_config::settings::Settings;
use oxcd_server::start::serve;
use prost::Message;
use tokio::runtime::Runtime;
use tokio::sync::oneshot;

use super::{
    ETCDCTL, OXCDCTL, Outcome, Step, free_port, normalize, run, shell_words, show, start_etcd_with,
};

/// The invocations, in order (see the module's doc for `@...`).
const STEPS: &[&str] = &[
    // one member
    "member list",
    "member list -w json",
    "member list -w fields",
    "member list -w table",
    "member list -w protobuf",
    // a learner, then the list in every format
    "member add l1 --peer-urls=@P1 --learner",
    "member list",
    "member list -w json",
    "member list -w fields",
    "member list -w table",
    "member list -w protobuf",
    "member l",
    "member list extra words",
    // refused changes: one learner too many, URLs in use, unknown ids, a learner that
    // is not in sync (it never started), a member that is no learner
    "member add l2 --peer-urls=@P2 --learner",
    "member add l2 --peer-urls=@PEER --learner",
    "member add l2 --peer-urls=@P1 --learner -w json",
    "member promote @L1",
    "member promote @L1 -w json",
    "member promote @L1 -w fields",
    "member promote @M0",
    "member promote 1234",
    "member promote 1234 -w protobuf",
    "member update @L1 --peer-urls=@PEER",
    "member update 1234 --peer-urls=@P3",
    "member remove 1234",
    "member remove 1234 -w json",
    // the server's own member updated to the URL it has, in every format (fields and
    // table refuse to print, after the update)
    "member update @M0 --peer-urls=@PEER",
    "member update @M0 --peer-urls=@PEER -w json",
    "member update @M0 --peer-urls=@PEER -w protobuf",
    "member update @M0 --peer-urls=@PEER -w fields",
    "member update @M0 --peer-urls=@PEER -w table",
    // the learner's URL changed, then the learner removed (twice)
    "member update @L1 --peer-urls=@P3",
    "member remove @L1",
    "member remove @L1",
    "member list",
    // add and remove in the other formats (fields and table refuse to print, after the
    // change)
    "member add l2 --peer-urls=@P4 --learner -w json",
    "member list -w json",
    "member remove @L2 -w json",
    "member add l3 --peer-urls=@P5 --learner -w protobuf",
    "member remove @L3 -w protobuf",
    "member add l4 --peer-urls=@P6 --learner -w fields",
    "member list -w fields",
    "member remove @L4 -w fields",
    "member add l5 --peer-urls=@P7 --learner -w table",
    "member list -w table",
    "member remove @L5 -w table",
    "member list",
    // argument errors, and URLs clientv3 refuses before asking
    "member add",
    "member add --peer-urls=@P8",
    "member add l6",
    "member add l6 --peer-urls=",
    "member add l6 @P8",
    "member add l6 extra --peer-urls=@P8",
    "member add l6 --peer-urls=ftp://127.0.0.1:1 --learner",
    "member add l6 --peer-urls=http://127.0.0.1 --learner",
    "member add l6 --peer-urls=@P8/path --learner",
    "member add l6 '--peer-urls=@P8,http://[::1' --learner",
    "member add l6 --peer-urls=@P8, --learner",
    "member add l6 --peer-urls=ftp://x -w bogus",
    "member add l6 --peer-urls=@P8 --learner=maybe",
    "member remove",
    "member remove 1 2",
    "member remove zz",
    "member remove 0x10",
    "member remove 10000000000000000",
    "member remove -- -1",
    "member remove zz -w bogus",
    "member update",
    "member update zz --peer-urls=@P8",
    "member update @M0",
    "member update @M0 --peer-urls=http://x",
    "member promote",
    "member promote zz",
    "member promote 1 2",
    "member list --linearizable=true",
    "member list -w bogus",
    // help
    "member",
    "member --help",
    "member bogus",
    "member add --help",
    "member remove -h",
    "help member update",
    "member list --help",
    "member promote --help",
    // a voter, last: it never starts, so the cluster has lost its quorum (the
    // serializable list is served without one); its URLs out of order
    "member add v1 --peer-urls=@P9,@P8",
    "member list @SER",
];

/// Whether `line` adds a member (and so runs on the four servers in the same second).
fn adds(line: &str) -> bool {
    line.starts_with("member add ")
        && line.contains("=@P")
        && !line.contains("bogus")
        && !line.contains("maybe")
}

/// An oxcd member running in this process; stopped when dropped.
struct Oxcd {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Oxcd {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts an oxcd member advertising `peer_url`, with cluster token `token`, on `rt`.
fn start_oxcd(rt: &Runtime, peer_url: &str, token: &str) -> Oxcd {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut s = Settings::new("default", dir.path().join("data"));
    s.listen_client_urls = vec![format!("http://{addr}")];
    s.advertise_client_urls = s.listen_client_urls.clone();
    s.listen_peer_urls = vec!["http://127.0.0.1:0".into()];
    s.peer_urls = vec![peer_url.to_string()];
    s.initial_cluster = vec![("default".to_string(), vec![peer_url.to_string()])];
    s.initial_cluster_token = token.to_string();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (ready_tx, ready_rx) = oneshot::channel();
    rt.spawn(serve::run(
        s,
        async move {
            let _ = stop_rx.await;
        },
        move |a| {
            let _ = ready_tx.send(a);
        },
    ));
    rt.block_on(ready_rx).expect("oxcd member started");
    Oxcd {
        addr,
        stop: Some(stop_tx),
        _dir: dir,
    }
}

/// A cluster token that gives the member advertising `peer_url` an id below 2^48, so
/// that an added member's id (a hash) sorts after it but once in 65536 times.
fn small_id_token(peer_url: &str) -> (String, u64) {
    let urls = [peer_url.to_string()];
    (0u64..)
        .map(|n| format!("members-{n}"))
        .map(|t| {
            let id = oxcd_server::domains::membership::ids::member_id(&urls, &t);
            (t, id)
        })
        .find(|(_, id)| *id < 1 << 48)
        .expect("a token")
}

/// The cluster id and member ids a server lists (etcdctl's JSON, read without a JSON
/// parser: the numbers after `"cluster_id":` and each `"ID":`).
fn members(addr: &str) -> (u64, Vec<u64>) {
    let out = Command::new(ETCDCTL)
        .arg(format!("--endpoints={addr}"))
        .args(["member", "list", "-w", "json"])
        .stderr(Stdio::null())
        .output()
        .expect("run etcdctl");
    let text = String::from_utf8_lossy(&out.stdout);
    let number = |s: &str| -> u64 {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().expect("an id")
    };
    let cluster = text
        .split("\"cluster_id\":")
        .nth(1)
        .map(number)
        .unwrap_or_else(|| panic!("no cluster id in {text:?}"));
    let ids = text.split("\"ID\":").skip(1).map(number).collect();
    (cluster, ids)
}

/// One CLI against one server, with the ids it has seen there.
struct Side<'a> {
    name: &'static str,
    bin: &'static str,
    addr: &'a str,
    cluster: u64,
    /// The server's own member first, then each member added, in order.
    ids: Vec<u64>,
}

impl<'a> Side<'a> {
    fn new(name: &'static str, bin: &'static str, addr: &'a str) -> Side<'a> {
        let (cluster, ids) = members(addr);
        assert_eq!(ids.len(), 1, "{name}: one member to begin with");
        Side {
            name,
            bin,
            addr,
            cluster,
            ids,
        }
    }

    /// Records the members added on the server since the last look.
    fn learn(&mut self) {
        for id in members(self.addr).1 {
            if !self.ids.contains(&id) {
                self.ids.push(id);
            }
        }
    }

    /// The line's words with `@...` filled in for this side.
    fn expand(&self, line: &str, peer: &str, urls: &[String]) -> Step {
        let mut text = line.replace("@PEER", peer);
        for (i, u) in urls.iter().enumerate().rev() {
            text = text.replace(&format!("@P{}", i + 1), u);
        }
        for (i, id) in self.ids.iter().enumerate().skip(1).rev() {
            text = text.replace(&format!("@L{i}"), &format!("{id:x}"));
        }
        text = text.replace("@M0", &format!("{:x}", self.ids[0]));
        // etcdctl 3.6 lists linearizably by default, 3.4 serializably: `@SER` asks
        // oxcdctl for the serializable list (v3.6.14 etcdctl/ctlv3/command/
        // member_command.go `--consistency`), and nothing of etcdctl 3.4.
        let serializable = if self.bin == ETCDCTL {
            ""
        } else {
            "--consistency=s"
        };
        text = text.replace("@SER", serializable);
        Step {
            line: line.to_string(),
            env: Vec::new(),
            args: shell_words(&text),
            stdin: Vec::new(),
        }
    }

    /// Each id this side knows, with its mask and the small number protobuf answers get.
    fn masks(&self) -> Vec<(u64, String, u64)> {
        let mut v = vec![(self.cluster, "C".to_string(), 1)];
        for (i, id) in self.ids.iter().enumerate() {
            let name = if i == 0 {
                "M0".to_string()
            } else {
                format!("L{i}")
            };
            v.push((*id, name, 100 + i as u64));
        }
        v
    }

    fn mask_text(&self, s: &str) -> String {
        let mut s = s.replace("API VERSION:\n\t3.4", "API VERSION:\n\t3.x");
        s = s.replace("API VERSION:\n\t3.5", "API VERSION:\n\t3.x");
        s = s.replace("API VERSION:\n\t3.6", "API VERSION:\n\t3.x");
        // etcdctl 3.6's flag, which oxcdctl has and etcdctl 3.4 has not (v3.6.14
        // etcdctl/ctlv3/command/member_command.go NewMemberListCommand).
        s = s.replace(
            "      --consistency=\"l\"\tLinearizable(l) or Serializable(s)\n",
            "",
        );
        for (id, name, _) in self.masks() {
            s = s.replace(&format!("{id:16x}"), &name);
            s = s.replace(&id.to_string(), &name);
            s = s.replace(&format!("{id:x}"), &name);
        }
        s
    }

    fn mask_id(&self, id: &mut u64) {
        if let Some((_, _, n)) = self.masks().into_iter().find(|(x, _, _)| x == id) {
            *id = n;
        }
    }

    fn mask_header(&self, h: &mut Option<ResponseHeader>) {
        if let Some(h) = h {
            self.mask_id(&mut h.cluster_id);
            self.mask_id(&mut h.member_id);
        }
    }

    fn mask_members(&self, members: &mut [Member]) {
        for m in members {
            self.mask_id(&mut m.id);
            for u in &mut m.client_ur_ls {
                *u = u.replace(self.addr, "EP");
            }
        }
    }

    /// A protobuf answer with its ids masked; a note instead when it is not the
    /// canonical encoding of the message the command answers with.
    fn mask_protobuf(&self, line: &str, b: &[u8]) -> Vec<u8> {
        fn canonical<M: Message + Default>(b: &[u8]) -> Option<M> {
            M::decode(b).ok().filter(|m| m.encode_to_vec() == b)
        }
        let masked = match line.split_whitespace().nth(1) {
            Some("add") => canonical::<MemberAddResponse>(b).map(|mut r| {
                self.mask_header(&mut r.header);
                if let Some(m) = &mut r.member {
                    self.mask_id(&mut m.id);
                }
                self.mask_members(&mut r.members);
                r.encode_to_vec()
            }),
            Some("remove") => canonical::<MemberRemoveResponse>(b).map(|mut r| {
                self.mask_header(&mut r.header);
                self.mask_members(&mut r.members);
                r.encode_to_vec()
            }),
            Some("update") => canonical::<MemberUpdateResponse>(b).map(|mut r| {
                self.mask_header(&mut r.header);
                self.mask_members(&mut r.members);
                r.encode_to_vec()
            }),
            Some("promote") => canonical::<MemberPromoteResponse>(b).map(|mut r| {
                self.mask_header(&mut r.header);
                self.mask_members(&mut r.members);
                r.encode_to_vec()
            }),
            _ => canonical::<MemberListResponse>(b).map(|mut r| {
                self.mask_header(&mut r.header);
                self.mask_members(&mut r.members);
                r.encode_to_vec()
            }),
        };
        masked.unwrap_or_else(|| {
            let mut note = b"not a canonical answer: ".to_vec();
            note.extend_from_slice(b);
            note
        })
    }

    /// Runs `line`: the step run and what it printed, unmasked.
    fn run(&self, line: &str, peer: &str, urls: &[String]) -> (Step, Outcome) {
        let step = self.expand(line, peer, urls);
        let o = run(self.bin, self.addr, &step);
        (step, o)
    }

    /// What [`Side::run`] printed with what may differ masked (once the ids it may
    /// print are known).
    fn mask(&self, (step, o): (Step, Outcome)) -> Outcome {
        let protobuf = step.line.contains("-w protobuf") && o.code == 0;
        let raw = o.stdout.clone();
        let o = normalize(o, self.addr, self.bin == ETCDCTL, &step);
        let stdout = if protobuf {
            self.mask_protobuf(&step.line, &raw)
        } else {
            self.mask_text(&String::from_utf8_lossy(&o.stdout))
                .into_bytes()
        };
        Outcome {
            stdout,
            stderr: self.mask_text(&o.stderr),
            code: o.code,
        }
    }

    /// Whether some id is written with a different number of hex digits here and on
    /// `other` (then tables differ in their padding).
    fn widths_differ(&self, other: &Side) -> bool {
        let len = |id: &u64| format!("{id:x}").len();
        self.ids.iter().map(len).ne(other.ids.iter().map(len))
    }
}

/// A table without its padding and borders.
fn unpadded(o: &Outcome) -> Outcome {
    let mut stdout = o.stdout.clone();
    stdout.retain(|c| *c != b' ' && *c != b'-');
    Outcome {
        stdout,
        stderr: o.stderr.clone(),
        code: o.code,
    }
}

/// Waits until a second has just begun.
fn start_of_a_second() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    std::thread::sleep(Duration::from_secs(1) - into + Duration::from_millis(5));
}

/// What a server answers, as `(code, message)`, to requests etcdctl never sends
/// (clientv3 refuses their URLs first).
fn raw_refusals(rt: &Runtime, addr: &str) -> Vec<String> {
    let opts = oxcd_client::ConnectOptions::default();
    rt.block_on(async {
        let c = oxcd_client::Client::connect(&[addr.to_string()], &opts)
            .await
            .expect("connect");
        let mut out = Vec::new();
        for urls in [
            vec![],
            vec!["ftp://127.0.0.1:1"],
            vec!["http://127.0.0.1"],
            vec!["http://127.0.0.1:1/path"],
            vec!["http://127.0.0.1:1", "%zz"],
        ] {
            let req = MemberAddRequest {
                peer_ur_ls: urls.iter().map(|u| u.to_string()).collect(),
                is_learner: true,
            };
            let answer = match c.cluster().member_add(req).await {
                Ok(r) => format!("added {:?}", r.into_inner().member),
                Err(s) => format!("{:?}: {}", s.code(), s.message()),
            };
            out.push(format!("add {urls:?}: {answer}"));
        }
        out
    })
}

#[test]
fn oxcdctl_member_prints_what_etcdctl_prints_against_etcd_and_oxcd() {
    assert!(std::path::Path::new(ETCDCTL).exists(), "needs etcdctl 3.4");
    let peer = format!("http://127.0.0.1:{}", free_port());
    let (token, own_id) = small_id_token(&peer);
    // In order, so that `@P9,@P8` is not: etcd lists a new member's URLs sorted.
    let mut urls: Vec<String> = (0..9)
        .map(|_| format!("http://127.0.0.1:{}", free_port()))
        .collect();
    urls.sort();
    let flags = [format!("--initial-cluster-token={token}")];
    let (etcd_a, etcd_b) = (
        start_etcd_with(&peer, &flags),
        start_etcd_with(&peer, &flags),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (oxcd_c, oxcd_d) = (
        start_oxcd(&rt, &peer, &token),
        start_oxcd(&rt, &peer, &token),
    );

    let mut sides = [
        Side::new("etcdctl against etcd", ETCDCTL, &etcd_a.addr),
        Side::new("oxcdctl against etcd", OXCDCTL, &etcd_b.addr),
        Side::new("etcdctl against oxcd", ETCDCTL, &oxcd_c.addr),
        Side::new("oxcdctl against oxcd", OXCDCTL, &oxcd_d.addr),
    ];
    let mut mismatches = Vec::new();
    // Same flags, same ids: etcd's and oxcd's.
    for s in &sides[1..] {
        if (s.cluster, s.ids[0]) != (sides[0].cluster, own_id) {
            mismatches.push(format!(
                "{}: cluster {:x}, member {:x}; etcd: cluster {:x}, member {own_id:x}",
                s.name, s.cluster, s.ids[0], sides[0].cluster
            ));
        }
    }
    for line in STEPS {
        if adds(line) {
            start_of_a_second();
        }
        let ran: Vec<(Step, Outcome)> = sides.iter().map(|s| s.run(line, &peer, &urls)).collect();
        if line.starts_with("member add") {
            for s in &mut sides {
                s.learn();
            }
        }
        let outcomes: Vec<Outcome> = sides.iter().zip(ran).map(|(s, r)| s.mask(r)).collect();
        let want = &outcomes[0];
        for (s, got) in sides.iter().zip(&outcomes).skip(1) {
            let same = want == got
                || (line.contains("-w table")
                    && sides[0].widths_differ(s)
                    && unpadded(want) == unpadded(got));
            if !same {
                mismatches.push(format!(
                    "{line}\n== {}\n{}== {}\n{}",
                    sides[0].name,
                    show(want),
                    s.name,
                    show(got)
                ));
            }
        }
    }
    // Not vacuous: each server took the six adds that should go through.
    let added: Vec<usize> = sides.iter().map(|s| s.ids.len() - 1).collect();
    if added != [6; 4] {
        mismatches.push(format!("members added on each server: {added:?}, not 6"));
    }

    // The server's own refusals of URLs etcdctl would not send.
    let want = raw_refusals(&rt, &etcd_a.addr);
    let got = raw_refusals(&rt, &oxcd_c.addr);
    for (w, g) in want.iter().zip(&got) {
        if w != g {
            mismatches.push(format!("gRPC {w}\n  oxcd: {g}"));
        }
    }
    println!(
        "{} member invocations compared on 3 sides, {} gRPC requests; {} mismatches",
        STEPS.len(),
        want.len(),
        mismatches.len()
    );
    drop(sides);
    drop((oxcd_c, oxcd_d));
    rt.shutdown_timeout(Duration::from_secs(5));
    drop((etcd_a, etcd_b));
    assert!(
        mismatches.is_empty(),
        "oxcdctl member or oxcd differs from etcdctl against etcd:\n\n{}",
        mismatches.join("\n\n")
    );
}
