use super::*;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn load_with(a: &[&str], env: &[(&str, &str)]) -> Result<Loaded, ConfigError> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let keys: Vec<String> = env.iter().map(|(k, _)| k.clone()).collect();
    let lookup = move |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.clone());
    load(&args(a), &lookup, &keys)
}

#[test]
fn defaults_are_etcds() {
    let l = load_with(&[], &[]).expect("load");
    let s = l.config.settings();
    assert_eq!(s.name, "default");
    assert_eq!(s.data_dir, PathBuf::from("default.etcd"));
    assert_eq!(s.listen_client_urls, ["http://localhost:2379"]);
    assert_eq!(s.snapshot_count, 10_000, "etcd 3.6's default");
    assert_eq!(
        (s.heartbeat.as_millis(), s.election_timeout.as_millis()),
        (100, 1000)
    );
    assert_eq!((s.max_txn_ops, s.max_request_bytes), (128, 1_572_864));
    assert!(s.pre_vote);
    let l = load_with(&["--name", "m1"], &[]).expect("load");
    assert_eq!(
        l.config.data_dir(),
        PathBuf::from("m1.etcd"),
        "data dir follows the name"
    );
}

#[test]
fn go_flag_syntax() {
    let l = load_with(
        &[
            "-name=a",
            "--snapshot-count",
            "5",
            "-pre-vote=false",
            "--strict-reconfig-check",
        ],
        &[],
    )
    .expect("load");
    assert_eq!(l.config.get(key::NAME), "a");
    assert_eq!(l.config.get(key::SNAPSHOT_COUNT), 5);
    assert!(!l.config.get(key::PRE_VOTE));
    assert_eq!(
        load_with(&["--foo"], &[]).unwrap_err().0,
        "flag provided but not defined: -foo"
    );
    assert_eq!(
        load_with(&["--name"], &[]).unwrap_err().0,
        "flag needs an argument: -name"
    );
    assert_eq!(
        load_with(&["--snapshot-count", "abc"], &[]).unwrap_err().0,
        "invalid value \"abc\" for flag -snapshot-count: parse error"
    );
    assert_eq!(
        load_with(&["--pre-vote=maybe"], &[]).unwrap_err().0,
        "invalid boolean value \"maybe\" for -pre-vote: parse error"
    );
    assert_eq!(
        load_with(&["stray"], &[]).unwrap_err().0,
        "'stray' is not a valid flag"
    );
    assert!(load_with(&["-h"], &[]).expect("help").config.help);
}

#[test]
fn environment_rules() {
    let l = load_with(&[], &[("ETCD_NAME", "from-env"), ("ETCD_FOO", "1")]).expect("load");
    assert_eq!(l.config.get(key::NAME), "from-env");
    assert_eq!(l.config.source(key::NAME.name), Source::Env);
    assert!(
        l.warnings
            .iter()
            .any(|w| w == "unrecognized environment variable ETCD_FOO=1"),
        "{:?}",
        l.warnings
    );
    let e = load_with(&["--name", "y"], &[("ETCD_NAME", "x")]).unwrap_err();
    assert_eq!(
        e.0,
        "conflicting environment variable \"ETCD_NAME\" is shadowed by corresponding command-line flag (either unset environment variable or disable flag)"
    );
}

#[test]
fn urls_and_cluster_checks() {
    let e = load_with(
        &[
            "--listen-client-urls",
            "foo",
            "--advertise-client-urls",
            "http://a:1",
        ],
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e.0,
        "invalid value \"foo\" for flag -listen-client-urls: URL scheme must be http, https, unix, or unixs: foo"
    );
    let e = load_with(&["--listen-client-urls", "http://127.0.0.1:2"], &[]).unwrap_err();
    assert_eq!(
        e.0,
        "--advertise-client-urls is required when --listen-client-urls is set explicitly"
    );
    let e = load_with(&["--heartbeat-interval", "300"], &[]).unwrap_err();
    assert_eq!(
        e.0,
        "--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[300ms]"
    );
    let e = load_with(&["--name", "x", "--initial-cluster", "y=http://h:1"], &[]).unwrap_err();
    assert_eq!(
        e.0,
        "couldn't find local name \"x\" in the initial cluster configuration"
    );
    let e = load_with(&["--initial-cluster-state", "bogus"], &[]).unwrap_err();
    assert!(
        e.0.starts_with("invalid value \"bogus\" for flag -initial-cluster-state"),
        "{e}"
    );
}

#[test]
fn unbuilt_features_are_refused_not_ignored() {
    let e = load_with(&["--enable-log-rotation"], &[]).unwrap_err();
    assert!(
        e.0.contains("--enable-log-rotation") && e.0.contains("not supported yet"),
        "{e}"
    );
    let e = load_with(&[], &[("ETCD_CLIENT_CERT_FILE", "/x.pem")]).unwrap_err();
    assert!(
        e.0.contains("--client-cert-file") && e.0.contains("not supported yet"),
        "{e}"
    );
    // Defaults restated explicitly are fine.
    load_with(
        &[
            "--auto-tls=false",
            "--enable-v2=false",
            "--experimental-initial-corrupt-check=false",
        ],
        &[],
    )
    .expect("defaults");
    let l = load_with(&["--backend-batch-limit", "100"], &[]).expect("no-effect knob");
    assert!(l.warnings.iter().any(|w| w.contains("backend-batch-limit")));
}

#[test]
fn config_file_overrides_flags_and_env() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("etcd.conf.yml");
    std::fs::write(
        &path,
        "name: from-file\ndata-dir: /tmp/x\nsnapshot-count: 42\nlisten-client-urls: http://127.0.0.1:3379\nadvertise-client-urls: http://127.0.0.1:3379\nlog-outputs: [stderr]\nenable-v2: false\nclient-transport-security:\n  client-cert-auth: false\nunknown-key: 1\n",
    )
    .expect("write");
    let p = path.display().to_string();
    let l = load_with(
        &["--config-file", &p, "--name", "from-flag"],
        &[("ETCD_SNAPSHOT_COUNT", "7")],
    )
    .expect("load");
    assert_eq!(l.config.get(key::NAME), "from-file");
    assert_eq!(l.config.get(key::SNAPSHOT_COUNT), 42);
    assert_eq!(
        l.config.settings().listen_client_urls,
        ["http://127.0.0.1:3379"]
    );
    assert!(l.warnings.iter().any(|w| w.contains("unknown-key")));
}

#[test]
fn auth_flags_as_etcd_reads_them() {
    let s = load_with(&[], &[]).expect("load").config.settings();
    assert_eq!((s.auth_token_ttl.as_secs(), s.bcrypt_cost), (300, 10));
    let l = load_with(
        &[
            "--auth-token",
            "simple",
            "--auth-token-ttl",
            "0",
            "--bcrypt-cost",
            "3",
        ],
        &[],
    )
    .expect("load");
    let s = l.config.settings();
    assert_eq!(s.auth_token_ttl.as_secs(), 300, "zero is etcd's default");
    assert_eq!(s.bcrypt_cost, 10, "a cost bcrypt refuses is the default");
    assert!(l.warnings.iter().any(|w| w.contains("--bcrypt-cost=3")));
    let l = load_with(&["--auth-token-ttl", "60", "--bcrypt-cost", "4"], &[]).expect("load");
    let s = l.config.settings();
    assert_eq!((s.auth_token_ttl.as_secs(), s.bcrypt_cost), (60, 4));
    let e = load_with(&["--auth-token", "magic"], &[]).expect_err("unknown type");
    assert!(e.to_string().contains("auth: invalid auth options"), "{e}");
    let s = load_with(&["--auth-token", ""], &[])
        .expect("etcd's nop provider")
        .config
        .settings();
    assert_eq!(s.auth_token, "");
}

/// A test key under `testdata/jwt`.
fn jwt_key(name: &str) -> String {
    format!("{}/../../testdata/jwt/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn jwt_auth_token_read_and_refused_as_etcd() {
    let (private, public) = (jwt_key("rs-priv.pem"), jwt_key("rs-pub.pem"));
    let spec = format!("jwt,pub-key={public},priv-key={private},sign-method=RS256,ttl=10m");
    let l = load_with(&["--auth-token", &spec], &[]).expect("load");
    assert_eq!(l.config.settings().auth_token, spec);
    let verify_only = format!("jwt,pub-key={public},sign-method=RS512,color=blue");
    let l = load_with(&[], &[("ETCD_AUTH_TOKEN", &verify_only)]).expect("from the environment");
    assert!(
        l.warnings
            .iter()
            .any(|w| w == "unknown JWT options: [color]"),
        "{:?}",
        l.warnings
    );
    let refusals = [
        (
            "jwt,sign-method=RS256,priv-key=/nonexistent/k.pem".to_string(),
            "auth: invalid auth options (open /nonexistent/k.pem: no such file or directory)",
        ),
        (
            "jwt,priv-key=/x".to_string(),
            "auth: invalid auth options (open /x: no such file or directory)",
        ),
        (
            format!("jwt,sign-method=RS1024,priv-key={private}"),
            "auth: invalid auth options (auth: invalid auth signature method)",
        ),
        (
            format!("jwt,sign-method=RS256,priv-key={private},ttl=forever"),
            "auth: invalid auth options (time: invalid duration \"forever\")",
        ),
        (format!("jwt,sign-method=RS256,priv-key={private},bad"), ""),
        (
            format!("jwt,sign-method=RS256,priv-key={private},ttl=1s,ttl=2s"),
            "",
        ),
        (
            "jwt,sign-method=RS256".to_string(),
            "auth: missing key data",
        ),
        (
            format!("jwt,sign-method=RS256,priv-key={}", jwt_key("hs.key")),
            "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key",
        ),
        (
            format!("jwt,sign-method=ES256,pub-key={public}"),
            "key is not a valid ECDSA public key",
        ),
    ];
    for (spec, want) in refusals {
        let e = load_with(&["--auth-token", &spec], &[]).expect_err(&spec);
        if want.is_empty() {
            assert!(
                e.0.starts_with("auth: invalid auth options ("),
                "{spec}: {e}"
            );
        } else {
            assert_eq!(e.0, want, "{spec}");
        }
    }
}

// etcd v3.6.14 server/embed/config.go `Validate` (experimentalFlagMigrationMap) and
// server/etcdmain/config.go `deprecatedFlags`: an old name warns and is used; both names
// are refused.
#[test]
fn renamed_experimental_flags_warn_and_refuse_both() {
    let l = load_with(&["--experimental-corrupt-check-time", "3m"], &[]).expect("load");
    assert!(
        l.warnings.iter().any(|w| w
            == "--experimental-corrupt-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--corrupt-check-time' instead."),
        "{:?}",
        l.warnings
    );
    assert_eq!(l.config.settings().corrupt_check_time.as_secs(), 180);
    // v3.6.14 server/embed/config.go DefaultDowngradeCheckTime, etcdmain/config.go deprecatedFlags.
    assert_eq!(
        load_with(&[], &[])
            .expect("load")
            .config
            .settings()
            .downgrade_check_time
            .as_secs(),
        5
    );
    let l = load_with(&["--experimental-downgrade-check-time", "2s"], &[]).expect("load");
    assert!(
        l.warnings.iter().any(|w| w
            == "--experimental-downgrade-check-time is deprecated in v3.6 and will be decommissioned in v3.7. Use '--downgrade-check-time' instead."),
        "{:?}",
        l.warnings
    );
    assert_eq!(l.config.settings().downgrade_check_time.as_secs(), 2);
    let l = load_with(&["--corrupt-check-time", "2m"], &[]).expect("load");
    assert!(l.warnings.iter().all(|w| !w.contains("deprecated")));
    assert_eq!(l.config.settings().corrupt_check_time.as_secs(), 120);
    assert_eq!(
        load_with(
            &[
                "--experimental-snapshot-catchup-entries=10",
                "--snapshot-catchup-entries=20"
            ],
            &[]
        )
        .unwrap_err()
        .0,
        "cannot set --experimental-snapshot-catchup-entries and --snapshot-catchup-entries at the same time, please use --snapshot-catchup-entries only"
    );
    // The env names count as given.
    assert!(
        load_with(
            &["--watch-progress-notify-interval=1s"],
            &[("ETCD_EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL", "2s")]
        )
        .is_err()
    );
    assert_eq!(
        load_with(
            &[
                "--experimental-warning-unary-request-duration=1s",
                "--warning-unary-request-duration=2s"
            ],
            &[]
        )
        .unwrap_err()
        .0,
        "both --experimental-warning-unary-request-duration and --warning-unary-request-duration flags are set. Use only --warning-unary-request-duration"
    );
    // Flags that exist in neither etcd 3.5.16 nor 3.6.
    assert_eq!(
        load_with(&["--experimental-max-learners=2"], &[])
            .unwrap_err()
            .0,
        "flag provided but not defined: -experimental-max-learners"
    );
}

// etcd v3.6.14 pkg/featuregate/feature_gate.go `Set` and server/embed/config.go
// `SetFeatureGatesFromExperimentalFlags`.
#[test]
fn feature_gates_as_etcd_3_6_reads_them() {
    let l = load_with(
        &["--feature-gates=StopGRPCServiceOnDefrag=true,InitialCorruptCheck=true"],
        &[],
    )
    .expect("load");
    let s = l.config.settings();
    assert!(s.stop_grpc_service_on_defrag && s.initial_corrupt_check);
    let l = load_with(&["--experimental-initial-corrupt-check"], &[]).expect("load");
    assert!(
        l.config.settings().initial_corrupt_check,
        "the old flag sets the gate"
    );
    assert_eq!(
        load_with(&["--feature-gates=Foo=true"], &[]).unwrap_err().0,
        "invalid value \"Foo=true\" for flag -feature-gates: unrecognized feature gate: Foo"
    );
    assert_eq!(
        load_with(
            &[
                "--experimental-initial-corrupt-check=true",
                "--feature-gates=InitialCorruptCheck=false"
            ],
            &[]
        )
        .unwrap_err()
        .0,
        "cannot specify both flags: --experimental-initial-corrupt-check=true and --feature-gates=InitialCorruptCheck=false at the same time, please just use --feature-gates=InitialCorruptCheck=false"
    );
    let l = load_with(
        &[],
        &[(
            "ETCD_FEATURE_GATES",
            "AllAlpha=true,CompactHashCheck=false,SetMemberLocalAddr=false",
        )],
    )
    .expect("load");
    assert!(l.config.settings().feature_gates.enabled("LeaseCheckpoint"));
    assert!(
        load_with(&["--feature-gates=CompactHashCheck=true"], &[])
            .unwrap_err()
            .0
            .contains("not supported yet"),
        "a gate oxcd cannot honour stops it"
    );
}
