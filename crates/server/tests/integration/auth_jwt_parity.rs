//! JWT auth tokens against a real etcd 3.5 (`oxcd_testkit::reference`) started with the
//! same `--auth-token jwt,...` and key files: one scripted session over raw gRPC (users
//! and roles set up, Authenticate with a wrong and a right password, the token's header
//! and claims, reads and writes inside and outside the grant, the token the other server
//! made, forged and tampered tokens, old tokens after an auth change, a token past its
//! ttl, auth disabled), a session on verify-only servers (public key only), one with
//! an empty `--auth-token` (no tokens at all), and the start-up refusals for bad
//! options and key files. Every answer must be the same but for the ids and term in
//! headers and the tokens' times and signatures.

use crate::common;

use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::InProc;
use common::etcd::{Etcd, assert_same_answers, mask, start_etcd_with};
use oxcd_api::authpb::Permission;
use oxcd_api::authpb::permission::Type;
use oxcd_api::etcdserverpb::auth_client::AuthClient;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::*;
use oxcd_auth::jwt::JwtTokens;
use tonic::transport::Channel;

/// A test key under `testdata/jwt`.
fn key(name: &str) -> String {
    format!("{}/../../testdata/jwt/{name}", env!("CARGO_MANIFEST_DIR"))
}

use common::etcd::answer;

fn with<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Ok(v) = token.parse() {
        req.metadata_mut().insert("token", v);
    }
    req
}

/// A signer holding the private key the servers were given (or another one).
fn signer(method: &str, private: &str) -> JwtTokens {
    let opts = [
        ("sign-method".to_string(), method.to_string()),
        ("priv-key".to_string(), key(private)),
    ];
    JwtTokens::from_options(&opts.into_iter().collect())
        .expect("signer")
        .0
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn decode(part: &str) -> String {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

struct Session {
    auth: AuthClient<Channel>,
    kv: KvClient<Channel>,
    out: Vec<String>,
    /// The token of the last successful Authenticate.
    token: String,
}

impl Session {
    async fn open(endpoint: &str) -> Session {
        let channel = common::etcd::channel(endpoint).await;
        Session {
            auth: AuthClient::new(channel.clone()),
            kv: KvClient::new(channel),
            out: Vec::new(),
            token: String::new(),
        }
    }

    fn say(&mut self, step: &str, what: String) {
        self.out.push(format!("{step}: {what}"));
    }

    /// Authenticate; a token's header and claims are said with `exp` as its distance
    /// from now (the TTL), the signature left out.
    async fn authenticate(&mut self, step: &str, name: &str, password: &str) {
        let req = AuthenticateRequest {
            name: name.into(),
            password: password.into(),
        };
        let before = unix_now();
        let s = match self.auth.authenticate(req).await {
            Ok(r) => {
                let mut r = r.into_inner();
                mask(&mut r.header);
                let token = std::mem::take(&mut r.token);
                let parts: Vec<&str> = token.split('.').collect();
                assert_eq!(parts.len(), 3, "{token}");
                let claims = decode(parts[1]);
                let exp: i64 = claims
                    .strip_prefix(r#"{"exp":"#)
                    .and_then(|c| c.split(',').next())
                    .and_then(|e| e.parse().ok())
                    .unwrap_or(0);
                let ttl = exp - before;
                let claims = claims.replace(&exp.to_string(), "<exp>");
                let s = format!(
                    "{r:?} header {} claims {claims} exp-now {}",
                    decode(parts[0]),
                    if (2..=3).contains(&ttl) {
                        "ttl"
                    } else {
                        "other"
                    }
                );
                self.token = token;
                s
            }
            Err(s) => format!("error {:?}: {}", s.code(), s.message()),
        };
        self.say(step, s);
    }

    async fn put(&mut self, step: &str, token: &str, key: &str) {
        let req = PutRequest {
            key: key.into(),
            value: b"v".to_vec(),
            ..Default::default()
        };
        let s = answer!(self.kv.put(with(req, token)).await);
        self.say(step, s);
    }

    async fn get(&mut self, step: &str, token: &str, key: &str) {
        let req = RangeRequest {
            key: key.into(),
            ..Default::default()
        };
        let s = answer!(self.kv.range(with(req, token)).await);
        self.say(step, s);
    }

    async fn status(&mut self, step: &str, token: &str) -> u64 {
        let r = self
            .auth
            .auth_status(with(AuthStatusRequest {}, token))
            .await;
        let revision = r.as_ref().map_or(0, |r| r.get_ref().auth_revision);
        let s = answer!(r);
        self.say(step, s);
        revision
    }

    /// Root with the root role, alice with read-write on `dir/`, auth on.
    async fn set_up(&mut self) {
        for (name, password) in [("root", "rootpw"), ("alice", "secret")] {
            let req = AuthUserAddRequest {
                name: name.into(),
                password: password.into(),
                ..Default::default()
            };
            let s = answer!(self.auth.user_add(req).await);
            self.say(&format!("add {name}"), s);
        }
        for role in ["root", "dir"] {
            let s = answer!(
                self.auth
                    .role_add(AuthRoleAddRequest { name: role.into() })
                    .await
            );
            self.say(&format!("add role {role}"), s);
        }
        let req = AuthRoleGrantPermissionRequest {
            name: "dir".into(),
            perm: Some(Permission {
                perm_type: Type::Readwrite as i32,
                key: b"dir/".to_vec(),
                range_end: b"dir0".to_vec(),
            }),
        };
        let s = answer!(self.auth.role_grant_permission(req).await);
        self.say("grant dir/", s);
        for (user, role) in [("root", "root"), ("alice", "dir")] {
            let req = AuthUserGrantRoleRequest {
                user: user.into(),
                role: role.into(),
            };
            let s = answer!(self.auth.user_grant_role(req).await);
            self.say(&format!("grant {role} to {user}"), s);
        }
        let s = answer!(self.auth.auth_enable(AuthEnableRequest {}).await);
        self.say("enable", s);
    }

    /// Everything up to the token the other server is needed for; alice's token.
    async fn first_half(&mut self) -> String {
        self.set_up().await;
        self.authenticate("alice, wrong password", "alice", "nope")
            .await;
        self.authenticate("nobody", "nobody", "x").await;
        self.authenticate("alice", "alice", "secret").await;
        let alice = self.token.clone();
        self.put("put inside", &alice, "dir/a").await;
        self.get("get inside", &alice, "dir/a").await;
        self.put("put outside", &alice, "x").await;
        self.get("get outside", &alice, "x").await;
        self.status("alice asks the auth status", &alice).await;
        let req = AuthUserGetRequest {
            name: "alice".into(),
        };
        let s = answer!(self.auth.user_get(with(req, &alice)).await);
        self.say("alice reads herself", s);
        alice
    }

    /// The rest: `foreign` is alice's token made by the other server; the tokens expire
    /// `ttl` after they are made.
    async fn second_half(&mut self, alice: &str, foreign: &str, ttl: Duration) {
        self.get("the other server's token", foreign, "dir/a").await;
        self.put("the other server's token writes", foreign, "dir/b")
            .await;
        let other_key = signer("RS256", "rs-other.pem")
            .sign("root", 9, SystemTime::now())
            .expect("signed");
        self.get("root signed with another key", &other_key, "x")
            .await;
        let parts: Vec<&str> = alice.split('.').collect();
        let claims = decode(parts[1]).replace("alice", "root");
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims),
            parts[2]
        );
        self.get("alice's token made root's", &tampered, "x").await;
        let unsigned = format!("{}.{}.", parts[0], parts[1]);
        self.get("no signature", &unsigned, "dir/a").await;
        self.get("a simple token", "abcdefghijklmnop.12", "dir/a")
            .await;

        self.authenticate("root", "root", "rootpw").await;
        let root = self.token.clone();
        let req = AuthRoleAddRequest {
            name: "other".into(),
        };
        let s = answer!(self.auth.role_add(with(req, &root)).await);
        self.say("root adds a role", s);
        self.put("alice's old token writes", alice, "dir/c").await;
        self.get("alice's old token reads", alice, "dir/a").await;
        self.get("root's old token reads", &root, "dir/a").await;
        self.status("root's old token asks the status", &root).await;

        let made = Instant::now();
        self.authenticate("alice again", "alice", "secret").await;
        let fresh = self.token.clone();
        self.put("a fresh token writes", &fresh, "dir/c").await;
        self.get("a fresh token reads", &fresh, "dir/c").await;
        tokio::time::sleep((ttl + Duration::from_secs(1)).saturating_sub(made.elapsed())).await;
        self.get("an expired token reads", &fresh, "dir/c").await;
        self.put("an expired token writes", &fresh, "dir/c").await;
        self.status("an expired token asks the status", &fresh)
            .await;

        self.authenticate("root again", "root", "rootpw").await;
        let root = self.token.clone();
        let s = answer!(
            self.auth
                .auth_disable(with(AuthDisableRequest {}, &root))
                .await
        );
        self.say("disable", s);
        self.get("an expired token once auth is off", &fresh, "dir/c")
            .await;
        self.get("garbage once auth is off", "garbage", "dir/c")
            .await;
    }
}

/// The reference etcd, unless it is 3.4 (this compares with 3.5's JWT provider).
fn etcd_35() -> bool {
    let v = oxcd_testkit::reference::etcd_version();
    if v.starts_with("3.4") {
        eprintln!("JWT parity not run: it needs etcd 3.5 (OXCD_REFERENCE_ETCD)");
        return false;
    }
    true
}

fn start_etcd_jwt(dir: &std::path::Path, token: &str) -> Etcd {
    start_etcd_with(dir, "http", &["--auth-token".into(), token.into()], &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_session_answers_as_etcd_does() {
    if !etcd_35() {
        return;
    }
    let ttl = Duration::from_secs(2);
    let token = format!(
        "jwt,pub-key={},priv-key={},sign-method=RS256,ttl=2s",
        key("rs-pub.pem"),
        key("rs-priv.pem")
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd_jwt(&dir.path().join("etcd"), &token);
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| s.auth_token = token.clone()).await;
    let mut theirs = Session::open(&etcd.endpoint).await;
    let mut ours = Session::open(&oxcd.endpoint().replace("http://", "")).await;
    let (their_alice, our_alice) = (theirs.first_half().await, ours.first_half().await);
    // Each server takes the token the other made: the same key, the same auth revision.
    let (a, b) = tokio::join!(
        theirs.second_half(&their_alice, &our_alice, ttl),
        ours.second_half(&our_alice, &their_alice, ttl)
    );
    let ((), ()) = (a, b);
    assert_same_answers("JWT", &theirs.out, &ours.out);
    oxcd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_only_servers_answer_as_etcd_does() {
    if !etcd_35() {
        return;
    }
    let token = format!("jwt,pub-key={},sign-method=ES256", key("es256-pub.pem"));
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd_jwt(&dir.path().join("etcd"), &token);
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| s.auth_token = token.clone()).await;
    let signing = signer("ES256", "es256-priv.pem");
    let mut outs = Vec::new();
    for endpoint in [
        etcd.endpoint.clone(),
        oxcd.endpoint().replace("http://", ""),
    ] {
        let mut s = Session::open(&endpoint).await;
        s.set_up().await;
        s.authenticate("root", "root", "rootpw").await;
        s.authenticate("root, wrong password", "root", "nope").await;
        // Tokens made elsewhere with the private key: a far revision, then the store's.
        let far = signing
            .sign("root", 1000, SystemTime::now())
            .expect("signed");
        s.put("a token of a later revision writes", &far, "k").await;
        s.get("a token of a later revision reads", &far, "k").await;
        let revision = s
            .status("a token of a later revision asks the status", &far)
            .await;
        let now = signing
            .sign("root", revision, SystemTime::now())
            .expect("signed");
        s.get("a token of the store's revision reads", &now, "k")
            .await;
        let alice = signing
            .sign("alice", revision, SystemTime::now())
            .expect("signed");
        s.put("alice outside her grant", &alice, "k").await;
        s.put("alice inside", &alice, "dir/x").await;
        let old = signing
            .sign("root", revision.saturating_sub(1), SystemTime::now())
            .expect("signed");
        s.get("an older revision", &old, "k").await;
        let zero = signing.sign("root", 0, SystemTime::now()).expect("signed");
        s.put("revision 0", &zero, "k").await;
        let nobody = signing
            .sign("nobody", revision, SystemTime::now())
            .expect("signed");
        s.put("a user that does not exist", &nobody, "k").await;
        outs.push(s.out);
    }
    assert_same_answers("verify-only JWT", &outs[0], &outs[1]);
    oxcd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_auth_token_answers_as_etcd_does() {
    if !etcd_35() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd_jwt(&dir.path().join("etcd"), "");
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| s.auth_token = String::new()).await;
    let signed = signer("HS256", "hs.key")
        .sign("root", 8, SystemTime::now())
        .expect("signed");
    let mut outs = Vec::new();
    for endpoint in [
        etcd.endpoint.clone(),
        oxcd.endpoint().replace("http://", ""),
    ] {
        let mut s = Session::open(&endpoint).await;
        s.set_up().await;
        s.authenticate("root", "root", "rootpw").await;
        s.authenticate("root, wrong password", "root", "nope").await;
        s.get("a JWT", &signed, "k").await;
        s.get("a simple token", "abcdefghijklmnop.12", "k").await;
        s.put("no token", "", "k").await;
        outs.push(s.out);
    }
    assert_same_answers("no-token-provider", &outs[0], &outs[1]);
    oxcd.stop().await;
}

/// etcd's error when it refuses to start with `--auth-token token`, or None if it
/// started (it is then stopped).
fn etcd_start_error(dir: &std::path::Path, token: &str) -> Option<String> {
    let (mut cmd, _, _) = common::etcd::command(dir, "http");
    let mut child = cmd
        .args(["--auth-token", token])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start etcd");
    let stderr = child.stderr.take().expect("stderr");
    let mut error = None;
    for line in std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
    {
        if line.contains("ready to serve client requests") {
            break;
        }
        if line.contains(r#""msg":"failed to start etcd""#) {
            let v: serde_json::Value = serde_json::from_str(&line).expect("json log");
            error = v["error"].as_str().map(String::from);
        }
    }
    let _ = child.kill();
    let status = child.wait().expect("wait");
    if error.is_some() {
        assert_eq!(status.code(), Some(1), "etcd exits 1");
    }
    error
}

#[test]
fn bad_jwt_options_refused_at_start_as_etcd_refuses_them() {
    if !etcd_35() {
        return;
    }
    let k = key;
    let cases = [
        "jwt".to_string(),
        "jwt,sign-method=RS256".to_string(),
        format!("jwt,sign-method=FOO,priv-key={}", k("rs-priv.pem")),
        format!("jwt,sign-method=none,priv-key={}", k("rs-priv.pem")),
        format!("jwt,sign-method=EdDSA,priv-key={}", k("ed25519.pem")),
        format!("jwt,sign-method=RS256,priv-key={}", k("hs.key")),
        format!("jwt,sign-method=RS256,priv-key={}", k("es256-priv.pem")),
        format!("jwt,sign-method=RS256,priv-key={}", k("es256-other.pem")),
        format!("jwt,sign-method=PS256,pub-key={}", k("es256-pub.pem")),
        format!("jwt,sign-method=ES256,priv-key={}", k("rs-other.pem")),
        format!("jwt,sign-method=ES256,priv-key={}", k("rs-priv.pem")),
        format!("jwt,sign-method=ES384,pub-key={}", k("rs-cert.pem")),
        format!(
            "jwt,sign-method=ES256,priv-key={},pub-key={}",
            k("es256-priv.pem"),
            k("es384-pub.pem")
        ),
        format!("jwt,sign-method=HS256,pub-key={}", k("hs.key")),
        "jwt,sign-method=RS256,priv-key=/nonexistent/k.pem".to_string(),
        format!(
            "jwt,sign-method=RS256,priv-key={},pub-key=/nonexistent",
            k("rs-priv.pem")
        ),
        format!("jwt,sign-method=RS256,priv-key={},ttl=1x", k("rs-priv.pem")),
        format!("jwt,sign-method=RS256,priv-key={},ttl", k("rs-priv.pem")),
        format!(
            "jwt,sign-method=RS256,priv-key={},ttl=1s,ttl=2s",
            k("rs-priv.pem")
        ),
        "simple,bad".to_string(),
        "magic".to_string(),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    for (i, token) in cases.iter().enumerate() {
        let error = etcd_start_error(&dir.path().join(format!("etcd{i}")), token);
        theirs.push(format!("{token}: {error:?}"));
        let out = common::oxcd_command()
            .arg("--data-dir")
            .arg(dir.path().join(format!("oxcd{i}")))
            .args(["--auth-token", token])
            .output()
            .expect("run oxcd");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{token}: {stderr}");
        // oxcd prints etcd's error; after "invalid auth options", what etcd logs
        // about it, in parentheses.
        let first = stderr.lines().next().unwrap_or_default();
        let invalid = "auth: invalid auth options";
        let ours_error = match first.strip_prefix(invalid) {
            Some(rest) if rest.starts_with(" (") => invalid,
            _ => first,
        };
        ours.push(format!("{token}: {:?}", Some(ours_error)));
    }
    assert_same_answers("start-up refusal", &theirs, &ours);
}
