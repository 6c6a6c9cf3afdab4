//! The Cluster service: the member list (membership changes come with replication).

use std::sync::Arc;

use oxcd_api::etcdserverpb::cluster_server::Cluster;
use oxcd_api::etcdserverpb::{Member as PbMember, MemberListRequest, MemberListResponse};
use oxcd_api::oxcdpb::MemberAttributes;
use prost::Message as _;
use tonic::{Request, Response, Status};

use crate::member::Member;

/// The Cluster service.
pub struct ClusterService {
    member: Arc<Member>,
}

impl ClusterService {
    /// A Cluster service for `member`.
    pub fn new(member: Arc<Member>) -> ClusterService {
        ClusterService { member }
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_list(
        &self,
        _req: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        let m = &self.member;
        let published = published_attributes(m);
        // The replicated membership; a backend from before it: the bootstrap list.
        let known: Vec<_> = {
            let state = m.membership.state();
            if state.members.is_empty() {
                m.id.members.clone()
            } else {
                state.members.values().cloned().collect()
            }
        };
        let members = known
            .iter()
            .map(|x| {
                let attrs = published.get(&x.id);
                let client_ur_ls = if x.id == m.id.member_id {
                    m.id.client_urls.clone()
                } else {
                    attrs
                        .map(|a| a.client_urls.clone())
                        .unwrap_or_else(|| x.client_urls.clone())
                };
                PbMember {
                    id: x.id,
                    name: attrs
                        .map(|a| a.name.clone())
                        .unwrap_or_else(|| x.name.clone()),
                    peer_ur_ls: x.peer_urls.clone(),
                    client_ur_ls,
                    is_learner: x.is_learner,
                }
            })
            .collect();
        Ok(Response::new(MemberListResponse {
            header: Some(m.header(m.store.current_rev())),
            members,
        }))
    }
}

/// The attributes members have published through raft, by member id.
fn published_attributes(m: &Member) -> std::collections::HashMap<u64, MemberAttributes> {
    let prefix = oxcd_storage::schema::META_MEMBER_ATTRIBUTES_PREFIX;
    let rows = m.store.read_meta_prefix(prefix).unwrap_or_else(|e| {
        tracing::warn!("cannot read member attributes: {e}");
        Vec::new()
    });
    rows.into_iter()
        .filter_map(|(_, v)| MemberAttributes::decode(v.as_slice()).ok())
        .map(|a| (a.id, a))
        .collect()
}
