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
        let members =
            m.id.members
                .iter()
                .map(|x| {
                    // Client URLs are known for this member; others' come with member attributes.
                    let client = if x.id == m.id.member_id {
                        m.id.client_urls.clone()
                    } else {
                        x.client_urls.clone()
                    };
                    PbMember {
                        id: x.id,
                        name: x.name.clone(),
                        peer_ur_ls: x.peer_urls.clone(),
                        client_ur_ls: client,
                        is_learner: false,
                    }
                })
                .collect();
        Ok(Response::new(MemberListResponse {
            header: Some(m.header(m.store.current_rev())),
            members,
        }))
    }
}
