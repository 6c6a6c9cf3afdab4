//! Alarms as replicated state. Raising or clearing one goes through raft, so every member
//! holds the same set in its backend (`alarm/<member>/<type>` meta keys) and refuses the
//! same requests: while a CORRUPT alarm is raised, writes and compactions fail with
//! "etcdserver: corrupt cluster" (reads still answer, as in etcd).

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{AlarmMember, AlarmRequest, AlarmType};
use oxcd_mvcc::{ApplyBatch, Store};
use oxcd_storage::schema::META_ALARM_PREFIX;

use super::{Applied, ApplyError, storage_err};

fn key(member: u64, alarm: i32) -> String {
    format!("{META_ALARM_PREFIX}{member:016x}/{alarm}")
}

fn parse(key: &str) -> Option<AlarmMember> {
    let (member, alarm) = key.strip_prefix(META_ALARM_PREFIX)?.split_once('/')?;
    Some(AlarmMember {
        member_id: u64::from_str_radix(member, 16).ok()?,
        alarm: alarm.parse().ok()?,
    })
}

fn raised_in(batch: &ApplyBatch<'_>) -> Result<Vec<AlarmMember>, ApplyError> {
    Ok(batch
        .meta_keys(META_ALARM_PREFIX)
        .map_err(storage_err)?
        .iter()
        .filter_map(|k| parse(k))
        .collect())
}

/// Applies an alarm request: activate or deactivate one alarm. Like etcd, the response
/// lists the alarm changed (none if deactivating one that was not raised).
pub fn apply(batch: &mut ApplyBatch<'_>, req: &AlarmRequest) -> Result<Applied, ApplyError> {
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
            batch.put_meta(&k, &[]).map_err(storage_err)?;
            tracing::warn!(
                member = %format!("{:x}", req.member_id),
                alarm = ?req.alarm(),
                "alarm raised"
            );
            Ok(Applied::Alarm(vec![member]))
        }
        AlarmAction::Deactivate => {
            let was = raised_in(batch)?.contains(&member);
            batch.delete_meta(&k).map_err(storage_err)?;
            if was {
                tracing::info!(
                    member = %format!("{:x}", req.member_id),
                    alarm = ?req.alarm(),
                    "alarm cleared"
                );
            }
            Ok(Applied::Alarm(if was { vec![member] } else { Vec::new() }))
        }
        AlarmAction::Get => Ok(Applied::Alarm(raised_in(batch)?)),
    }
}

/// Refuses a write while a CORRUPT alarm is raised.
pub fn check_writable(batch: &ApplyBatch<'_>) -> Result<(), ApplyError> {
    if raised_in(batch)?
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
