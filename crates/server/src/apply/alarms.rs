//! Alarms as replicated state. Raising or clearing one goes through raft, so every member
//! holds the same set in its backend (`alarm/<member>/<type>` meta keys) and refuses the
//! same requests: while a CORRUPT alarm is raised, writes and compactions fail with
//! "etcdserver: corrupt cluster" (reads still answer, as in etcd).

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{AlarmMember, AlarmRequest, AlarmType};
use oxcd_mvcc::Store;
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema::META_ALARM_PREFIX;

use super::{Applied, ApplyError};

fn key(member: u64, alarm: i32) -> String {
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

/// Refuses a write while a CORRUPT alarm is raised.
pub fn check_writable(tx: &BatchTx<'_>) -> Result<(), ApplyError> {
    if raised_in(tx)?
        .iter()
        .any(|a| a.alarm() == AlarmType::Corrupt)
    {
        return Err(ApplyError::Request(EtcdError::Corrupt));
    }
    Ok(())
}

/// The alarms raised, as this member has applied them.
pub fn raised(store: &Store) -> Result<Vec<AlarmMember>, EtcdError> {
    Ok(store
        .read_meta_prefix(META_ALARM_PREFIX)
        .map_err(super::mvcc_err)?
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
