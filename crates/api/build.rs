//! Compiles the etcd v3 protos and oxcd's internal protos with protox (pure Rust:
//! no system `protoc` is needed) and generates prost messages and tonic stubs; with the
//! `json` feature, also the JSON mapping of etcd's messages (pbjson: proto field names,
//! 64-bit integers as strings, bytes as base64, enum names, zero fields left out), which
//! is the one etcd's gRPC gateway speaks.

/// The packages etcd's gateway speaks JSON for.
const JSON_PACKAGES: [&str; 6] = [
    ".mvccpb",
    ".membershippb",
    ".authpb",
    ".etcdserverpb",
    ".v3lockpb",
    ".v3electionpb",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it is compiled: a build script binary shared
    // between two checkouts (one target dir) must read its own checkout's protos.
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        "etcd/api/mvccpb/kv.proto",
        "etcd/api/authpb/auth.proto",
        "etcd/api/etcdserverpb/rpc.proto",
        "etcd/api/etcdserverpb/etcdserver.proto",
        "etcd/api/etcdserverpb/raft_internal.proto",
        "etcd/api/membershippb/membership.proto",
        "etcd/api/leasepb/lease.proto",
        "etcd/api/v3lockpb/v3lock.proto",
        "etcd/api/v3electionpb/v3election.proto",
        "oxcd/internal.proto",
        "oxcd/peer.proto",
        "grpc/health/v1/health.proto",
    ];
    let fds = protox::compile(files, [&root])?;
    println!("cargo:rerun-if-changed={}", root.display());
    if std::env::var_os("CARGO_FEATURE_JSON").is_some() {
        let mut json = pbjson_build::Builder::new();
        for file in &fds.file {
            json.register_file_descriptor(file.clone());
        }
        json.preserve_proto_field_names()
            // As etcd's gateway: fields it does not know are ignored.
            .ignore_unknown_fields()
            .build(&JSON_PACKAGES)?;
    }
    tonic_prost_build::configure()
        .generate_default_stubs(true)
        // Snapshot data is passed on without a copy (decoded as a slice of the receive
        // buffer).
        .bytes(".oxcdpb.SnapshotChunk.data")
        .compile_fds(fds)?;
    Ok(())
}
