//! Convenience calls for the requests a CLI or a program makes most: each sends one
//! request under the client's request timeout and returns the response or an [`Error`].

use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{
    AlarmRequest, AlarmResponse, CompactionRequest, CompactionResponse, DeleteRangeRequest,
    DeleteRangeResponse, HashKvRequest, HashKvResponse, MemberListRequest, MemberListResponse,
    MoveLeaderRequest, MoveLeaderResponse, PutRequest, PutResponse, RangeRequest, RangeResponse,
    StatusRequest, StatusResponse, TxnRequest, TxnResponse,
};

use crate::{Client, Error};

impl Client {
    /// `KV.Range` with a full request.
    pub async fn range(&self, req: RangeRequest) -> Result<RangeResponse, Error> {
        self.bounded(self.kv().range(req)).await
    }

    /// Reads one key (linearizable).
    pub async fn get(&self, key: impl Into<Vec<u8>>) -> Result<RangeResponse, Error> {
        self.range(RangeRequest {
            key: key.into(),
            ..Default::default()
        })
        .await
    }

    /// Reads every key starting with `prefix`.
    pub async fn get_prefix(&self, prefix: impl Into<Vec<u8>>) -> Result<RangeResponse, Error> {
        let key = prefix.into();
        let range_end = prefix_end(&key);
        self.range(RangeRequest {
            key,
            range_end,
            ..Default::default()
        })
        .await
    }

    /// `KV.Put` with a full request.
    pub async fn put_request(&self, req: PutRequest) -> Result<PutResponse, Error> {
        self.bounded(self.kv().put(req)).await
    }

    /// Writes one key.
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Result<PutResponse, Error> {
        self.put_request(PutRequest {
            key: key.into(),
            value: value.into(),
            ..Default::default()
        })
        .await
    }

    /// `KV.DeleteRange` with a full request.
    pub async fn delete_range(
        &self,
        req: DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, Error> {
        self.bounded(self.kv().delete_range(req)).await
    }

    /// Deletes one key.
    pub async fn delete(&self, key: impl Into<Vec<u8>>) -> Result<DeleteRangeResponse, Error> {
        self.delete_range(DeleteRangeRequest {
            key: key.into(),
            ..Default::default()
        })
        .await
    }

    /// `KV.Txn`.
    pub async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, Error> {
        self.bounded(self.kv().txn(req)).await
    }

    /// `KV.Compact` up to `revision`; `physical` waits until the old revisions are gone.
    pub async fn compact(
        &self,
        revision: i64,
        physical: bool,
    ) -> Result<CompactionResponse, Error> {
        self.bounded(self.kv().compact(CompactionRequest { revision, physical }))
            .await
    }

    /// `Maintenance.Status` of the connected endpoint.
    pub async fn status(&self) -> Result<StatusResponse, Error> {
        self.bounded(self.maintenance().status(StatusRequest {}))
            .await
    }

    /// `Maintenance.HashKV` up to `revision` (0: all).
    pub async fn hash_kv(&self, revision: i64) -> Result<HashKvResponse, Error> {
        self.bounded(self.maintenance().hash_kv(HashKvRequest { revision }))
            .await
    }

    /// `Maintenance.Alarm` with `GET`: the active alarms.
    pub async fn alarm_list(&self) -> Result<AlarmResponse, Error> {
        let req = AlarmRequest {
            action: AlarmAction::Get as i32,
            member_id: 0,
            alarm: 0,
        };
        self.bounded(self.maintenance().alarm(req)).await
    }

    /// `Maintenance.MoveLeader` to member `target_id`.
    pub async fn move_leader(&self, target_id: u64) -> Result<MoveLeaderResponse, Error> {
        self.bounded(
            self.maintenance()
                .move_leader(MoveLeaderRequest { target_id }),
        )
        .await
    }

    /// `Cluster.MemberList`.
    pub async fn member_list(&self, linearizable: bool) -> Result<MemberListResponse, Error> {
        self.bounded(
            self.cluster()
                .member_list(MemberListRequest { linearizable }),
        )
        .await
    }
}

/// The end of the range covering every key with `prefix` (etcd's `GetPrefixRangeEnd`):
/// the prefix with its last byte below 0xff incremented; `\0` (all keys) if none is.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(&[b'a', 0xff]), b"b");
        assert_eq!(prefix_end(&[0xff, 0xff]), vec![0]);
    }
}
