//! etcd's client-visible errors, byte for byte, with their gRPC codes.
//!
//! Go clientv3 (and others) map errors to types by comparing the message text, so each
//! message here must equal etcd's exactly. Add new errors to the table, never inline
//! strings elsewhere.

use tonic::{Code, Status};

macro_rules! etcd_errors {
    ($( $(#[$doc:meta])* $name:ident => $code:ident, $msg:literal; )*) => {
        /// One of etcd's client-visible errors.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EtcdError {
            $( $(#[$doc])* $name, )*
        }

        impl EtcdError {
            /// Every error, for tests that check the whole table.
            pub const ALL: &'static [EtcdError] = &[ $( EtcdError::$name, )* ];

            /// The gRPC code etcd answers with.
            pub fn code(self) -> Code {
                match self { $( EtcdError::$name => Code::$code, )* }
            }

            /// The exact message etcd answers with.
            pub fn message(self) -> &'static str {
                match self { $( EtcdError::$name => $msg, )* }
            }

            /// The error's name: a code that stays the same whatever its message says
            /// (oxcd's peers send it beside the message: see the server's `peer::Refusal`).
            pub fn name(self) -> &'static str {
                match self { $( EtcdError::$name => stringify!($name), )* }
            }

            /// The error with this [`EtcdError::name`].
            pub fn from_name(name: &str) -> Option<EtcdError> {
                EtcdError::ALL.iter().copied().find(|e| e.name() == name)
            }

            /// Finds the error with this exact message (used by clients to map a status back).
            pub fn from_message(message: &str) -> Option<EtcdError> {
                EtcdError::ALL.iter().copied().find(|e| e.message() == message)
            }
        }
    };
}

etcd_errors! {
    EmptyKey => InvalidArgument, "etcdserver: key is not provided";
    KeyNotFound => InvalidArgument, "etcdserver: key not found";
    ValueProvided => InvalidArgument, "etcdserver: value is provided";
    LeaseProvided => InvalidArgument, "etcdserver: lease is provided";
    TooManyOps => InvalidArgument, "etcdserver: too many operations in txn request";
    DuplicateKey => InvalidArgument, "etcdserver: duplicate key given in txn request";
    InvalidSortOption => InvalidArgument, "etcdserver: invalid sort option";
    RequestTooLarge => InvalidArgument, "etcdserver: request is too large";
    MemberBadUrls => InvalidArgument, "etcdserver: given member URLs are invalid";
    UserEmpty => InvalidArgument, "etcdserver: user name is empty";
    RoleEmpty => InvalidArgument, "etcdserver: role name is empty";
    AuthFailed => InvalidArgument, "etcdserver: authentication failed, invalid user ID or password";
    PermissionNotGiven => InvalidArgument, "etcdserver: permission not given";
    InvalidAuthMgmt => InvalidArgument, "etcdserver: invalid auth management";
    AuthOldRevision => InvalidArgument, "etcdserver: revision of auth store is old";
    InvalidDowngradeTargetVersion => InvalidArgument, "etcdserver: invalid downgrade target version";
    WrongDowngradeVersionFormat => InvalidArgument, "etcdserver: wrong downgrade target version format";
    Compacted => OutOfRange, "etcdserver: mvcc: required revision has been compacted";
    FutureRev => OutOfRange, "etcdserver: mvcc: required revision is a future revision";
    LeaseTtlTooLarge => OutOfRange, "etcdserver: too large lease TTL";
    NoSpace => ResourceExhausted, "etcdserver: mvcc: database space exceeded";
    TooManyRequests => ResourceExhausted, "etcdserver: too many requests";
    LeaseNotFound => NotFound, "etcdserver: requested lease not found";
    MemberNotFound => NotFound, "etcdserver: member not found";
    LeaseExist => FailedPrecondition, "etcdserver: lease already exists";
    MemberExist => FailedPrecondition, "etcdserver: member ID already exist";
    PeerUrlExist => FailedPrecondition, "etcdserver: Peer URLs already exists";
    MemberNotEnoughStarted => FailedPrecondition, "etcdserver: re-configuration failed due to not enough started members";
    MemberNotLearner => FailedPrecondition, "etcdserver: can only promote a learner member";
    LearnerNotReady => FailedPrecondition, "etcdserver: can only promote a learner member which is in sync with leader";
    TooManyLearners => FailedPrecondition, "etcdserver: too many learner members in cluster";
    ClusterIdMismatch => FailedPrecondition, "etcdserver: cluster ID mismatch";
    RootUserNotExist => FailedPrecondition, "etcdserver: root user does not exist";
    RootRoleNotExist => FailedPrecondition, "etcdserver: root user does not have root role";
    UserAlreadyExist => FailedPrecondition, "etcdserver: user name already exists";
    UserNotFound => FailedPrecondition, "etcdserver: user name not found";
    RoleAlreadyExist => FailedPrecondition, "etcdserver: role name already exists";
    RoleNotFound => FailedPrecondition, "etcdserver: role name not found";
    RoleNotGranted => FailedPrecondition, "etcdserver: role is not granted to the user";
    PermissionNotGranted => FailedPrecondition, "etcdserver: permission is not granted to the role";
    AuthNotEnabled => FailedPrecondition, "etcdserver: authentication is not enabled";
    NotLeader => FailedPrecondition, "etcdserver: not leader";
    NotCapable => FailedPrecondition, "etcdserver: not capable";
    LearnerNotSupported => FailedPrecondition, "etcdserver: rpc not supported for learner";
    BadLeaderTransferee => FailedPrecondition, "etcdserver: bad leader transferee";
    ClusterVersionUnavailable => FailedPrecondition, "etcdserver: cluster version not found during downgrade";
    DowngradeInProcess => FailedPrecondition, "etcdserver: cluster has a downgrade job in progress";
    NoInflightDowngrade => FailedPrecondition, "etcdserver: no inflight downgrade job";
    PermissionDenied => PermissionDenied, "etcdserver: permission denied";
    InvalidAuthToken => Unauthenticated, "etcdserver: invalid auth token";
    NoLeader => Unavailable, "etcdserver: no leader";
    LeaderChanged => Unavailable, "etcdserver: leader changed";
    Stopped => Unavailable, "etcdserver: server stopped";
    Timeout => Unavailable, "etcdserver: request timed out";
    TimeoutDueToLeaderFail => Unavailable, "etcdserver: request timed out, possibly due to previous leader failure";
    TimeoutDueToConnectionLost => Unavailable, "etcdserver: request timed out, possibly due to connection lost";
    TimeoutWaitAppliedIndex => Unavailable, "etcdserver: request timed out, waiting for the applied index took too long";
    Unhealthy => Unavailable, "etcdserver: unhealthy cluster";
    Corrupt => DataLoss, "etcdserver: corrupt cluster";
    WatchCanceled => Cancelled, "etcdserver: watch canceled";
    Canceled => Cancelled, "etcdserver: request canceled";
    DeadlineExceeded => DeadlineExceeded, "context deadline exceeded";
    /// A Downgrade action etcd does not know (etcd's `ErrUnknownMethod`).
    UnknownMethod => Unknown, "etcdserver: unknown method";
    /// Not one of etcd's gRPC errors: its auth store's own, which reaches clients with
    /// code Unknown (a password for a user added without one, or a malformed hash).
    NoPasswordUser => Unknown, "auth: authentication failed, password was given for no password user";
    /// The auth store's errors as etcd's Maintenance service passes them on, unconverted
    /// (code Unknown): see [`EtcdError::unconverted`].
    RawUserEmpty => Unknown, "auth: user name is empty";
    RawUserNotFound => Unknown, "auth: user not found";
    RawPermissionDenied => Unknown, "auth: permission denied";
    RawInvalidAuthToken => Unknown, "auth: invalid auth token";
    /// Authenticate on a member given only a JWT public key (etcd's ErrVerifyOnly,
    /// unconverted: code Unknown).
    JwtVerifyOnly => Unknown, "auth: token signing attempted with verify-only key";
    /// Authenticate when the JWT key is on another curve than the ES* method's
    /// (golang-jwt's ErrInvalidKey, code Unknown).
    JwtInvalidKey => Unknown, "key is invalid";
}

impl EtcdError {
    /// The auth store's own error behind one of etcd's auth errors, as the etcd services
    /// that skip the conversion answer it (Maintenance's Hash, HashKV, Snapshot and
    /// Defragment); other errors are unchanged.
    pub fn unconverted(self) -> EtcdError {
        match self {
            EtcdError::UserEmpty => EtcdError::RawUserEmpty,
            EtcdError::UserNotFound => EtcdError::RawUserNotFound,
            EtcdError::PermissionDenied => EtcdError::RawPermissionDenied,
            EtcdError::InvalidAuthToken => EtcdError::RawInvalidAuthToken,
            other => other,
        }
    }
}

impl From<EtcdError> for Status {
    fn from(e: EtcdError) -> Status {
        Status::new(e.code(), e.message())
    }
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for EtcdError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_unique_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for e in EtcdError::ALL {
            assert!(
                seen.insert(e.message()),
                "duplicate message {}",
                e.message()
            );
            if *e != EtcdError::DeadlineExceeded {
                let m = e.message();
                let raw = e.code() == Code::Unknown
                    && (m.starts_with("auth: ") || *e == EtcdError::JwtInvalidKey);
                assert!(m.starts_with("etcdserver: ") || raw, "{e:?}");
            }
        }
    }

    #[test]
    fn status_carries_code_and_exact_message() {
        let s = Status::from(EtcdError::Compacted);
        assert_eq!(s.code(), Code::OutOfRange);
        assert_eq!(
            s.message(),
            "etcdserver: mvcc: required revision has been compacted"
        );
        assert_eq!(
            EtcdError::from_message(s.message()),
            Some(EtcdError::Compacted)
        );
    }
}
