//! oxcdctl against etcdctl 3.4: the shared scripted session runs through each CLI against
//! its own fresh oxcd member (same flags, so same ids and revisions); stdout, the
//! `Error:` lines and exit codes must be identical. Then what etcdctl 3.4 lacks
//! (`--count-only`) and `ETCDCTL_*` variables are checked on their own.

use std::path::Path;
use std::process::{Command, Stdio};

use oxcd_config::settings::Settings;
use oxcd_server::start::serve;

const ETCDCTL: &str = "/usr/bin/etcdctl";

/// Starts an in-process member; returns its address and a stopper.
pub(super) async fn member(dir: &Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    member_with(dir, |_| {}).await
}

/// [`member`] with more settings.
async fn member_with(
    dir: &Path,
    tweak: impl FnOnce(&mut Settings),
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut s = Settings::new("default", dir.to_path_buf());
    s.listen_client_urls = vec!["http://127.0.0.1:0".into()];
    // Not etcd's default peer port, which tests running together would share.
    s.listen_peer_urls = vec!["http://127.0.0.1:0".into()];
    tweak(&mut s);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(serve::run(
        s,
        async move {
            let _ = stop_rx.await;
        },
        move |a| {
            let _ = ready_tx.send(a[0]);
        },
    ));
    let addr = ready_rx.await.expect("member started");
    (addr.to_string(), stop_tx)
}

fn session() -> Vec<(String, String)> {
    include_str!("../../../../testdata/etcdctl-session.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(" <<< ") {
            Some((a, i)) => (a.to_string(), i.replace("\\n", "\n")),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// Runs a CLI; returns stdout, the `Error:`/health lines of stderr, and the exit code.
/// Runs `args` (with `stdin`) through etcdctl against `ep_a` and through oxcdctl against
/// `ep_b`; the difference, if any, described. Database sizes in `endpoint status` (after
/// any global flags) are masked: the two members' files differ.
async fn compare_step(ep_a: &str, ep_b: &str, args: &str, stdin: &str) -> Option<String> {
    let (a, b, x, i) = (
        ep_a.to_string(),
        ep_b.to_string(),
        args.to_string(),
        stdin.to_string(),
    );
    let oxcdctl = env!("CARGO_BIN_EXE_oxcdctl");
    let (want, got) = tokio::task::spawn_blocking(move || {
        (run(ETCDCTL, &a, &x, &i, &[]), run(oxcdctl, &b, &x, &i, &[]))
    })
    .await
    .expect("join");
    let (want, got) = if args.contains("endpoint status") {
        (
            (mask_db_size(&want.0), want.1, want.2),
            (mask_db_size(&got.0), got.1, got.2),
        )
    } else if args.contains("endpoint hashkv") {
        (want, (without_hash_revision(&got.0), got.1, got.2))
    } else {
        (want, got)
    };
    (want != got).then(|| format!("{args}\n  etcdctl: {want:?}\n  oxcdctl: {got:?}"))
}

/// `endpoint hashkv`'s output less etcdctl 3.6's hash revision, which oxcdctl prints
/// for an etcd 3.6 server as oxcd (see etcdctl36.rs) and etcdctl 3.4 never does: the
/// last cell of simple lines and table rows, the `"HashRevision"` field, the JSON key.
fn without_hash_revision(s: &str) -> String {
    let drop_last = |line: &str, sep: char| {
        let mut cells: Vec<&str> = line.split(sep).collect();
        if cells.len() > 3 {
            cells.remove(cells.len() - 2);
        }
        cells.join(&sep.to_string())
    };
    let mut out = String::new();
    for line in s.lines() {
        let line = if line.starts_with("EP, ") {
            let mut cells: Vec<&str> = line.split(", ").collect();
            cells.pop();
            cells.join(", ")
        } else if line.starts_with('+') {
            drop_last(line, '+')
        } else if line.starts_with('|') {
            drop_last(line, '|')
        } else if line.starts_with("\"HashRevision\" : ") {
            continue;
        } else {
            let mut l = line.to_string();
            while let Some(i) = l.find(",\"hash_revision\":") {
                let rest = &l[i + ",\"hash_revision\":".len()..];
                let n = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                l = format!("{}{}", &l[..i], &rest[n..]);
            }
            l
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn run(
    bin: &str,
    endpoint: &str,
    args: &str,
    stdin: &str,
    env: &[(&str, &str)],
) -> (String, String, i32) {
    let mut words: Vec<String> = args
        .split(' ')
        .map(|w| w.trim_matches('"').to_string())
        .collect();
    if !endpoint.is_empty() {
        words.insert(0, format!("--endpoints={endpoint}"));
    }
    let mut cmd = Command::new(bin);
    cmd.args(&words)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn cli");
    if let Some(mut i) = child.stdin.take() {
        std::io::Write::write_all(&mut i, stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("output");
    let err: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with('{'))
        // etcdctl 3.4 runs stty around its password prompt even when stdin is a pipe,
        // which complains on stderr; oxcdctl only does so on a terminal.
        .filter(|l| !l.starts_with("stty: "))
        .map(|l| format!("{l}\n"))
        .collect();
    let mask = |s: &str| match s.find("took = ") {
        Some(i) => format!("{}took = X\n", &s[..i]),
        None => s.to_string(),
    };
    let err: String = err.lines().map(|l| mask(&format!("{l}\n"))).collect();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    if endpoint.is_empty() {
        return (stdout, err, code);
    }
    (
        stdout.replace(endpoint, "EP"),
        err.replace(endpoint, "EP"),
        code,
    )
}

/// Two members' database files differ in size (commit timing); mask that one figure.
fn mask_db_size(s: &str) -> String {
    let mut out = String::new();
    for line in s.lines() {
        let line = if line.starts_with("EP, ") {
            let mut cells: Vec<&str> = line.split(", ").collect();
            if cells.len() > 3 {
                cells[3] = "SIZE";
            }
            cells.join(", ")
        } else if line.starts_with("| EP") {
            let mut cells: Vec<&str> = line.split('|').collect();
            if cells.len() > 4 {
                cells[4] = " SIZE ";
            }
            cells.join("|")
        } else {
            let mut l = line.to_string();
            for key in ["\"dbSize\":", "\"dbSizeInUse\":", "\"DBSize\" : "] {
                let mut rest = l.as_str();
                let mut acc = String::new();
                while let Some(i) = rest.find(key) {
                    acc.push_str(&rest[..i + key.len()]);
                    rest = &rest[i + key.len()..];
                    let n = rest
                        .find(|c: char| !c.is_ascii_digit())
                        .unwrap_or(rest.len());
                    acc.push('N');
                    rest = &rest[n..];
                }
                acc.push_str(rest);
                l = acc;
            }
            l
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oxcdctl_prints_what_etcdctl_prints() {
    assert!(
        Path::new(ETCDCTL).exists(),
        "this test needs etcdctl 3.4: apt-get install -y etcd-client"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep_a, stop_a) = member(&dir.path().join("a")).await;
    let (ep_b, stop_b) = member(&dir.path().join("b")).await;
    let oxcdctl = env!("CARGO_BIN_EXE_oxcdctl");
    let mut mismatches = Vec::new();
    let script = session();
    for (args, stdin) in &script {
        if args == "version" || args.contains("--count-only") {
            continue; // each prints its own version; --count-only is etcd 3.5's, checked below
        }
        if let Some(m) = compare_step(&ep_a, &ep_b, args, stdin).await {
            mismatches.push(m);
        }
    }
    eprintln!(
        "{} commands compared, {} mismatches",
        script.len() - 2,
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "oxcdctl differs from etcdctl:\n{}",
        mismatches.join("\n")
    );

    // The password prompt of `--user name` (oxcd has no Auth service yet, so both CLIs
    // then fail alike; what is compared is the prompt and the exit code).
    let (a, b) = (ep_a.clone(), ep_b.clone());
    let (want, got) = tokio::task::spawn_blocking(move || {
        let args = "get k --user root";
        (
            run(ETCDCTL, &a, args, "secret\n", &[]),
            run(oxcdctl, &b, args, "secret\n", &[]),
        )
    })
    .await
    .expect("join");
    assert!(want.0.starts_with("Password: \n"), "{want:?}");
    assert_eq!(want, got, "the password prompt");

    // etcd 3.5 additions and environment variables, on oxcdctl alone.
    let b = ep_b.clone();
    tokio::task::spawn_blocking(move || {
        let (out, _, code) = run(
            oxcdctl,
            &b,
            "get a/ --prefix --count-only -w fields",
            "",
            &[],
        );
        assert_eq!(code, 0);
        assert!(
            out.contains("\"Count\" : 0") || out.contains("\"Count\" : "),
            "{out}"
        );
        assert!(
            !out.contains("\"Key\""),
            "count-only returns no keys: {out}"
        );
        let (_, err, code) = run(oxcdctl, &b, "get a/ --prefix --count-only", "", &[]);
        assert_eq!(
            (code, err.as_str()),
            (
                128,
                "Error: --count-only is only for `--write-out=fields`\n"
            )
        );
        let (out, _, code) = run(
            oxcdctl,
            "",
            "put envkey v",
            "",
            &[("ETCDCTL_ENDPOINTS", b.as_str())],
        );
        assert_eq!((code, out.as_str()), (0, "OK\n"));
        let (out, _, _) = run(
            oxcdctl,
            "",
            "get envkey",
            "",
            &[
                ("ETCDCTL_ENDPOINTS", b.as_str()),
                ("ETCDCTL_WRITE_OUT", "json"),
            ],
        );
        assert!(out.starts_with("{\"header\""), "{out}");
        let (_, err, code) = run(
            oxcdctl,
            "",
            "get envkey",
            "",
            &[("ETCDCTL_ENDPOINTS", "127.0.0.1:1")],
        );
        assert_eq!(
            (code, err.as_str()),
            (1, "Error: context deadline exceeded\n")
        );
    })
    .await
    .expect("join");
    let _ = stop_a.send(());
    let _ = stop_b.send(());
}

/// Over TLS with client certificates: the session through both CLIs (each against its
/// own member with the same certificates), then TLS failures — no client certificate,
/// one from another CA, no CA, a missing file, a key of another certificate, a
/// certificate without its key — must print and exit alike; `ETCDCTL_CACERT` & co work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oxcdctl_over_tls_prints_what_etcdctl_prints() {
    use oxcd_testkit::pki::{Ca, Spec};
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = dir.path().join("pki");
    let ca = Ca::new(&pki, "ca").expect("ca");
    let other = Ca::new(&pki, "other").expect("other ca");
    let server = ca.issue(&Spec::member("server")).expect("server");
    let client = ca.issue(&Spec::client("client", "root")).expect("client");
    let stranger = other
        .issue(&Spec::client("stranger", "root"))
        .expect("stranger");
    let tls = |d: &Path| {
        let (cert, key, ca_file) = (server.cert.clone(), server.key.clone(), ca.cert.clone());
        let d = d.to_path_buf();
        async move {
            member_with(&d, move |s| {
                s.listen_client_urls = vec!["https://127.0.0.1:0".into()];
                s.advertise_client_urls = vec!["https://127.0.0.1:2379".into()];
                s.client_tls.cert_file = Some(cert);
                s.client_tls.key_file = Some(key);
                s.client_tls.trusted_ca_file = Some(ca_file);
                s.client_tls.client_cert_auth = true;
            })
            .await
        }
    };
    let (a, stop_a) = tls(&dir.path().join("a")).await;
    let (b, stop_b) = tls(&dir.path().join("b")).await;
    let (ep_a, ep_b) = (format!("https://{a}"), format!("https://{b}"));
    let p = |f: &Path| f.display().to_string();
    let good = format!(
        "--cacert={} --cert={} --key={}",
        p(&ca.cert),
        p(&client.cert),
        p(&client.key)
    );
    let oxcdctl = env!("CARGO_BIN_EXE_oxcdctl");
    let mut steps: Vec<(String, String)> = session()
        .into_iter()
        .filter(|(a, _)| a != "version" && !a.contains("--count-only") && !a.contains("--cluster"))
        .map(|(a, i)| (format!("{good} {a}"), i))
        .collect();
    let missing = dir.path().join("missing.pem");
    for refusal in [
        format!("--cacert={} get k", p(&ca.cert)),
        format!(
            "--cacert={} --cert={} --key={} put k v",
            p(&ca.cert),
            p(&stranger.cert),
            p(&stranger.key)
        ),
        format!("--cert={} --key={} get k", p(&client.cert), p(&client.key)),
        format!("--cacert={} get k", p(&missing)),
        format!(
            "--cacert={} --cert={} --key={} get k",
            p(&ca.cert),
            p(&client.cert),
            p(&stranger.key)
        ),
        format!("--cacert={} --cert={} get k", p(&ca.cert), p(&client.cert)),
        format!("--cacert={} endpoint health", p(&ca.cert)),
    ] {
        steps.push((refusal, String::new()));
    }
    let mut mismatches = Vec::new();
    for (args, stdin) in &steps {
        if let Some(m) = compare_step(&ep_a, &ep_b, args, stdin).await {
            mismatches.push(m);
        }
    }
    eprintln!(
        "{} commands compared over TLS, {} mismatches",
        steps.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "oxcdctl differs from etcdctl over TLS:\n{}",
        mismatches.join("\n")
    );
    // The same settings from ETCDCTL_* variables.
    let (cacert, cert, key) = (p(&ca.cert), p(&client.cert), p(&client.key));
    let b2 = ep_b.clone();
    tokio::task::spawn_blocking(move || {
        let env = [
            ("ETCDCTL_ENDPOINTS", b2.as_str()),
            ("ETCDCTL_CACERT", cacert.as_str()),
            ("ETCDCTL_CERT", cert.as_str()),
            ("ETCDCTL_KEY", key.as_str()),
        ];
        let (out, err, code) = run(oxcdctl, "", "put tls-env v", "", &env);
        assert_eq!((code, out.as_str()), (0, "OK\n"), "{err}");
    })
    .await
    .expect("join");
    let _ = stop_a.send(());
    let _ = stop_b.send(());
}
