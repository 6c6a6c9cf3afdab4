//! The workloads: each defines its flags and turns them into requests for [`crate::driver`] (or, for
//! streams, runs its own loop) and returns a [`crate::stats::Report`].

pub mod auth;
pub mod kv;
pub mod lease;
pub mod skim;
pub mod txn;
pub mod watch;

/// Whether a failure means the server does not implement the service at all.
pub fn unimplemented(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::Unimplemented
}
