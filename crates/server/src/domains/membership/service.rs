//! The Cluster service, as etcd's: the member list, and membership changes (checked and
//! proposed by [`crate::domains::membership::requests`]). Changes need the root role while auth
//! is on; the list an authenticated user (as etcd 3.6.10+). Headers carry no revision, as
//! etcd's cluster headers.

use std::sync::Arc;

use oxcd_api::etcdserverpb::cluster_server::Cluster;
use oxcd_api::etcdserverpb::{
    Member as PbMember, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse, ResponseHeader,
};
use oxcd_api::oxcdpb::MemberInfo;
use tonic::{Request, Response, Status};

use crate::domains::auth::caller::name;
use crate::domains::membership::MembershipHandles;
use crate::domains::membership::requests;

/// The Cluster service.
pub struct ClusterService {
    membership: Arc<MembershipHandles>,
}

impl ClusterService {
    /// A Cluster service over `membership`.
    pub fn new(membership: Arc<MembershipHandles>) -> ClusterService {
        ClusterService { membership }
    }

    /// etcd's `checkMembershipOperationPermission`: root, while auth is on.
    async fn admin<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let callers = &self.membership.callers;
        let caller = callers.of(req).await?;
        callers.auth().state().check_admin(name(&caller))?;
        Ok(())
    }

    fn header(&self) -> Option<ResponseHeader> {
        Some(self.membership.reads.header(0))
    }
}

/// `members` as etcd lists them: with the names and client URLs they published.
pub fn listed(m: &MembershipHandles, members: &[MemberInfo]) -> Vec<PbMember> {
    let published = crate::domains::membership::published(m.reads.store());
    let me = m.reads.ids().member_id;
    members
        .iter()
        .map(|x| {
            let attrs = published.get(&x.id);
            let client_ur_ls = if x.id == me {
                m.client_urls.clone()
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
        .collect()
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        req: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        self.admin(&req).await?;
        let r = req.into_inner();
        let (added, members) = requests::add(&self.membership, &r.peer_ur_ls, r.is_learner).await?;
        Ok(Response::new(MemberAddResponse {
            header: self.header(),
            member: Some(PbMember {
                id: added.id,
                peer_ur_ls: added.peer_urls,
                is_learner: added.is_learner,
                ..Default::default()
            }),
            members: listed(&self.membership, &members),
        }))
    }

    async fn member_remove(
        &self,
        req: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        self.admin(&req).await?;
        let members = requests::remove(&self.membership, req.get_ref().id).await?;
        Ok(Response::new(MemberRemoveResponse {
            header: self.header(),
            members: listed(&self.membership, &members),
        }))
    }

    async fn member_update(
        &self,
        req: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        self.admin(&req).await?;
        let r = req.into_inner();
        let members = requests::update(&self.membership, r.id, &r.peer_ur_ls).await?;
        Ok(Response::new(MemberUpdateResponse {
            header: self.header(),
            members: listed(&self.membership, &members),
        }))
    }

    async fn member_list(
        &self,
        req: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        let m = &self.membership;
        if req.get_ref().linearizable {
            m.reads.barrier().await?;
        }
        // etcd 3.6.10+ (v3.6.14 server/etcdserver/server.go MemberList): after the
        // read, any authenticated user while auth is on; 3.5 checks nothing.
        if m.release.has_3_6() {
            m.callers.require_user(&req).await?;
        }
        Ok(Response::new(MemberListResponse {
            header: self.header(),
            members: listed(m, &m.roster.members()),
        }))
    }

    async fn member_promote(
        &self,
        req: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        self.admin(&req).await?;
        let members = requests::promote(&self.membership, req.get_ref().id).await?;
        Ok(Response::new(MemberPromoteResponse {
            header: self.header(),
            members: listed(&self.membership, &members),
        }))
    }
}
