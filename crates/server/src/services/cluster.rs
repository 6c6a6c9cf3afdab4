//! The Cluster service: the member list (membership changes come with replication).

use std::sync::Arc;

use oxcd_api::etcdserverpb::cluster_server::Cluster;
use oxcd_api::etcdserverpb::{Member as PbMember, MemberListRequest, MemberListResponse};
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
        let me = PbMember {
            id: m.id.member_id,
            name: m.id.name.clone(),
            peer_ur_ls: m.id.peer_urls.clone(),
            client_ur_ls: m.id.client_urls.clone(),
            is_learner: false,
        };
        Ok(Response::new(MemberListResponse {
            header: Some(m.header(m.store.current_rev())),
            members: vec![me],
        }))
    }
}
