//! Convenience calls for the requests a CLI or a program makes most: each sends one
//! request under the client's request timeout and returns the response or an [`Error`].

use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{
    AlarmRequest, AlarmResponse, CompactionRequest, CompactionResponse, DefragmentRequest,
    DefragmentResponse, DeleteRangeRequest, DeleteRangeResponse, DowngradeRequest,
    DowngradeResponse, HashKvRequest, HashKvResponse, LeaseGrantRequest, LeaseGrantResponse,
    LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseLeasesRequest, LeaseLeasesResponse,
    LeaseRevokeRequest, LeaseRevokeResponse, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
    MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse, MoveLeaderRequest, MoveLeaderResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, StatusRequest, StatusResponse, TxnRequest,
    TxnResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

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

    /// `Maintenance.Defragment` of the connected endpoint.
    pub async fn defragment(&self) -> Result<DefragmentResponse, Error> {
        self.bounded(self.maintenance().defragment(DefragmentRequest {}))
            .await
    }

    /// `Maintenance.MoveLeader` to member `target_id`.
    pub async fn move_leader(&self, target_id: u64) -> Result<MoveLeaderResponse, Error> {
        self.bounded(
            self.maintenance()
                .move_leader(MoveLeaderRequest { target_id }),
        )
        .await
    }

    /// `Maintenance.Downgrade` (etcd 3.6): `action` with its target `version` (empty
    /// for a cancel).
    pub async fn downgrade(
        &self,
        action: oxcd_api::etcdserverpb::downgrade_request::DowngradeAction,
        version: &str,
    ) -> Result<DowngradeResponse, Error> {
        self.bounded(self.maintenance().downgrade(DowngradeRequest {
            action: action as i32,
            version: version.to_string(),
        }))
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

    /// `Cluster.MemberAdd` of a member with `peer_urls` (a learner if `is_learner`). The
    /// URLs are checked first as clientv3 checks them ([`crate::check_peer_urls`]) and
    /// sent as given.
    pub async fn member_add(
        &self,
        peer_urls: Vec<String>,
        is_learner: bool,
    ) -> Result<MemberAddResponse, Error> {
        crate::check_peer_urls(&peer_urls)?;
        let req = MemberAddRequest {
            peer_ur_ls: peer_urls,
            is_learner,
        };
        self.bounded(self.cluster().member_add(req)).await
    }

    /// `Cluster.MemberRemove` of member `id`.
    pub async fn member_remove(&self, id: u64) -> Result<MemberRemoveResponse, Error> {
        self.bounded(self.cluster().member_remove(MemberRemoveRequest { id }))
            .await
    }

    /// `Cluster.MemberUpdate`: member `id`'s peer URLs become `peer_urls` (checked first
    /// as clientv3 checks them, then sent as given).
    pub async fn member_update(
        &self,
        id: u64,
        peer_urls: Vec<String>,
    ) -> Result<MemberUpdateResponse, Error> {
        crate::check_peer_urls(&peer_urls)?;
        let req = MemberUpdateRequest {
            id,
            peer_ur_ls: peer_urls,
        };
        self.bounded(self.cluster().member_update(req)).await
    }

    /// `Cluster.MemberPromote`: learner `id` becomes a voting member.
    pub async fn member_promote(&self, id: u64) -> Result<MemberPromoteResponse, Error> {
        self.bounded(self.cluster().member_promote(MemberPromoteRequest { id }))
            .await
    }

    /// `Lease.LeaseGrant` of `ttl` seconds; `id` 0 lets the server choose the id.
    pub async fn lease_grant(&self, ttl: i64, id: i64) -> Result<LeaseGrantResponse, Error> {
        self.bounded(self.lease().lease_grant(LeaseGrantRequest { ttl, id }))
            .await
    }

    /// `Lease.LeaseRevoke`: the lease ends and its keys are deleted.
    pub async fn lease_revoke(&self, id: i64) -> Result<LeaseRevokeResponse, Error> {
        self.bounded(self.lease().lease_revoke(LeaseRevokeRequest { id }))
            .await
    }

    /// `Lease.LeaseTimeToLive`; `keys`: with the keys attached to the lease.
    pub async fn lease_time_to_live(
        &self,
        id: i64,
        keys: bool,
    ) -> Result<LeaseTimeToLiveResponse, Error> {
        self.bounded(
            self.lease()
                .lease_time_to_live(LeaseTimeToLiveRequest { id, keys }),
        )
        .await
    }

    /// `Lease.LeaseLeases`: every lease.
    pub async fn leases(&self) -> Result<LeaseLeasesResponse, Error> {
        self.bounded(self.lease().lease_leases(LeaseLeasesRequest {}))
            .await
    }

    /// Opens a `Lease.LeaseKeepAlive` stream with a keepalive of lease `first` already
    /// sent (a server answers a stream's headers with its first message). More
    /// keepalives go through the sender; the stream stays open while the sender lives.
    pub async fn lease_keep_alive(
        &self,
        first: i64,
    ) -> Result<
        (
            mpsc::Sender<LeaseKeepAliveRequest>,
            tonic::Streaming<LeaseKeepAliveResponse>,
        ),
        Error,
    > {
        let (tx, rx) = mpsc::channel(16);
        // The receiver is alive: this cannot fail.
        let _ = tx.try_send(LeaseKeepAliveRequest { id: first });
        let stream = self
            .bounded(self.lease().lease_keep_alive(ReceiverStream::new(rx)))
            .await?;
        Ok((tx, stream))
    }

    /// Renews lease `id` once: the first answer of a keep-alive stream. A TTL of 0 or
    /// less means the lease was not found (the server answers rather than fails).
    pub async fn lease_keep_alive_once(&self, id: i64) -> Result<LeaseKeepAliveResponse, Error> {
        let once = async {
            let (_tx, mut stream) = self.lease_keep_alive(id).await?;
            match stream.message().await {
                Ok(Some(resp)) => Ok(resp),
                Ok(None) => Err(Error::Eof),
                Err(s) => Err(Error::Status(s)),
            }
        };
        tokio::time::timeout(self.request_timeout, once)
            .await
            .unwrap_or(Err(Error::DeadlineExceeded))
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
