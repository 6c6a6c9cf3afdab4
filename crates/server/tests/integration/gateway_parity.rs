//! One scripted curl session against etcd's JSON gateway on a real etcd
//! (`oxcd_testkit::reference`) and on oxcd: every unary path of KV, Lease (and its
//! `/v3/kv/lease/...` aliases), Cluster, Maintenance, Auth, Lock and Election, `/v3beta/`,
//! the streams (Watch, LeaseKeepAlive, Observe), and the errors (unknown paths, wrong
//! methods, OPTIONS, a body cut short, an oversized request, a request refused by the
//! server, auth without and with a token). Every answer's status, content type and body
//! must be the same byte for byte, but for the values that name a member, a cluster, a
//! lease, a term, a token, a version or a size (masked). Where the text of a body that
//! cannot be read comes from Go's JSON library, only the status and code are compared.

use std::process::Stdio;
use std::time::Duration;

use crate::common::InProc;
use crate::common::etcd::{assert_same_answers, start_etcd};

/// JSON fields whose values differ between two clusters doing the same things.
const MASKED: [&str; 15] = [
    "cluster_id",
    "lease",
    "member_id",
    "raft_term",
    "ID",
    "leader",
    "token",
    "version",
    "dbSize",
    "dbSizeInUse",
    "raftIndex",
    "raftAppliedIndex",
    "raftTerm",
    "peerURLs",
    "clientURLs",
];

/// `text` with the value of every `"<field>":` in [`MASKED`] replaced by `*`.
fn mask(text: &str) -> String {
    let mut out = text.to_string();
    for field in MASKED {
        let marker = format!("\"{field}\":");
        let mut masked = String::new();
        let mut rest = out.as_str();
        while let Some(at) = rest.find(&marker) {
            let (head, tail) = rest.split_at(at + marker.len());
            masked.push_str(head);
            masked.push('*');
            let end = match tail.as_bytes().first() {
                Some(b'"') => tail[1..].find('"').map(|i| i + 2),
                Some(b'[') => tail.find(']').map(|i| i + 1),
                _ => tail.find([',', '}']),
            }
            .unwrap_or(tail.len());
            rest = &tail[end..];
        }
        masked.push_str(rest);
        out = masked;
    }
    out
}

/// The lease id in a grant's answer.
fn lease_id(answer: &str) -> String {
    let at = answer.find("\"ID\":\"").expect("a lease id") + 6;
    answer[at..]
        .split('"')
        .next()
        .expect("a lease id")
        .to_string()
}

/// The token in an Authenticate answer.
fn token(answer: &str) -> String {
    let at = answer.find("\"token\":\"").expect("a token") + 9;
    answer[at..].split('"').next().expect("a token").to_string()
}

struct Session {
    base: String,
    out: Vec<String>,
    /// The token sent as `Authorization`, once logged in.
    token: Option<String>,
    /// Texts masked in answers (keys made of lease ids), with their masks.
    masks: Vec<(String, &'static str)>,
}

/// What curl got: the status line's code, the content type and the body.
struct Answer {
    status: String,
    content_type: String,
    grpc_header: bool,
    body: String,
}

impl Session {
    fn new(base: String) -> Session {
        Session {
            base,
            out: Vec::new(),
            token: None,
            masks: Vec::new(),
        }
    }

    async fn curl(&self, method: &str, path: &str, body: Option<&str>, max_secs: u32) -> Answer {
        let mut cmd = tokio::process::Command::new("curl");
        cmd.args(["-s", "-i", "-N", "-X", method, "--max-time"])
            .arg(max_secs.to_string())
            .arg(format!("{}{path}", self.base));
        if let Some(b) = body {
            cmd.args(["--data-binary", b]);
        }
        if let Some(t) = &self.token {
            cmd.args(["-H", &format!("Authorization: {t}")]);
        }
        let out = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .output()
            .await
            .expect("curl (apt-get install -y curl)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // Past a `100 Continue`, the answer's own head.
        let text = match text.strip_prefix("HTTP/1.1 100 Continue\r\n\r\n") {
            Some(rest) => rest.to_string(),
            None => text,
        };
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .unwrap_or("none")
            .to_string();
        let mut content_type = String::new();
        let mut grpc_header = false;
        for l in lines {
            let (name, value) = l.split_once(':').unwrap_or((l, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-type" => content_type = value.trim().to_string(),
                "grpc-metadata-content-type" => grpc_header = true,
                _ => {}
            }
        }
        Answer {
            status,
            content_type,
            grpc_header,
            body: body.to_string(),
        }
    }

    /// POSTs `body` to `path` and records the answer (masked); the raw body.
    async fn post(&mut self, step: &str, path: &str, body: &str) -> String {
        self.call(step, "POST", path, Some(body), 5).await
    }

    async fn call(
        &mut self,
        step: &str,
        method: &str,
        path: &str,
        body: Option<&str>,
        max_secs: u32,
    ) -> String {
        let a = self.curl(method, path, body, max_secs).await;
        let mut body = mask(&a.body);
        for (text, as_) in &self.masks {
            body = body.replace(text.as_str(), as_);
        }
        self.out.push(format!(
            "{step}: {} {} grpc-header {} {body}",
            a.status, a.content_type, a.grpc_header,
        ));
        a.body
    }

    /// Masks `text` as `as_` in the last answer and every one after.
    fn mask_from_now(&mut self, as_: &'static str, text: &str) {
        if let Some(last) = self.out.last_mut() {
            *last = last.replace(text, as_);
        }
        self.masks.push((text.to_string(), as_));
    }

    /// As [`Session::post`], comparing only the status and the error code.
    async fn post_shape(&mut self, step: &str, path: &str, body: &str) {
        let a = self.curl("POST", path, Some(body), 5).await;
        let code = a.body.split(',').next().unwrap_or("").to_string();
        self.out
            .push(format!("{step}: {} {} {code}", a.status, a.content_type));
    }
}

/// The session; the answers in order.
async fn session(base: String) -> Vec<String> {
    let mut s = Session::new(base);
    // KV.
    s.post("put", "/v3/kv/put", r#"{"key":"Zm9v","value":"YmFy"}"#)
        .await;
    s.post(
        "put prev",
        "/v3/kv/put",
        r#"{"key":"Zm9v","value":"YmF6","prev_kv":true}"#,
    )
    .await;
    s.post(
        "put camel",
        "/v3beta/kv/put",
        r#"{"key":"Zm9vMg==","value":"eA==","prevKv":true}"#,
    )
    .await;
    s.post("range", "/v3/kv/range", r#"{"key":"Zm9v"}"#).await;
    s.post(
        "range all",
        "/v3/kv/range",
        r#"{"key":"AA==","range_end":"AA==","sort_order":"DESCEND","sort_target":"MOD","limit":"1"}"#,
    )
    .await;
    s.post(
        "range count",
        "/v3/kv/range",
        r#"{"key":"AA==","range_end":"AA==","count_only":true,"bogus":[1,{"x":2}]}"#,
    )
    .await;
    s.post(
        "range numbers",
        "/v3/kv/range",
        r#"{"key":"Zm9v","revision":2,"sort_order":1}"#,
    )
    .await;
    s.post("range empty key", "/v3/kv/range", r#"{"key":""}"#)
        .await;
    s.post(
        "range future",
        "/v3/kv/range",
        r#"{"key":"Zm9v","revision":"100"}"#,
    )
    .await;
    s.post(
        "txn",
        "/v3/kv/txn",
        r#"{"compare":[{"key":"Zm9v","result":"EQUAL","target":"VALUE","value":"YmF6"}],"success":[{"request_range":{"key":"Zm9v"}},{"request_put":{"key":"Zm9v","value":"cXV4"}}],"failure":[{"request_delete_range":{"key":"Zm9v"}}]}"#,
    )
    .await;
    s.post(
        "txn fails",
        "/v3/kv/txn",
        r#"{"compare":[{"key":"Zm9v","target":"VERSION","result":"GREATER","version":"10"}],"failure":[{"request_range":{"key":"Zm9v","keys_only":true}}]}"#,
    )
    .await;
    s.post(
        "delete",
        "/v3/kv/deleterange",
        r#"{"key":"Zm9vMg==","prev_kv":true}"#,
    )
    .await;
    s.post(
        "compact",
        "/v3/kv/compaction",
        r#"{"revision":"3","physical":true}"#,
    )
    .await;
    s.post(
        "compacted",
        "/v3/kv/range",
        r#"{"key":"Zm9v","revision":"2"}"#,
    )
    .await;
    // Leases.
    let grant = s.post("grant", "/v3/lease/grant", r#"{"TTL":"60"}"#).await;
    let id = lease_id(&grant);
    s.post(
        "put lease",
        "/v3/kv/put",
        &format!(r#"{{"key":"bGs=","value":"dg==","lease":"{id}"}}"#),
    )
    .await;
    s.post(
        "ttl",
        "/v3/lease/timetolive",
        &format!(r#"{{"ID":"{id}","keys":true}}"#),
    )
    .await;
    s.post(
        "ttl alias",
        "/v3/kv/lease/timetolive",
        &format!(r#"{{"ID":{id}}}"#),
    )
    .await;
    s.post("leases", "/v3/lease/leases", "{}").await;
    s.post("leases alias", "/v3/kv/lease/leases", "").await;
    s.call(
        "keepalive",
        "POST",
        "/v3/lease/keepalive",
        Some(&format!(r#"{{"ID":"{id}"}}{{"ID":"{id}"}}"#)),
        5,
    )
    .await;
    s.call(
        "keepalive unknown",
        "POST",
        "/v3/lease/keepalive",
        Some(r#"{"ID":"7"}"#),
        5,
    )
    .await;
    s.post("ttl unknown", "/v3/lease/timetolive", r#"{"ID":"7"}"#)
        .await;
    s.post(
        "revoke",
        "/v3/kv/lease/revoke",
        &format!(r#"{{"ID":"{id}"}}"#),
    )
    .await;
    s.post(
        "revoke again",
        "/v3/lease/revoke",
        &format!(r#"{{"ID":"{id}"}}"#),
    )
    .await;
    s.post(
        "grant too long",
        "/v3/lease/grant",
        r#"{"TTL":"9000000001"}"#,
    )
    .await;
    // Watch: history from revision 2 (two responses whatever the timing), then nothing
    // until curl gives up.
    s.call(
        "watch",
        "POST",
        "/v3/watch",
        Some(r#"{"create_request":{"key":"Zm9v","start_revision":"4","prev_kv":true}}"#),
        1,
    )
    .await;
    s.call(
        "watch compacted",
        "POST",
        "/v3/watch",
        Some(r#"{"create_request":{"key":"Zm9v","start_revision":"2"}}"#),
        1,
    )
    .await;
    s.call(
        "watch cancel",
        "POST",
        "/v3/watch",
        Some(r#"{"create_request":{"key":"Zm9v"}} {"cancel_request":{"watch_id":"0"}} {"progress_request":{}}"#),
        1,
    )
    .await;
    // Lock and election.
    let grant = s
        .post("grant 2", "/v3/lease/grant", r#"{"TTL":"60"}"#)
        .await;
    let id = lease_id(&grant);
    let locked = s
        .post(
            "lock",
            "/v3/lock/lock",
            &format!(r#"{{"name":"bXk=","lease":"{id}"}}"#),
        )
        .await;
    let key = locked
        .split("\"key\":\"")
        .nth(1)
        .and_then(|k| k.split('"').next())
        .unwrap_or("")
        .to_string();
    s.mask_from_now("<lock key>", &key);
    s.post(
        "unlock",
        "/v3/lock/unlock",
        &format!(r#"{{"key":"{key}"}}"#),
    )
    .await;
    let campaign = s
        .post(
            "campaign",
            "/v3/election/campaign",
            &format!(r#"{{"name":"ZWw=","lease":"{id}","value":"YQ=="}}"#),
        )
        .await;
    let key = campaign
        .split("\"key\":\"")
        .nth(1)
        .and_then(|k| k.split('"').next())
        .unwrap_or("")
        .to_string();
    s.mask_from_now("<election key>", &key);
    let leader = campaign
        .split("\"leader\":")
        .nth(1)
        .and_then(|l| l.split('}').next())
        .map(|l| format!("{l}}}"))
        .unwrap_or_default();
    s.post(
        "proclaim",
        "/v3/election/proclaim",
        &format!(r#"{{"leader":{leader},"value":"Yg=="}}"#),
    )
    .await;
    s.post("leader", "/v3/election/leader", r#"{"name":"ZWw="}"#)
        .await;
    s.call(
        "observe",
        "POST",
        "/v3/election/observe",
        Some(r#"{"name":"ZWw="}"#),
        1,
    )
    .await;
    s.post(
        "resign",
        "/v3/election/resign",
        &format!(r#"{{"leader":{leader}}}"#),
    )
    .await;
    s.post("no leader", "/v3/election/leader", r#"{"name":"ZWw="}"#)
        .await;
    // Cluster and maintenance.
    s.post("members", "/v3/cluster/member/list", "{}").await;
    s.post(
        "member remove unknown",
        "/v3/cluster/member/remove",
        r#"{"ID":"1"}"#,
    )
    .await;
    s.post("status", "/v3/maintenance/status", "").await;
    // The fields etcd 3.6 adds, which 3.5 (the reference run here) has not (versions.rs
    // checks them).
    s.mask_from_now(
        "",
        r#", "storageVersion":"3.6.0", "dbSizeQuota":"2147483648", "downgradeInfo":{}"#,
    );
    s.post("alarms", "/v3/maintenance/alarm", r#"{"action":"GET"}"#)
        .await;
    s.post("hashkv", "/v3/maintenance/hashkv", r#"{"revision":"100"}"#)
        .await;
    s.post(
        "transfer to self",
        "/v3/maintenance/transfer-leadership",
        r#"{"targetID":"1"}"#,
    )
    .await;
    // Errors of HTTP and of reading the body.
    s.call("unknown path", "POST", "/v3/kv/nothing", Some("{}"), 5)
        .await;
    s.call("wrong method", "GET", "/v3/kv/range", None, 5).await;
    s.call("outside the gateway", "GET", "/nothing", None, 5)
        .await;
    s.call("options", "OPTIONS", "/v3/kv/range", None, 5).await;
    s.post("cut short", "/v3/kv/range", r#"{"key":"Zm9v","#)
        .await;
    s.post_shape("wrong type", "/v3/kv/range", r#"{"key":1}"#)
        .await;
    s.post_shape("not json", "/v3/kv/range", "nope").await;
    s.post_shape("bad base64", "/v3/kv/range", r#"{"key":"%%%"}"#)
        .await;
    let big = format!(
        r#"{{"key":"Zm9v","value":"{}"}}"#,
        "A".repeat(4 * 1024 * 1024)
    );
    let path = std::env::temp_dir().join(format!("oxcd-gw-big-{}", std::process::id()));
    std::fs::write(&path, big).expect("write the big body");
    s.post("too large", "/v3/kv/put", &format!("@{}", path.display()))
        .await;
    let _ = std::fs::remove_file(&path);
    // Auth: on, a call without a token, a login, calls with its token, off.
    s.post(
        "user add",
        "/v3/auth/user/add",
        r#"{"name":"root","password":"pw"}"#,
    )
    .await;
    s.post(
        "user add 2",
        "/v3/auth/user/add",
        r#"{"name":"u","password":"pw"}"#,
    )
    .await;
    s.post("role add", "/v3/auth/role/add", r#"{"name":"root"}"#)
        .await;
    s.post("role add 2", "/v3/auth/role/add", r#"{"name":"r"}"#)
        .await;
    s.post(
        "role grant",
        "/v3/auth/role/grant",
        r#"{"name":"r","perm":{"permType":"READWRITE","key":"YQ==","range_end":"Yg=="}}"#,
    )
    .await;
    s.post("role get", "/v3/auth/role/get", r#"{"role":"r"}"#)
        .await;
    s.post("role list", "/v3/auth/role/list", "{}").await;
    s.post(
        "role revoke",
        "/v3/auth/role/revoke",
        r#"{"role":"r","key":"YQ==","range_end":"Yg=="}"#,
    )
    .await;
    s.post(
        "user grant",
        "/v3/auth/user/grant",
        r#"{"user":"root","role":"root"}"#,
    )
    .await;
    s.post(
        "user grant 2",
        "/v3/auth/user/grant",
        r#"{"user":"u","role":"r"}"#,
    )
    .await;
    s.post(
        "user revoke",
        "/v3/auth/user/revoke",
        r#"{"name":"u","role":"r"}"#,
    )
    .await;
    s.post("user get", "/v3/auth/user/get", r#"{"name":"root"}"#)
        .await;
    s.post("user list", "/v3/auth/user/list", "{}").await;
    s.post(
        "user changepw",
        "/v3/auth/user/changepw",
        r#"{"name":"u","password":"pw2"}"#,
    )
    .await;
    s.post("enable", "/v3/auth/enable", "{}").await;
    s.post("no token", "/v3/kv/range", r#"{"key":"Zm9v"}"#)
        .await;
    s.post("status on", "/v3/auth/status", "{}").await;
    s.post(
        "wrong password",
        "/v3/auth/authenticate",
        r#"{"name":"root","password":"no"}"#,
    )
    .await;
    let login = s
        .post(
            "authenticate",
            "/v3/auth/authenticate",
            r#"{"name":"root","password":"pw"}"#,
        )
        .await;
    s.token = Some(token(&login));
    s.post("with token", "/v3/kv/range", r#"{"key":"Zm9v"}"#)
        .await;
    s.post("user delete", "/v3/auth/user/delete", r#"{"name":"u"}"#)
        .await;
    s.post("role delete", "/v3/auth/role/delete", r#"{"role":"r"}"#)
        .await;
    s.post("disable", "/v3/auth/disable", "{}").await;
    s.token = Some("bogus".into());
    s.post("bad token, auth off", "/v3/kv/range", r#"{"key":"Zm9v"}"#)
        .await;
    s.out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_sessions_get_the_same_json_from_oxcd_and_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(&dir.path().join("etcd"));
    let theirs = session(format!("http://{}", etcd.endpoint)).await;
    drop(etcd);
    let oxcd = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let ours = session(oxcd.endpoint()).await;
    oxcd.stop().await;
    for line in &ours {
        eprintln!("{line}");
    }
    assert_same_answers("gateway", &theirs, &ours);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_is_off_with_enable_grpc_gateway_false() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| s.enable_grpc_gateway = false).await;
    let s = Session::new(oxcd.endpoint());
    let a = s
        .curl("POST", "/v3/kv/range", Some(r#"{"key":"Zm9v"}"#), 5)
        .await;
    assert_eq!(a.status, "404", "{}", a.body);
    let health = s.curl("GET", "/health", None, 5).await;
    assert_eq!(health.status, "200", "{}", health.body);
    oxcd.stop().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
}
