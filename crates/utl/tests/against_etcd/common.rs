//! What the tests share: servers started as processes (the reference etcd, `oxcd`), the
//! tools run as processes, and the state compared between servers (every key with its
//! revisions, version and lease; the revision; HashKV at that revision).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions, PutOptions};
use oxcd_testkit::ports::free_port;

/// Debian's etcdctl 3.4, which saves snapshots from either etcd.
pub const ETCDCTL: &str = "/usr/bin/etcdctl";

/// `oxcdutl`, built with these tests.
pub fn oxcdutl() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_oxcdutl"))
}

/// etcd 3.5's `etcdutl` beside the reference etcd. Panics when the reference is not
/// 3.5 (`OXCD_REFERENCE_ETCD` names it; `scripts/test.sh` sets it).
pub fn etcdutl() -> PathBuf {
    oxcd_testkit::reference::etcdutl_binary().expect(
        "these tests compare with etcdutl 3.5: set OXCD_REFERENCE_ETCD to etcd 3.5.16 (scripts/test.sh does)",
    )
}

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    /// Where clients reach it (`host:port`).
    pub endpoint: String,
    /// Its log.
    pub log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Stops it (SIGKILL is fine: every test reads its data through a snapshot or a
    /// restart, which a kill does not harm).
    pub fn stop(self) {}

    /// A client of it.
    pub async fn client(&self) -> Client {
        Client::connect([self.endpoint.clone()], None)
            .await
            .expect("connect")
    }

    /// A client of it as `user`.
    pub async fn client_as(&self, user: &str, password: &str) -> Client {
        Client::connect(
            [self.endpoint.clone()],
            Some(ConnectOptions::new().with_user(user, password)),
        )
        .await
        .expect("connect")
    }
}

/// A one-member etcd (`binary`) in `dir` on free ports.
pub fn start_etcd(binary: &Path, dir: &Path) -> Server {
    let (c, p) = (free_port().expect("port"), free_port().expect("port"));
    let peer = format!("http://127.0.0.1:{p}");
    start_etcd_at(binary, dir, c, &peer, &format!("default={peer}"))
}

/// etcd from `dir` (a fresh or restored data dir) serving clients on port `c` and
/// peers at `peer`, with `--initial-cluster` `cluster`.
pub fn start_etcd_at(binary: &Path, dir: &Path, c: u16, peer: &str, cluster: &str) -> Server {
    let client = format!("http://127.0.0.1:{c}");
    let log = dir.with_extension("etcd.log");
    let mut cmd = Command::new(binary);
    cmd.arg("--data-dir")
        .arg(dir)
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", peer])
        .args(["--initial-advertise-peer-urls", peer])
        .args(["--initial-cluster", cluster]);
    let child = oxcd_testkit::process::spawn_logged(&mut cmd, &log).expect("start etcd");
    let s = Server {
        child,
        endpoint: format!("127.0.0.1:{c}"),
        log,
    };
    wait_healthy(&s);
    s
}

/// `oxcd` named `name` in `dir`, serving clients on port `c` and peers at `peer`,
/// bootstrapped (if its data dir is new) with `cluster`; waits until it serves.
pub fn spawn_oxcd(name: &str, dir: &Path, c: u16, peer: &str, cluster: &str) -> Server {
    spawn_oxcd_with(name, dir, c, peer, cluster, &[])
}

/// [`spawn_oxcd`] with more flags.
pub fn spawn_oxcd_with(
    name: &str,
    dir: &Path,
    c: u16,
    peer: &str,
    cluster: &str,
    extra: &[String],
) -> Server {
    let client = format!("http://127.0.0.1:{c}");
    let log = dir.with_extension("oxcd.log");
    let mut cmd = Command::new(oxcd_testkit::process::built_oxcd());
    cmd.args(["--name", name])
        .arg("--data-dir")
        .arg(dir)
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", peer])
        .args(["--initial-advertise-peer-urls", peer])
        .args(["--initial-cluster", cluster])
        .args(["--initial-cluster-token", "utl-tests"])
        .args(extra);
    let child = oxcd_testkit::process::spawn_logged(&mut cmd, &log).expect("start oxcd");
    Server {
        child,
        endpoint: format!("127.0.0.1:{c}"),
        log,
    }
}

/// Waits until `s` logged that it serves clients.
pub fn wait_ready(s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let log = std::fs::read_to_string(&s.log).unwrap_or_default();
        if log.contains("ready to serve client requests") {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "{} did not get ready:\n{}",
        s.endpoint,
        std::fs::read_to_string(&s.log).unwrap_or_default()
    );
}

/// A one-member oxcd in `dir` on free ports.
pub fn start_oxcd(dir: &Path) -> Server {
    let (c, p) = (free_port().expect("port"), free_port().expect("port"));
    let peer = format!("http://127.0.0.1:{p}");
    let s = spawn_oxcd("default", dir, c, &peer, &format!("default={peer}"));
    wait_ready(&s);
    s
}

fn wait_healthy(s: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let ok = Command::new(ETCDCTL)
            .arg(format!("--endpoints={}", s.endpoint))
            .args(["endpoint", "health"])
            .env("ETCDCTL_API", "3")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|st| st.success());
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "{} did not become healthy:\n{}",
        s.endpoint,
        std::fs::read_to_string(&s.log).unwrap_or_default()
    );
}

/// Runs `cmd`; its output, whatever its exit status.
pub fn output(cmd: &mut Command) -> Output {
    cmd.env("ETCDCTL_API", "3").output().expect("run")
}

/// Runs `cmd`, which must succeed; its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = output(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr without the log lines (zap's console lines start with the year, its JSON
/// lines with `{`): the messages a user reads.
pub fn messages(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with("20") && !l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `etcdctl snapshot save` (3.4) of the server at `endpoint` into `file`, as `user`
/// (`name:password`) if given.
pub fn etcdctl_save(endpoint: &str, file: &Path, user: Option<&str>) {
    let mut cmd = Command::new(ETCDCTL);
    cmd.arg(format!("--endpoints={endpoint}"));
    if let Some(u) = user {
        cmd.arg(format!("--user={u}"));
    }
    run(cmd.args(["snapshot", "save"]).arg(file));
}

/// `oxcdutl snapshot restore <file> <flags>`, which must succeed.
pub fn restore(file: &Path, flags: &[String]) {
    run(Command::new(oxcdutl())
        .args(["snapshot", "restore"])
        .arg(file)
        .args(flags));
}

/// The flags of a restore of member `name` of the one-member cluster at `peer`.
pub fn restore_flags(dir: &Path, name: &str, peer: &str) -> Vec<String> {
    vec![
        "--data-dir".into(),
        dir.display().to_string(),
        "--name".into(),
        name.into(),
        "--initial-cluster".into(),
        format!("{name}={peer}"),
        "--initial-advertise-peer-urls".into(),
        peer.into(),
    ]
}

/// History with everything a restore must carry: puts, overwrites, deletes, a
/// compaction, leased keys, users and roles. Returns the lease.
pub async fn write_history(c: &mut Client) -> i64 {
    let lease = c.lease_grant(600, None).await.expect("grant").id();
    for i in 0..120 {
        c.put(format!("k{i:03}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
    for i in 0..40 {
        c.put(format!("k{i:03}"), format!("w{i}"), None)
            .await
            .expect("overwrite");
    }
    for i in 60..70 {
        c.delete(format!("k{i:03}"), None).await.expect("delete");
    }
    let rev = c
        .get("k000", None)
        .await
        .expect("get")
        .header()
        .expect("header")
        .revision();
    c.compact(rev - 15, None).await.expect("compact");
    for i in 0..20 {
        c.put(format!("late{i:02}"), "x".repeat(i * 300), None)
            .await
            .expect("put");
    }
    c.put("leased", "1", Some(PutOptions::new().with_lease(lease)))
        .await
        .expect("leased put");
    c.delete("k119", None).await.expect("a last delete");
    c.user_add("root", "rootpw", None).await.expect("user add");
    c.user_grant_role("root", "root").await.expect("grant root");
    c.role_add("app").await.expect("role add");
    c.role_grant_permission(
        "app",
        etcd_client::Permission::read_write("app/").with_prefix(),
    )
    .await
    .expect("grant permission");
    c.user_add("alice", "secret", None).await.expect("user add");
    c.user_grant_role("alice", "app").await.expect("grant app");
    lease
}

/// What two servers holding the same data agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// Every key: key, value, create and mod revision, version, lease.
    pub keys: Vec<String>,
    /// The revision.
    pub rev: i64,
    /// HashKV at that revision.
    pub hash: u32,
    /// Users with their roles, and the roles' permissions.
    pub auth: Vec<String>,
}

/// The [`State`] `c` sees.
pub async fn state(c: &mut Client) -> State {
    let all = c
        .get("", Some(GetOptions::new().with_from_key()))
        .await
        .expect("get all");
    let rev = all.header().expect("header").revision();
    let keys = all
        .kvs()
        .iter()
        .map(|kv| {
            format!(
                "{:?}={:?} c{} m{} v{} l{}",
                kv.key_str().unwrap_or_default(),
                kv.value_str().unwrap_or_default(),
                kv.create_revision(),
                kv.mod_revision(),
                kv.version(),
                kv.lease()
            )
        })
        .collect();
    let hash = c.hash_kv(rev).await.expect("hashkv").hash();
    let mut auth = Vec::new();
    for user in c.user_list().await.expect("user list").users() {
        let roles = c.user_get(user.as_str()).await.expect("user get");
        auth.push(format!("user {user}: {:?}", roles.roles()));
    }
    for role in c.role_list().await.expect("role list").roles() {
        let perms = c.role_get(role.as_str()).await.expect("role get");
        let perms: Vec<String> = perms
            .permissions()
            .iter()
            .map(|p| format!("{:?} {:?} {:?}", p.get_type(), p.key(), p.range_end()))
            .collect();
        auth.push(format!("role {role}: {perms:?}"));
    }
    State {
        keys,
        rev,
        hash,
        auth,
    }
}

/// The remaining TTL of `lease` (-1: not found).
pub async fn lease_ttl(c: &mut Client, lease: i64) -> i64 {
    c.lease_time_to_live(lease, None)
        .await
        .expect("lease ttl")
        .ttl()
}
