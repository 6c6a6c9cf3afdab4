//! gRPC server metrics as etcd exports them (go-grpc-prometheus): for each method,
//! calls started and handled by code, and with `--metrics extensive` the time to handle
//! them; counted by the client port's front door ([`crate::edge::front`]) before the
//! gRPC services.
//!
//! Invariants: a call is counted handled once, when its answer ends (the status in the
//! headers of an error answer, in the trailers of a finished one; a call whose answer
//! is dropped unfinished, a client that went away, counts as Canceled); etcd's methods
//! are listed with zeros before any call, as etcd lists them.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use oxcd_storage::timing::Histogram;

use super::text::{Exposition, Family, Kind};

/// gRPC's codes, by number, as Go names them.
const CODES: [&str; 17] = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];
const CANCELED: usize = 1;
const UNKNOWN: usize = 2;

const UNARY: &str = "unary";
const SERVER_STREAM: &str = "server_stream";
const BIDI: &str = "bidi_stream";

/// Every method served: service, method, type, and whether etcd lists it before it is
/// called (Lock and Election are registered after etcd's metrics are set up).
const METHODS: [(&str, &str, &str, bool); 49] = [
    ("etcdserverpb.KV", "Range", UNARY, true),
    ("etcdserverpb.KV", "Put", UNARY, true),
    ("etcdserverpb.KV", "DeleteRange", UNARY, true),
    ("etcdserverpb.KV", "Txn", UNARY, true),
    ("etcdserverpb.KV", "Compact", UNARY, true),
    ("etcdserverpb.Watch", "Watch", BIDI, true),
    ("etcdserverpb.Lease", "LeaseGrant", UNARY, true),
    ("etcdserverpb.Lease", "LeaseRevoke", UNARY, true),
    ("etcdserverpb.Lease", "LeaseKeepAlive", BIDI, true),
    ("etcdserverpb.Lease", "LeaseTimeToLive", UNARY, true),
    ("etcdserverpb.Lease", "LeaseLeases", UNARY, true),
    ("etcdserverpb.Cluster", "MemberAdd", UNARY, true),
    ("etcdserverpb.Cluster", "MemberRemove", UNARY, true),
    ("etcdserverpb.Cluster", "MemberUpdate", UNARY, true),
    ("etcdserverpb.Cluster", "MemberList", UNARY, true),
    ("etcdserverpb.Cluster", "MemberPromote", UNARY, true),
    ("etcdserverpb.Maintenance", "Alarm", UNARY, true),
    ("etcdserverpb.Maintenance", "Status", UNARY, true),
    ("etcdserverpb.Maintenance", "Defragment", UNARY, true),
    ("etcdserverpb.Maintenance", "Hash", UNARY, true),
    ("etcdserverpb.Maintenance", "HashKV", UNARY, true),
    ("etcdserverpb.Maintenance", "Snapshot", SERVER_STREAM, true),
    ("etcdserverpb.Maintenance", "MoveLeader", UNARY, true),
    ("etcdserverpb.Maintenance", "Downgrade", UNARY, true),
    ("etcdserverpb.Auth", "AuthEnable", UNARY, true),
    ("etcdserverpb.Auth", "AuthDisable", UNARY, true),
    ("etcdserverpb.Auth", "AuthStatus", UNARY, true),
    ("etcdserverpb.Auth", "Authenticate", UNARY, true),
    ("etcdserverpb.Auth", "UserAdd", UNARY, true),
    ("etcdserverpb.Auth", "UserGet", UNARY, true),
    ("etcdserverpb.Auth", "UserList", UNARY, true),
    ("etcdserverpb.Auth", "UserDelete", UNARY, true),
    ("etcdserverpb.Auth", "UserChangePassword", UNARY, true),
    ("etcdserverpb.Auth", "UserGrantRole", UNARY, true),
    ("etcdserverpb.Auth", "UserRevokeRole", UNARY, true),
    ("etcdserverpb.Auth", "RoleAdd", UNARY, true),
    ("etcdserverpb.Auth", "RoleGet", UNARY, true),
    ("etcdserverpb.Auth", "RoleList", UNARY, true),
    ("etcdserverpb.Auth", "RoleDelete", UNARY, true),
    ("etcdserverpb.Auth", "RoleGrantPermission", UNARY, true),
    ("etcdserverpb.Auth", "RoleRevokePermission", UNARY, true),
    ("grpc.health.v1.Health", "Check", UNARY, true),
    ("grpc.health.v1.Health", "Watch", SERVER_STREAM, true),
    ("v3lockpb.Lock", "Lock", UNARY, false),
    ("v3lockpb.Lock", "Unlock", UNARY, false),
    ("v3electionpb.Election", "Campaign", UNARY, false),
    ("v3electionpb.Election", "Proclaim", UNARY, false),
    ("v3electionpb.Election", "Leader", UNARY, false),
    ("v3electionpb.Election", "Observe", SERVER_STREAM, false),
];

/// The counts of one method.
#[derive(Debug)]
struct MethodCounts {
    started: AtomicU64,
    received: AtomicU64,
    sent: AtomicU64,
    handled: [AtomicU64; 17],
    handling: Histogram,
}

/// The gRPC counts of one member.
#[derive(Debug)]
pub struct GrpcMetrics {
    methods: Vec<MethodCounts>,
    /// Whether handling times are kept (`--metrics extensive`).
    extensive: std::sync::atomic::AtomicBool,
}

/// Prometheus' default buckets, which go-grpc-prometheus' handling time uses.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

impl Default for GrpcMetrics {
    fn default() -> GrpcMetrics {
        let methods = METHODS
            .iter()
            .map(|_| MethodCounts {
                started: AtomicU64::new(0),
                received: AtomicU64::new(0),
                sent: AtomicU64::new(0),
                handled: Default::default(),
                handling: Histogram::with_bounds(DEFAULT_BUCKETS.to_vec()),
            })
            .collect();
        GrpcMetrics {
            methods,
            extensive: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// The method at a gRPC `path` (`/etcdserverpb.KV/Range`), as an index of [`METHODS`]:
/// one hash lookup per call.
fn method_index(path: &str) -> Option<usize> {
    static BY_PATH: std::sync::OnceLock<std::collections::HashMap<String, usize>> =
        std::sync::OnceLock::new();
    BY_PATH
        .get_or_init(|| {
            METHODS
                .iter()
                .enumerate()
                .map(|(i, (s, m, _, _))| (format!("/{s}/{m}"), i))
                .collect()
        })
        .get(path)
        .copied()
}

/// The code of a `grpc-status` value.
fn code_index(value: &[u8]) -> usize {
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|c| *c < CODES.len())
        .unwrap_or(UNKNOWN)
}

impl GrpcMetrics {
    /// Keeps handling times from now on (`--metrics extensive`).
    pub fn set_extensive(&self, on: bool) {
        self.extensive.store(on, Ordering::Relaxed);
    }

    fn handled(&self, i: usize, code: usize, started: Instant) {
        let m = &self.methods[i];
        m.handled[code].fetch_add(1, Ordering::Relaxed);
        if code == 0 && METHODS[i].2 == UNARY {
            m.sent.fetch_add(1, Ordering::Relaxed);
        }
        if self.extensive.load(Ordering::Relaxed) {
            m.handling.observe(started.elapsed());
        }
    }

    /// Adds the gRPC families to `e`.
    pub fn add(&self, e: &mut Exposition) {
        let mut started = Family::new(
            "grpc_server_started_total",
            Kind::Counter,
            "Total number of RPCs started on the server.",
        );
        let mut handled = Family::new(
            "grpc_server_handled_total",
            Kind::Counter,
            "Total number of RPCs completed on the server, regardless of success or failure.",
        );
        let mut received = Family::new(
            "grpc_server_msg_received_total",
            Kind::Counter,
            "Total number of RPC stream messages received on the server.",
        );
        let mut sent = Family::new(
            "grpc_server_msg_sent_total",
            Kind::Counter,
            "Total number of gRPC stream messages sent by the server.",
        );
        let mut handling = Family::new(
            "grpc_server_handling_seconds",
            Kind::Histogram,
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
        );
        // Sorted by label values, as etcd's client writes them: code, method, service, type.
        let mut order: Vec<usize> = (0..METHODS.len()).collect();
        order.sort_by_key(|i| (METHODS[*i].1, METHODS[*i].0));
        for code in sorted_codes() {
            for &i in &order {
                let (service, method, kind, listed) = METHODS[i];
                let m = &self.methods[i];
                let n = m.handled[code].load(Ordering::Relaxed);
                if listed || m.started.load(Ordering::Relaxed) > 0 {
                    handled.sample(
                        &[
                            ("grpc_code", CODES[code]),
                            ("grpc_method", method),
                            ("grpc_service", service),
                            ("grpc_type", kind),
                        ],
                        n as f64,
                    );
                }
            }
        }
        let extensive = self.extensive.load(Ordering::Relaxed);
        for &i in &order {
            let (service, method, kind, listed) = METHODS[i];
            let m = &self.methods[i];
            let n = m.started.load(Ordering::Relaxed);
            if !listed && n == 0 {
                continue;
            }
            let labels = [
                ("grpc_method", method),
                ("grpc_service", service),
                ("grpc_type", kind),
            ];
            started.sample(&labels, n as f64);
            received.sample(&labels, m.received.load(Ordering::Relaxed) as f64);
            sent.sample(&labels, m.sent.load(Ordering::Relaxed) as f64);
            if extensive {
                handling.histogram(&labels, &m.handling.snapshot());
            }
        }
        e.add(started);
        e.add(handled);
        e.add(received);
        e.add(sent);
        if extensive {
            e.add(handling);
        }
    }
}

/// The codes in the order of their names.
fn sorted_codes() -> Vec<usize> {
    let mut c: Vec<usize> = (0..CODES.len()).collect();
    c.sort_by_key(|i| CODES[*i]);
    c
}

/// One gRPC call counted as started ([`GrpcMetrics::start`]); [`Call::answered`]
/// counts it handled once its answer ends.
pub struct Call {
    metrics: Arc<GrpcMetrics>,
    method: usize,
    started: Instant,
}

impl GrpcMetrics {
    /// Counts a call to the method at `path` as started; None if `path` is not one of
    /// etcd's methods (nothing is counted).
    pub fn start(self: &Arc<Self>, path: &str) -> Option<Call> {
        let i = method_index(path)?;
        let m = &self.methods[i];
        m.started.fetch_add(1, Ordering::Relaxed);
        if METHODS[i].2 != BIDI {
            m.received.fetch_add(1, Ordering::Relaxed);
        }
        Some(Call {
            metrics: self.clone(),
            method: i,
            started: Instant::now(),
        })
    }
}

impl Call {
    /// `resp`, the call counted handled: now if its status is in the headers (an error),
    /// else when its body ends (the status in the trailers) or is dropped (Canceled).
    pub fn answered(self, resp: Response) -> Response {
        if let Some(status) = resp.headers().get("grpc-status") {
            self.metrics
                .handled(self.method, code_index(status.as_bytes()), self.started);
            return resp;
        }
        resp.map(|body| {
            Body::new(Counted {
                inner: body,
                metrics: self.metrics,
                method: self.method,
                started: self.started,
                done: false,
            })
        })
    }
}

/// An answer's body that counts its call handled when it ends.
struct Counted {
    inner: Body,
    metrics: Arc<GrpcMetrics>,
    method: usize,
    started: Instant,
    done: bool,
}

impl Counted {
    fn finish(&mut self, code: usize) {
        if !self.done {
            self.done = true;
            self.metrics.handled(self.method, code, self.started);
        }
    }
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    let code = trailers
                        .get("grpc-status")
                        .map(|v| code_index(v.as_bytes()))
                        .unwrap_or(UNKNOWN);
                    self.finish(code);
                }
            }
            Poll::Ready(Some(Err(_))) => self.finish(UNKNOWN),
            Poll::Ready(None) => self.finish(UNKNOWN),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.finish(CANCELED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_codes_are_read() {
        assert_eq!(method_index("/etcdserverpb.KV/Range"), Some(0));
        assert_eq!(method_index("/etcdserverpb.KV/Nope"), None);
        assert_eq!(method_index("/health"), None);
        assert_eq!(code_index(b"0"), 0);
        assert_eq!(code_index(b"14"), 14);
        assert_eq!(code_index(b"99"), UNKNOWN);
        let listed = METHODS.iter().filter(|m| m.3).count();
        // etcd 3.5 lists 43 methods, grpc.health.v1.Health's two among them.
        assert_eq!(listed, 43);
    }
}
