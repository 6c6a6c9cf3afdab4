//! Client errors, printed as etcd's Go client (clientv3) prints them, because etcdctl's
//! users and scripts read those texts.

/// A client error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No endpoint could be reached within the dial timeout, or a call ran out of time.
    #[error("context deadline exceeded")]
    DeadlineExceeded,
    /// An endpoint string is not usable.
    #[error("invalid endpoint {0:?}: {1}")]
    BadEndpoint(String, String),
    /// The TLS settings cannot be used (a file is missing or unreadable, a key does
    /// not match its certificate): Go's message for the same problem.
    #[error("{0}")]
    Tls(String),
    /// The auth token the server returned cannot be sent as gRPC metadata.
    #[error("invalid auth token from server")]
    BadToken,
    /// A stream ended before the answer it was opened for (Go's `io.EOF`).
    #[error("EOF")]
    Eof,
    /// A watch's start revision was compacted; the oldest revision still available.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted(i64),
    /// The server canceled a watch, with its reason.
    #[error("{0}")]
    WatchCanceled(String),
    /// A peer URL clientv3 refuses before asking the server (Go's words for why).
    #[error("{0}")]
    InvalidUrl(String),
    /// The server answered with an error.
    #[error("{}", status_text(.0))]
    Status(#[from] tonic::Status),
}

impl Error {
    /// The server's status, if the server answered.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Status(s) => Some(s),
            _ => None,
        }
    }
}

/// Go's name of a gRPC code (`codes.Code.String()`).
fn code_name(code: tonic::Code) -> String {
    match code {
        tonic::Code::Cancelled => "Canceled".to_string(),
        other => format!("{other:?}"),
    }
}

/// A call that failed because the connection failed, not because the server answered:
/// tonic reports it as `Unknown` "transport error", or, when the connection closed
/// while the request waited for it (a loaded server refusing a certificate after the
/// TLS 1.3 handshake), as hyper's `Cancelled` "operation was canceled".
fn is_transport_failure(s: &tonic::Status) -> bool {
    (s.code() == tonic::Code::Unknown && s.message() == "transport error")
        || (s.code() == tonic::Code::Cancelled && s.message().starts_with("operation was canceled"))
}

/// How clientv3 shows a status: the bare message for etcd's own errors (it maps them to
/// typed errors by their text; the auth store's errors that etcd passes on unconverted,
/// with code Unknown, are not among them), `context deadline exceeded` for deadlines, and gRPC's
/// `rpc error: code = ... desc = ...` for anything else.
fn status_text(s: &tonic::Status) -> String {
    let typed = oxcd_api::errors::EtcdError::from_message(s.message())
        .is_some_and(|e| e.code() != tonic::Code::Unknown);
    if typed {
        s.message().to_string()
    } else if s.code() == tonic::Code::DeadlineExceeded || is_transport_failure(s) {
        // grpc-go retries a connection the server closed (e.g. a client certificate it
        // refused after the TLS 1.3 handshake) until the deadline: etcdctl then says this.
        "context deadline exceeded".to_string()
    } else {
        format!(
            "rpc error: code = {} desc = {}",
            code_name(s.code()),
            s.message()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_clientv3() {
        let e = Error::from(tonic::Status::invalid_argument(
            "etcdserver: key is not provided",
        ));
        assert_eq!(e.to_string(), "etcdserver: key is not provided");
        let e = Error::from(tonic::Status::cancelled("gone"));
        assert_eq!(e.to_string(), "rpc error: code = Canceled desc = gone");
        let e = Error::from(tonic::Status::unavailable("no route"));
        assert_eq!(
            e.to_string(),
            "rpc error: code = Unavailable desc = no route"
        );
        let e = Error::from(tonic::Status::deadline_exceeded("slow"));
        assert_eq!(e.to_string(), "context deadline exceeded");
        let e = Error::from(tonic::Status::unknown("transport error"));
        assert_eq!(e.to_string(), "context deadline exceeded");
        let e = Error::from(tonic::Status::cancelled("operation was canceled"));
        assert_eq!(e.to_string(), "context deadline exceeded");
    }
}
