//! Auth across three members, through the third-party `etcd-client` crate: users, roles
//! and auth enabled through one member reach a member that was away, by snapshot; a
//! token made by one member works on the others; a user with read-write on `dir/`
//! writes there and is refused elsewhere, nested txns included (etcd 3.5 does not check
//! those); every member restarts with the auth state kept; the members' state hashes,
//! which cover the auth tables, agree before and after.

use crate::common;

use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::OneAway;
use etcd_client::{Client, ConnectOptions, Txn, TxnOp};
use oxcd_api::etcdserverpb::auth_client::AuthClient;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::{AuthenticateRequest, RangeRequest};

async fn as_user(m: &InProc, name: &str, password: &str) -> Client {
    let opts = ConnectOptions::new().with_user(name, password);
    Client::connect([m.endpoint()], Some(opts))
        .await
        .expect("connect and authenticate")
}

fn denied(e: etcd_client::Error) -> bool {
    e.to_string().contains("etcdserver: permission denied")
}

/// Each member's state hash, asked as root.
async fn state_hashes(members: &[InProc]) -> Vec<u32> {
    let root = ConnectOptions::new().with_user("root", "rootpw");
    common::cluster::state_hashes(members, Some(root)).await
}

/// What alice may and may not do on `m`.
async fn alice_is_held_to_her_grant(m: &InProc) {
    let mut alice = as_user(m, "alice", "secret").await;
    alice.put("dir/a", "1", None).await.expect("put under dir/");
    let got = alice.get("dir/a", None).await.expect("read under dir/");
    assert_eq!(got.kvs().len(), 1);
    let e = alice
        .put("x", "1", None)
        .await
        .expect_err("put outside dir/");
    assert!(denied(e), "a put outside the grant");
    let e = alice.get("x", None).await.expect_err("read outside dir/");
    assert!(denied(e), "a read outside the grant");
    let nested = Txn::new().and_then([TxnOp::txn(
        Txn::new().and_then([TxnOp::put("x", "sneaked", None)]),
    )]);
    let e = alice
        .txn(nested)
        .await
        .expect_err("a nested txn writing outside dir/");
    assert!(denied(e), "nested txns are checked too");
    let e = alice.user_list().await.expect_err("alice is no admin");
    assert!(denied(e));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_reaches_every_member_survives_restarts_and_holds_users_to_their_grants() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = OneAway::start(dir.path()).await;
    let members = &cluster.members;
    let mut admin = members[0].client().await;
    common::root_and_alice(&mut admin, "reader").await;
    let e = admin.put("x", "1", None).await.expect_err("no token");
    assert!(
        e.to_string().contains("etcdserver: user name is empty"),
        "{e}"
    );
    let mut root = as_user(&members[0], "root", "rootpw").await;
    for i in 0..100 {
        root.put(format!("filler{i}"), "x", None)
            .await
            .expect("put");
    }

    // Back after the log it missed was compacted: the auth state comes by snapshot.
    cluster.bring_back().await;
    let members = &cluster.members;
    let back = members.len() - 1;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut root_back = loop {
        let opts = ConnectOptions::new().with_user("root", "rootpw");
        if let Ok(c) = Client::connect([members[back].endpoint()], Some(opts)).await {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the auth state never reached the member"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Authenticating works only once auth is on there; and alice is known with her role.
    let alice = root_back.user_get("alice").await.expect("alice is known");
    assert_eq!(alice.roles(), ["reader"]);

    // A token made by one member is good on the others.
    let token = AuthClient::new(members[0].channel())
        .authenticate(AuthenticateRequest {
            name: "alice".into(),
            password: "secret".into(),
        })
        .await
        .expect("authenticate")
        .into_inner()
        .token;
    for m in &members[1..] {
        let mut req = tonic::Request::new(RangeRequest {
            key: b"dir/".to_vec(),
            range_end: b"dir0".to_vec(),
            ..Default::default()
        });
        req.metadata_mut()
            .insert("token", token.parse().expect("ascii"));
        KvClient::new(m.channel())
            .range(req)
            .await
            .expect("another member knows the token");
    }
    for m in members {
        alice_is_held_to_her_grant(m).await;
    }
    let hashes = state_hashes(members).await;
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");

    // Every member restarts: users, roles, grants and the flag are still there.
    let members = cluster.restart_all().await;
    for m in &members {
        alice_is_held_to_her_grant(m).await;
    }
    let after = state_hashes(&members).await;
    assert!(after.windows(2).all(|w| w[0] == w[1]), "{after:?}");
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_unused_for_its_ttl_expires_and_a_used_one_lives_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.auth_token_ttl = Duration::from_secs(3);
        s.bcrypt_cost = 4;
    })
    .await;
    let mut admin = m.client().await;
    admin.user_add("root", "rootpw", None).await.expect("root");
    admin.user_grant_role("root", "root").await.expect("grant");
    admin.auth_enable().await.expect("enable");
    let login = || async {
        AuthClient::new(m.channel())
            .authenticate(AuthenticateRequest {
                name: "root".into(),
                password: "rootpw".into(),
            })
            .await
            .expect("authenticate")
            .into_inner()
            .token
    };
    let get = |token: String| {
        let channel = m.channel();
        async move {
            let mut req = tonic::Request::new(RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            });
            req.metadata_mut()
                .insert("token", token.parse().expect("ascii"));
            KvClient::new(channel).range(req).await
        }
    };
    let (idle, used) = (login().await, login().await);
    // The used token is used every half second, past its TTL (a use would have to
    // take 2.5 s to let it lapse); the idle one is not used for 4 s.
    for _ in 0..8 {
        get(used.clone()).await.expect("a token in use stays valid");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let e = get(idle).await.expect_err("an idle token expires");
    assert_eq!(e.code(), tonic::Code::Unauthenticated);
    assert_eq!(e.message(), "etcdserver: invalid auth token");
    m.stop().await;
}

/// Logs `name` in on `m`: the token, or etcd's error text.
async fn login(m: &InProc, name: &str, password: &str) -> Result<String, String> {
    AuthClient::new(m.channel())
        .authenticate(AuthenticateRequest {
            name: name.into(),
            password: password.into(),
        })
        .await
        .map(|r| r.into_inner().token)
        .map_err(|e| e.message().to_string())
}

/// What logins answer as alice's password is used, mistyped, changed, and as she is
/// deleted and added again: the same with the password cache on (the default) and off
/// (`--auth-password-cache-ttl=0s`, etcd's behaviour).
async fn logins_through_password_changes(cache: Duration) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.bcrypt_cost = 4;
        s.auth_password_cache_ttl = cache;
    })
    .await;
    let mut admin = m.client().await;
    common::root_and_alice(&mut admin, "dir-rw").await;
    let mut root = as_user(&m, "root", "rootpw").await;
    let mut seen = Vec::new();
    let mut note = |what: &str, r: Result<String, String>| {
        seen.push(format!(
            "{what}: {}",
            r.map(|_| "token".to_string()).unwrap_or_else(|e| e)
        ));
    };
    note("first", login(&m, "alice", "secret").await);
    note("again", login(&m, "alice", "secret").await);
    note("mistyped", login(&m, "alice", "secreT").await);
    note("empty", login(&m, "alice", "").await);
    root.user_change_password("alice", "secret2")
        .await
        .expect("change");
    note("old after change", login(&m, "alice", "secret").await);
    note("new after change", login(&m, "alice", "secret2").await);
    note("new again", login(&m, "alice", "secret2").await);
    root.user_delete("alice").await.expect("delete");
    note("deleted", login(&m, "alice", "secret2").await);
    root.user_add("alice", "secret", None)
        .await
        .expect("re-add");
    note(
        "re-added, old password",
        login(&m, "alice", "secret2").await,
    );
    note("re-added, its password", login(&m, "alice", "secret").await);
    m.stop().await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembered_passwords_give_way_to_wrong_changed_and_deleted_ones() {
    let cached = logins_through_password_changes(Duration::from_secs(300)).await;
    let failed = "etcdserver: authentication failed, invalid user ID or password";
    let expected = [
        "first: token".to_string(),
        "again: token".to_string(),
        format!("mistyped: {failed}"),
        format!("empty: {failed}"),
        format!("old after change: {failed}"),
        "new after change: token".to_string(),
        "new again: token".to_string(),
        format!("deleted: {failed}"),
        format!("re-added, old password: {failed}"),
        "re-added, its password: token".to_string(),
    ];
    assert_eq!(cached, expected);
    let uncached = logins_through_password_changes(Duration::ZERO).await;
    assert_eq!(uncached, cached, "the cache changes no answer");
}
