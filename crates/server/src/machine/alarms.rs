//! Alarms as replicated state. Raising or clearing one goes through raft, so every member
//! holds the same set in its backend (`alarm/<member>/<type>` meta keys) and refuses the
//! same requests, as etcd's capped appliers do:
//! - while a CORRUPT alarm is raised, writes, compactions, lease grants and lease
//!   revocations (a client's or an expiry's) fail with "etcdserver: corrupt cluster"
//!   (reads still answer), as etcd's `applierV3Corrupt`: a member that revoked what
//!   the others refuse would diverge from them;
//! - while a NOSPACE alarm is raised (by any member), requests that cost space
//!   ([`crate::machine::quota::cost`]: puts, txns with a put, lease grants) fail with "etcdserver:
//!   mvcc: database space exceeded"; reads, deletes, txns without puts, compactions,
//!   lease revocations and keepalives, alarm, auth and member requests pass, so that an
//!   operator can free space and then disarm the alarm.
//!
//! Whether a request is refused depends only on the request and the replicated alarms,
//! never on the backend's size. etcd also applies a put, txn or grant that arrives while
//! the database is over the quota without an alarm and answers it with NOSPACE (raising
//! the alarm after); oxcd does not: each member's file has its own size, so a check of
//! it while applying could differ between members. The check of the size is the
//! receiving member's, before proposing ([`crate::machine::writes::Writes::admit`]).

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{AlarmMember, AlarmRequest, AlarmType};
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_mvcc::Store;
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema::META_ALARM_PREFIX;

use super::applied::Applied;
use super::applier::ApplyError;

/// The meta key that records alarm `alarm` (an `AlarmType` number) of `member`.
pub fn key(member: u64, alarm: i32) -> String {
    format!("{META_ALARM_PREFIX}{member:016x}/{alarm}")
}

/// The alarm an `alarm/<member>/<type>` meta key records.
pub(crate) fn parse(key: &str) -> Option<AlarmMember> {
    let (member, alarm) = key.strip_prefix(META_ALARM_PREFIX)?.split_once('/')?;
    Some(AlarmMember {
        member_id: u64::from_str_radix(member, 16).ok()?,
        alarm: alarm.parse().ok()?,
    })
}

fn raised_in(tx: &BatchTx<'_>) -> Result<Vec<AlarmMember>, ApplyError> {
    Ok(tx
        .meta_keys(META_ALARM_PREFIX)?
        .iter()
        .filter_map(|k| parse(k))
        .collect())
}

/// Applies an alarm request: activate or deactivate one alarm. Like etcd, the response
/// lists the alarm changed (none if deactivating one that was not raised).
pub fn apply(tx: &BatchTx<'_>, req: &AlarmRequest) -> Result<Applied, ApplyError> {
    let member = AlarmMember {
        member_id: req.member_id,
        alarm: req.alarm,
    };
    let k = key(req.member_id, req.alarm);
    match req.action() {
        AlarmAction::Activate => {
            if req.alarm() == AlarmType::None {
                return Ok(Applied::Alarm(Vec::new()));
            }
            tx.put_meta(&k, &[])?;
            tracing::warn!(
                member = %format!("{:x}", req.member_id),
                alarm = ?req.alarm(),
                "alarm raised"
            );
            Ok(Applied::Alarm(vec![member]))
        }
        AlarmAction::Deactivate => {
            let was = raised_in(tx)?.contains(&member);
            tx.delete_meta(&k)?;
            if was {
                tracing::info!(
                    member = %format!("{:x}", req.member_id),
                    alarm = ?req.alarm(),
                    "alarm cleared"
                );
            }
            Ok(Applied::Alarm(if was { vec![member] } else { Vec::new() }))
        }
        AlarmAction::Get => Ok(Applied::Alarm(raised_in(tx)?)),
    }
}

/// Refuses `op` if a raised alarm forbids it (see the module's doc); CORRUPT is
/// checked first.
pub fn check_allowed(tx: &BatchTx<'_>, op: &Op) -> Result<(), ApplyError> {
    let writes = matches!(
        op,
        Op::Put(_)
            | Op::DeleteRange(_)
            | Op::Txn(_)
            | Op::Compaction(_)
            | Op::LeaseGrant(_)
            | Op::LeaseRevoke(_)
            | Op::LeaseExpire(_)
    );
    if !writes {
        return Ok(());
    }
    let raised = raised_in(tx)?;
    let any = |t: AlarmType| raised.iter().any(|a| a.alarm() == t);
    if any(AlarmType::Corrupt) {
        return Err(ApplyError::Request(EtcdError::Corrupt));
    }
    if any(AlarmType::Nospace) && crate::machine::quota::cost(op) > 0 {
        return Err(ApplyError::Request(EtcdError::NoSpace));
    }
    Ok(())
}

/// The alarms raised, as this member has applied them.
pub fn raised(store: &Store) -> Result<Vec<AlarmMember>, EtcdError> {
    Ok(store
        .read_meta_prefix(META_ALARM_PREFIX)
        .map_err(super::applier::mvcc_err)?
        .iter()
        .filter_map(|(k, _)| parse(k))
        .collect())
}

/// etcd's text for an alarm in Status.errors (Go's proto text form).
pub fn describe(a: &AlarmMember) -> String {
    format!(
        "memberID:{} alarm:{} ",
        a.member_id,
        a.alarm().as_str_name()
    )
}
