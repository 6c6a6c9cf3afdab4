//! Unit tests of JWT options, keys, signing and verification, with the test keys under
//! `testdata/jwt`.

use super::*;

use std::time::Duration;

/// A test key under `testdata/jwt` (made with openssl; test-only).
fn key(name: &str) -> String {
    format!("{}/../../testdata/jwt/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn tokens(pairs: &[(&str, &str)]) -> JwtTokens {
    match JwtTokens::from_options(&opts(pairs)) {
        Ok((t, _)) => t,
        Err(e) => panic!("{pairs:?}: {e}"),
    }
}

fn refused(pairs: &[(&str, &str)]) -> OptionsError {
    match JwtTokens::from_options(&opts(pairs)) {
        Ok((t, _)) => panic!("{pairs:?} was accepted: {t:?}"),
        Err(e) => e,
    }
}

fn at(secs: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(secs)
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
}

fn decoded(part: &str) -> String {
    let bytes = GO_RAW_URL_BASE64.decode(part).expect("base64");
    String::from_utf8(bytes).expect("utf-8")
}

/// The key files each method is tested with: (private, public).
const KEYS: [(&str, &str, &str); 7] = [
    ("RS256", "rs-priv.pem", "rs-pub.pem"),
    ("RS512", "rs-other.pem", ""),
    ("PS256", "rs-priv.pem", "rs-cert.pem"),
    ("ES256", "es256-priv.pem", "es256-pub.pem"),
    ("ES384", "es384-priv.pem", "es384-pub.pem"),
    ("HS256", "hs.key", ""),
    ("HS512", "hs.key", ""),
];

#[test]
fn every_method_signs_tokens_of_etcds_form_that_another_member_accepts() {
    for (method, private, public) in KEYS {
        let mut given = vec![("sign-method", method), ("ttl", "10m")];
        let (private, public) = (key(private), key(public));
        given.push(("priv-key", &private));
        if !public.ends_with('/') {
            given.push(("pub-key", &public));
        }
        let signer = tokens(&given);
        let other_member = tokens(&given);
        let token = signer.sign("alice", 7, at(1_000_000.5)).expect("signed");
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{method}");
        assert_eq!(
            decoded(parts[0]),
            format!(r#"{{"alg":"{method}","typ":"JWT"}}"#)
        );
        assert_eq!(
            decoded(parts[1]),
            r#"{"exp":1000600,"revision":7,"username":"alice"}"#,
            "{method}: claims as Go writes them, exp 10 minutes on, in whole seconds"
        );
        assert_eq!(
            other_member.verify(&token, at(1_000_599.9)),
            Some(("alice".to_string(), 7)),
            "{method}"
        );
        assert_eq!(
            other_member.verify(&token, at(1_000_600.0)),
            None,
            "{method}: expired"
        );
    }
}

#[test]
fn a_member_with_the_public_key_only_verifies() {
    for (method, private, public) in [
        ("RS256", "rs-priv.pem", "rs-pub.pem"),
        ("RS256", "rs-priv.pem", "rs-cert.pem"),
        ("ES256", "es256-priv.pem", "es256-pub.pem"),
    ] {
        let (private, public) = (key(private), key(public));
        let signer = tokens(&[("sign-method", method), ("priv-key", &private)]);
        let checker = tokens(&[("sign-method", method), ("pub-key", &public)]);
        assert!(checker.verify_only() && !signer.verify_only());
        let token = signer.sign("root", 3, SystemTime::now()).expect("signed");
        assert_eq!(
            checker.verify(&token, SystemTime::now()),
            Some(("root".into(), 3))
        );
        assert_eq!(
            checker.sign("root", 3, SystemTime::now()),
            Err(SignError::VerifyOnly)
        );
        assert_eq!(
            SignError::VerifyOnly.to_string(),
            "auth: token signing attempted with verify-only key"
        );
    }
}

#[test]
fn forged_and_damaged_tokens_are_refused() {
    let rs = tokens(&[("sign-method", "RS256"), ("priv-key", &key("rs-priv.pem"))]);
    let now = SystemTime::now();
    let good = rs.sign("alice", 5, now).expect("signed");
    assert!(rs.verify(&good, now).is_some());
    // Signed with another key of the same method.
    let other = tokens(&[("sign-method", "RS256"), ("priv-key", &key("rs-other.pem"))]);
    let forged = other.sign("alice", 5, now).expect("signed");
    assert_eq!(rs.verify(&forged, now), None, "another key");
    // The claims changed under the signature.
    let parts: Vec<&str> = good.split('.').collect();
    let exp = decoded(parts[1]);
    let root = exp.replace("\"alice\"", "\"root\"");
    let tampered = format!("{}.{}.{}", parts[0], b64(&root), parts[2]);
    assert_eq!(rs.verify(&tampered, now), None, "tampered claims");
    // No signature at all, as "none".
    let none = format!("{}.{}.", b64(r#"{"alg":"none","typ":"JWT"}"#), parts[1]);
    assert_eq!(rs.verify(&none, now), None, "alg none");
    // HS256 signed with the RSA public key's text as the secret (algorithm confusion).
    let public_pem = std::fs::read(key("rs-pub.pem")).expect("read");
    let confused = {
        let header = b64(r#"{"alg":"HS256","typ":"JWT"}"#);
        let message = format!("{header}.{}", parts[1]);
        let sig = jsonwebtoken::crypto::sign(
            message.as_bytes(),
            &EncodingKey::from_secret(&public_pem),
            Algorithm::HS256,
        )
        .expect("hmac");
        format!("{message}.{sig}")
    };
    assert_eq!(rs.verify(&confused, now), None, "another algorithm");
    for garbage in [
        "",
        "abc",
        "a.b",
        "a.b.c",
        "a.b.c.d",
        "abcdefghijklmnop.42",
        &good[1..],
    ] {
        assert_eq!(rs.verify(garbage, now), None, "{garbage:?}");
    }
    // ES256: another key, and a signature cut short.
    let es = tokens(&[
        ("sign-method", "ES256"),
        ("priv-key", &key("es256-priv.pem")),
    ]);
    let es_other = tokens(&[
        ("sign-method", "ES256"),
        ("priv-key", &key("es256-other.pem")),
    ]);
    let es_forged = es_other.sign("alice", 5, now).expect("signed");
    assert_eq!(es.verify(&es_forged, now), None);
    let es_good = es.sign("alice", 5, now).expect("signed");
    assert_eq!(es.verify(&es_good[..es_good.len() - 4], now), None);
    // HS256 with another secret.
    let hs = tokens(&[("sign-method", "HS256"), ("priv-key", &key("hs.key"))]);
    let hs_other = tokens(&[("sign-method", "HS256"), ("priv-key", &key("rs-pub.pem"))]);
    assert_eq!(
        hs.verify(&hs_other.sign("a", 1, now).expect("signed"), now),
        None
    );
}

/// A token signed by `t` over arbitrary claims.
fn signed_claims(t: &JwtTokens, claims: &str) -> String {
    let Signing::Key(k) = &t.signing else {
        panic!("no key")
    };
    let message = format!(
        "{}.{}",
        b64(&format!(r#"{{"alg":"{}","typ":"JWT"}}"#, t.name)),
        b64(claims)
    );
    let sig = jsonwebtoken::crypto::sign(message.as_bytes(), k, t.alg).expect("sign");
    format!("{message}.{sig}")
}

#[test]
fn claims_are_checked_as_golang_jwt_checks_them() {
    let hs = tokens(&[("sign-method", "HS256"), ("priv-key", &key("hs.key"))]);
    let now = at(2_000_000.0);
    let ok = |claims: &str| hs.verify(&signed_claims(&hs, claims), now);
    let user = |name: &str, rev: u64| Some((name.to_string(), rev));
    assert_eq!(
        ok(r#"{"username":"u","revision":4}"#),
        user("u", 4),
        "no exp: no expiry"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"exp":0}"#),
        user("u", 4),
        "exp 0"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"exp":2000000.9}"#),
        None,
        "whole seconds"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"exp":2000001}"#),
        user("u", 4)
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"exp":"2000001"}"#),
        None,
        "a string"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"iat":2000001}"#),
        None,
        "issued later"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"iat":2000000}"#),
        user("u", 4)
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4,"nbf":2000001}"#),
        None,
        "not yet"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4.7}"#),
        user("u", 4),
        "Go's uint64()"
    );
    assert_eq!(ok(r#"{"username":"u"}"#), None, "no revision");
    assert_eq!(
        ok(r#"{"username":"u","revision":"4"}"#),
        None,
        "revision as text"
    );
    assert_eq!(
        ok(r#"{"username":7,"revision":4}"#),
        None,
        "username not text"
    );
    assert_eq!(
        ok(r#"{"username":"u","revision":4} trailing"#),
        user("u", 4),
        "Go's Decode"
    );
    assert_eq!(ok(r#"["u",4]"#), None, "not an object");
}

#[test]
fn user_names_are_written_as_go_writes_them() {
    let hs = tokens(&[("sign-method", "HS256"), ("priv-key", &key("hs.key"))]);
    let now = SystemTime::now();
    let name = "a<b>&c\"d\\e\u{2028}é\n";
    let token = hs.sign(name, 1, now).expect("signed");
    let claims = decoded(token.split('.').nth(1).expect("claims"));
    assert!(
        claims.ends_with(r#""username":"a\u003cb\u003e\u0026c\"d\\e\u2028é\n"}"#),
        "{claims}"
    );
    assert_eq!(hs.verify(&token, now), Some((name.to_string(), 1)));
}

#[test]
fn ttl_as_go_durations() {
    let hs = |ttl: &str| {
        tokens(&[
            ("sign-method", "HS256"),
            ("priv-key", &key("hs.key")),
            ("ttl", ttl),
        ])
    };
    let t0 = at(1000.0);
    let exp = |t: &JwtTokens| {
        let token = t.sign("u", 1, t0).expect("signed");
        decoded(token.split('.').nth(1).expect("claims"))
    };
    assert!(exp(&hs("")).starts_with(r#"{"exp":1300,"#), "default 5m");
    assert!(exp(&hs("1h30m")).starts_with(r#"{"exp":6400,"#));
    assert!(exp(&hs("1500ms")).starts_with(r#"{"exp":1001,"#));
    assert!(exp(&hs("-1s")).starts_with(r#"{"exp":999,"#));
    let zero = hs("0");
    assert_eq!(
        zero.verify(&zero.sign("u", 1, t0).expect("signed"), t0),
        None,
        "ttl 0"
    );
    for bad in ["abc", "5", "1x", "--1s", "-+1s", "99999999999h"] {
        let e = refused(&[
            ("sign-method", "HS256"),
            ("priv-key", &key("hs.key")),
            ("ttl", bad),
        ]);
        assert_eq!(e.error, "auth: invalid auth options", "{bad}");
        assert_eq!(e.detail, Some(format!("time: invalid duration {bad:?}")));
    }
}

#[test]
fn start_up_refusals_with_etcds_errors() {
    let invalid = "auth: invalid auth options";
    let e = refused(&[]);
    assert_eq!(
        (e.error.as_str(), e.detail.as_deref()),
        (invalid, Some("auth: invalid auth signature method"))
    );
    let e = refused(&[("sign-method", "FOO"), ("priv-key", &key("rs-priv.pem"))]);
    assert_eq!(e.error, invalid);
    let e = refused(&[
        ("sign-method", "RS256"),
        ("priv-key", "/nonexistent/key.pem"),
    ]);
    assert_eq!(e.error, invalid);
    assert_eq!(
        e.detail.as_deref(),
        Some("open /nonexistent/key.pem: no such file or directory")
    );
    let e = refused(&[
        ("sign-method", "RS256"),
        ("priv-key", &key("rs-priv.pem")),
        ("pub-key", "/nope"),
    ]);
    assert_eq!(e.error, invalid, "an unreadable public key too");
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("sign-method", "RS256")], MISSING_KEY),
        (
            &[("sign-method", "HS256"), ("pub-key", &key("hs.key"))],
            MISSING_KEY,
        ),
        (&[("sign-method", "ES256")], MISSING_KEY),
        (
            &[("sign-method", "RS256"), ("priv-key", &key("hs.key"))],
            keys::NOT_PEM,
        ),
        (
            &[("sign-method", "ES256"), ("pub-key", &key("hs.key"))],
            keys::NOT_PEM,
        ),
        (
            &[
                ("sign-method", "RS256"),
                ("priv-key", &key("es256-priv.pem")),
            ],
            "x509: failed to parse private key (use ParseECPrivateKey instead for this key format)",
        ),
        (
            &[
                ("sign-method", "RS256"),
                ("priv-key", &key("es256-other.pem")),
            ],
            keys::NOT_RSA_PRIVATE,
        ),
        (
            &[("sign-method", "PS384"), ("priv-key", &key("ed25519.pem"))],
            keys::NOT_RSA_PRIVATE,
        ),
        (
            &[("sign-method", "RS256"), ("pub-key", &key("es256-pub.pem"))],
            keys::NOT_RSA_PUBLIC,
        ),
        (
            &[("sign-method", "ES256"), ("priv-key", &key("rs-other.pem"))],
            "x509: failed to parse private key (use ParsePKCS1PrivateKey instead for this key format)",
        ),
        (
            &[("sign-method", "ES256"), ("priv-key", &key("rs-priv.pem"))],
            keys::NOT_EC_PRIVATE,
        ),
        (
            &[("sign-method", "ES256"), ("pub-key", &key("rs-pub.pem"))],
            keys::NOT_EC_PUBLIC,
        ),
        (
            &[("sign-method", "ES384"), ("pub-key", &key("rs-cert.pem"))],
            keys::NOT_EC_PUBLIC,
        ),
        (
            &[("sign-method", "none"), ("priv-key", &key("rs-priv.pem"))],
            "unsupported signing method: *jwt.signingMethodNone",
        ),
        (
            &[("sign-method", "EdDSA"), ("priv-key", &key("ed25519.pem"))],
            "unsupported signing method: *jwt.SigningMethodEd25519",
        ),
    ];
    for (given, want) in cases {
        let e = refused(given);
        assert_eq!((e.error.as_str(), e.detail), (*want, None), "{given:?}");
    }
    let empty = tempfile::NamedTempFile::new().expect("temp file");
    let empty = empty.path().to_string_lossy().to_string();
    assert_eq!(
        refused(&[("sign-method", "RS256"), ("priv-key", &empty)]).error,
        MISSING_KEY
    );
    let e = refused(&[
        ("sign-method", "ES512"),
        ("priv-key", &key("es512-priv.pem")),
    ]);
    assert!(e.error.contains("not supported yet by oxcd"), "{e}");
}

#[test]
fn keys_are_matched_and_used_as_etcd_does() {
    // A different RSA key with the same exponent passes etcd's check; the private key
    // signs and verifies.
    let t = tokens(&[
        ("sign-method", "RS256"),
        ("priv-key", &key("rs-other.pem")),
        ("pub-key", &key("rs-pub.pem")),
    ]);
    let alone = tokens(&[("sign-method", "RS256"), ("priv-key", &key("rs-other.pem"))]);
    let now = SystemTime::now();
    assert!(
        alone
            .verify(&t.sign("u", 1, now).expect("signed"), now)
            .is_some()
    );
    // Keys on different curves: refused.
    let e = refused(&[
        ("sign-method", "ES256"),
        ("priv-key", &key("es256-priv.pem")),
        ("pub-key", &key("es384-pub.pem")),
    ]);
    assert_eq!(e.error, KEY_MISMATCH);
    // A key on another curve than the method's: accepted, as etcd, then signs nothing.
    let wrong = tokens(&[
        ("sign-method", "ES256"),
        ("priv-key", &key("es384-priv.pem")),
    ]);
    assert_eq!(wrong.sign("u", 1, now), Err(SignError::InvalidKey));
    let p521 = tokens(&[
        ("sign-method", "ES384"),
        ("priv-key", &key("es512-priv.pem")),
    ]);
    assert_eq!(p521.sign("u", 1, now), Err(SignError::InvalidKey));
    // HS: the public key file is read, then ignored.
    let hs = tokens(&[
        ("sign-method", "HS256"),
        ("priv-key", &key("hs.key")),
        ("pub-key", &key("rs-pub.pem")),
    ]);
    assert!(
        hs.verify(&hs.sign("u", 1, now).expect("signed"), now)
            .is_some()
    );
}

#[test]
fn unknown_options_are_warned_about() {
    let (_, warning) = JwtTokens::from_options(&opts(&[
        ("sign-method", "HS256"),
        ("priv-key", &key("hs.key")),
        ("color", "blue"),
    ]))
    .expect("accepted");
    assert_eq!(warning.as_deref(), Some("unknown JWT options: [color]"));
}

#[test]
fn pem_blocks_as_go_finds_them() {
    let body = "-----BEGIN X-----\naGVsbG8=\n-----END X-----\n";
    assert_eq!(keys::pem_block(body.as_bytes()), Some(b"hello".to_vec()));
    let with_text = format!("some text\n{body}");
    assert_eq!(
        keys::pem_block(with_text.as_bytes()),
        Some(b"hello".to_vec())
    );
    let headers = "-----BEGIN Y-----\nProc-Type: 4,ENCRYPTED\n\naGVsbG8=\n-----END Y-----";
    assert_eq!(keys::pem_block(headers.as_bytes()), Some(b"hello".to_vec()));
    let bad_then_good = format!("-----BEGIN X-----\n!!!\n-----END X-----\n{body}");
    assert_eq!(
        keys::pem_block(bad_then_good.as_bytes()),
        Some(b"hello".to_vec())
    );
    let mismatched = "-----BEGIN X-----\naGVsbG8=\n-----END Z-----\n";
    assert_eq!(keys::pem_block(mismatched.as_bytes()), None);
    assert_eq!(keys::pem_block(b"not pem"), None);
}

#[test]
fn rsa_keys_the_verifier_cannot_take_are_refused_at_start() {
    let e = refused(&[
        ("sign-method", "RS256"),
        ("priv-key", &key("rs-5000-priv.pem")),
    ]);
    assert!(
        e.to_string()
            .contains("RSA keys over 4096 bits are not supported yet"),
        "{e}"
    );
}

#[test]
fn a_key_file_that_is_no_key_file_is_refused_without_reading_it_all() {
    let e = refused(&[("sign-method", "HS256"), ("priv-key", "/dev/zero")]);
    assert!(e.to_string().contains("not a key file"), "{e}");
}
