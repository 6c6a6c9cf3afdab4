//! JWT auth tokens (`--auth-token jwt,...`) on real members: RS256, ES256 and HS256
//! tokens made by one member of three work on the others (no member records them); a
//! member given only the public key checks tokens and refuses Authenticate with etcd's
//! verify-only error; an auth change makes older tokens "revision of auth store is
//! old"; a token past its `ttl`, a forged one and a damaged one are "invalid auth token";
//! bad options and key files stop the binary at start with etcd's errors, creating
//! nothing.

use crate::common;

use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::three_tweaked;
use etcd_client::{Client, ConnectOptions};
use oxcd_api::etcdserverpb::auth_client::AuthClient;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::{
    AuthRoleAddRequest, AuthenticateRequest, PutRequest, RangeRequest, RangeResponse,
};
use oxcd_config::settings::Settings;
use tonic::{Code, Status};

/// A test key under `testdata/jwt`.
fn key(name: &str) -> String {
    format!("{}/../../testdata/jwt/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `--auth-token` for `method` with the given key files.
fn spec(method: &str, private: Option<&str>, public: Option<&str>, ttl: &str) -> String {
    let mut s = format!("jwt,sign-method={method},ttl={ttl}");
    if let Some(p) = private {
        s.push_str(&format!(",priv-key={}", key(p)));
    }
    if let Some(p) = public {
        s.push_str(&format!(",pub-key={}", key(p)));
    }
    s
}

fn with_token<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.metadata_mut()
        .insert("token", token.parse().expect("ascii token"));
    req
}

async fn authenticate(m: &InProc, name: &str, password: &str) -> Result<String, Status> {
    let req = AuthenticateRequest {
        name: name.into(),
        password: password.into(),
    };
    Ok(AuthClient::new(m.channel())
        .authenticate(req)
        .await?
        .into_inner()
        .token)
}

async fn put(m: &InProc, token: &str, key: &str) -> Result<(), Status> {
    let req = PutRequest {
        key: key.into(),
        value: b"v".to_vec(),
        ..Default::default()
    };
    KvClient::new(m.channel())
        .put(with_token(req, token))
        .await?;
    Ok(())
}

async fn get(m: &InProc, token: &str, key: &str) -> Result<RangeResponse, Status> {
    let req = RangeRequest {
        key: key.into(),
        ..Default::default()
    };
    Ok(KvClient::new(m.channel())
        .range(with_token(req, token))
        .await?
        .into_inner())
}

fn is(e: Status, code: Code, message: &str) {
    assert_eq!((e.code(), e.message()), (code, message), "{e:?}");
}

const INVALID_TOKEN: &str = "etcdserver: invalid auth token";
const OLD_REVISION: &str = "etcdserver: revision of auth store is old";

/// Through `m` (auth off): root with the root role, alice with read-write on `dir/`,
/// auth on.
async fn set_up_auth(m: &InProc) {
    let mut admin = m.client().await;
    common::root_and_alice(&mut admin, "dir").await;
}

/// Each member's `--auth-token` for a cluster using `method`: the third member gets only
/// the public key when there is one (verify-only).
fn tweak(
    method: &'static str,
    private: &'static str,
    public: Option<&'static str>,
) -> impl Fn(&mut Settings) + Clone {
    move |s: &mut Settings| {
        s.bcrypt_cost = 4;
        let verify_only = public.is_some() && s.data_dir.ends_with("m2");
        s.auth_token = if verify_only {
            spec(method, None, public, "5m")
        } else {
            spec(method, Some(private), public, "5m")
        };
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_made_by_one_member_work_on_every_member() {
    let cases = [
        ("RS256", "rs-priv.pem", Some("rs-pub.pem")),
        ("ES256", "es256-priv.pem", Some("es256-pub.pem")),
        ("HS256", "hs.key", None),
    ];
    for (method, private, public) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let (m, _) = three_tweaked(dir.path(), tweak(method, private, public)).await;
        set_up_auth(&m[0]).await;

        let token = authenticate(&m[0], "alice", "secret").await.expect("login");
        let header = token.split('.').next().expect("header");
        let header =
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, header)
                .expect("base64");
        assert_eq!(
            String::from_utf8_lossy(&header),
            format!(r#"{{"alg":"{method}","typ":"JWT"}}"#)
        );
        put(&m[1], &token, "dir/a")
            .await
            .expect("put on another member");
        let got = get(&m[2], &token, "dir/a").await.expect("read on a third");
        assert_eq!(got.kvs.len(), 1, "{method}");
        let e = put(&m[1], &token, "x")
            .await
            .expect_err("outside the grant");
        is(e, Code::PermissionDenied, "etcdserver: permission denied");
        let e = authenticate(&m[0], "alice", "wrong")
            .await
            .expect_err("password");
        is(
            e,
            Code::InvalidArgument,
            "etcdserver: authentication failed, invalid user ID or password",
        );

        // The verify-only member checks tokens but makes none.
        let third = authenticate(&m[2], "alice", "secret").await;
        if public.is_some() {
            is(
                third.expect_err("verify-only"),
                Code::Unknown,
                "auth: token signing attempted with verify-only key",
            );
        } else {
            let t = third.expect("every member signs HS256");
            get(&m[0], &t, "dir/a")
                .await
                .expect("its token works elsewhere");
        }

        // An auth change: tokens made before it are old everywhere, new ones work.
        let root = authenticate(&m[1], "root", "rootpw").await.expect("root");
        let req = AuthRoleAddRequest {
            name: "other".into(),
        };
        AuthClient::new(m[1].channel())
            .role_add(with_token(req, &root))
            .await
            .expect("role add");
        for member in &m {
            is(
                put(member, &token, "dir/b").await.expect_err("old token"),
                Code::InvalidArgument,
                OLD_REVISION,
            );
            is(
                get(member, &token, "dir/a").await.expect_err("old token"),
                Code::InvalidArgument,
                OLD_REVISION,
            );
        }
        let fresh = authenticate(&m[1], "alice", "secret").await.expect("login");
        put(&m[0], &fresh, "dir/b").await.expect("a fresh token");
        get(&m[2], &fresh, "dir/b").await.expect("a fresh token");

        // A third-party client logs in and uses its token as any etcd client does.
        let opts = ConnectOptions::new().with_user("alice", "secret");
        let mut client = Client::connect([m[1].endpoint()], Some(opts))
            .await
            .expect("etcd-client logs in");
        client
            .put("dir/c", "1", None)
            .await
            .expect("etcd-client put");
        let got = client.get("dir/c", None).await.expect("etcd-client get");
        assert_eq!(got.kvs().len(), 1);
        for member in m {
            member.stop().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwt_expires_at_its_ttl_and_forged_ones_never_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.bcrypt_cost = 4;
        // Long enough that a slow login still leaves the fresh token seconds to live.
        s.auth_token = spec("RS256", Some("rs-priv.pem"), None, "5s");
    })
    .await;
    set_up_auth(&m).await;
    let made = Instant::now();
    let token = authenticate(&m, "alice", "secret").await.expect("login");
    get(&m, &token, "dir/a").await.expect("a fresh token");

    // Signed with another key, with the claims of a good token.
    let (other, _) = oxcd_auth::jwt::JwtTokens::from_options(
        &[
            ("sign-method".to_string(), "RS256".to_string()),
            ("priv-key".to_string(), key("rs-other.pem")),
        ]
        .into_iter()
        .collect(),
    )
    .expect("another key");
    let forged = other
        .sign("root", 100, std::time::SystemTime::now())
        .expect("signed");
    // A good token's claims changed to root's.
    let parts: Vec<&str> = token.split('.').collect();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let claims = base64::Engine::decode(&b64, parts[1]).expect("claims");
    let claims = String::from_utf8_lossy(&claims).replace("alice", "root");
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        base64::Engine::encode(&b64, claims),
        parts[2]
    );
    let unsigned = format!("{}.{}.", parts[0], parts[1]);
    for bad in [
        forged.as_str(),
        &tampered,
        &unsigned,
        "abcdefghijklmnop.12",
        "x",
    ] {
        is(
            get(&m, bad, "dir/a").await.expect_err("forged"),
            Code::Unauthenticated,
            INVALID_TOKEN,
        );
        is(
            put(&m, bad, "dir/a").await.expect_err("forged"),
            Code::Unauthenticated,
            INVALID_TOKEN,
        );
    }

    // exp is the whole second 5 s after it was made: 6 s later it has passed.
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(made.elapsed())).await;
    is(
        get(&m, &token, "dir/a").await.expect_err("expired"),
        Code::Unauthenticated,
        INVALID_TOKEN,
    );
    let fresh = authenticate(&m, "alice", "secret").await.expect("login");
    get(&m, &fresh, "dir/a").await.expect("a new token");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_jwt_options_stop_the_member_at_start_with_etcds_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases = [
        (
            "jwt,sign-method=RS256,priv-key=/nonexistent/k.pem".to_string(),
            "auth: invalid auth options",
        ),
        (
            format!("jwt,sign-method=RS256,priv-key={}", key("hs.key")),
            "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key",
        ),
        (
            format!("jwt,sign-method=ES256,priv-key={}", key("rs-priv.pem")),
            "key is not a valid ECDSA private key",
        ),
        (
            format!("jwt,sign-method=RS256,priv-key={},ttl", key("rs-priv.pem")),
            "auth: invalid auth options",
        ),
        (
            "jwt,sign-method=RS256".to_string(),
            "auth: missing key data",
        ),
        ("magic".to_string(), "auth: invalid auth options"),
    ];
    for (i, (token, want)) in cases.iter().enumerate() {
        let data = dir.path().join(format!("d{i}"));
        let out = common::oxcd_command()
            .arg("--data-dir")
            .arg(&data)
            .args(["--auth-token", token])
            .output()
            .expect("run oxcd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{token}: {stderr}");
        assert!(stderr.contains(want), "{token}: {stderr}");
        assert!(!data.exists(), "{token}: nothing is created");
        // A member started in-process with the same settings refuses too.
        let e = InProc::try_start(dir.path().join(format!("p{i}")), |s| {
            s.auth_token = token.clone();
        })
        .await
        .err()
        .expect("refused");
        assert!(e.contains(want), "{token}: {e}");
    }
}
