//! The Auth service. Changes (enable, disable, users, roles, permissions) go through
//! raft; reads (status, get, list) are answered by any member after the ReadIndex
//! barrier, from its auth store. Passwords are hashed here, on the blocking pool, before
//! the proposal (bcrypt never runs in the apply loop, and the log never holds a
//! password); Authenticate checks the password here too and proposes only the success,
//! retrying if the auth store changed meanwhile, as etcd does, and signs JWTs once the
//! success is applied.

use std::sync::Arc;
use std::time::SystemTime;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::auth_server::Auth;
use oxcd_api::etcdserverpb::*;
use oxcd_api::oxcdpb::{AuthenticateOp, RequestAuth};
use tonic::{Request, Response, Status};

use crate::domains::auth::caller::{Callers, name};
use crate::machine::proposal::Free;
use crate::machine::reads::Reads;
use crate::machine::writes::Writes;
use oxcd_auth::AuthStore;
use oxcd_auth::jwt::SignError;
use oxcd_auth::password;
use oxcd_auth::provider::TokenProvider;
use oxcd_auth::{no_password, tokens};

/// Passwords checked and a token made at most this many times when the auth store keeps
/// changing under an Authenticate (etcd retries without bound).
const AUTHENTICATE_TRIES: usize = 8;

/// The Auth service.
pub struct AuthService {
    auth: Arc<AuthStore>,
    callers: Callers,
    reads: Reads,
    writes: Writes,
}

impl AuthService {
    /// An Auth service over the store `callers` check against, reading through
    /// `reads` and proposing through `writes`.
    pub fn new(callers: Callers, reads: Reads, writes: Writes) -> AuthService {
        AuthService {
            auth: callers.auth().clone(),
            callers,
            reads,
            writes,
        }
    }

    fn header(&self) -> Option<ResponseHeader> {
        Some(self.reads.header_now())
    }

    /// Proposes an auth change for the caller of `req` (made into `op`) and waits for
    /// it to be applied; the admin check is made when it is applied.
    async fn change<T: Free<Answer = ResponseHeader>>(
        &self,
        req: Request<T>,
    ) -> Result<Option<ResponseHeader>, Status> {
        let caller = self.callers.of(&req).await?;
        let header = self.writes.propose(req.into_inner(), caller).await?;
        Ok(Some(header))
    }

    /// The ReadIndex barrier, then the caller of `req`: what every auth read starts
    /// with.
    async fn reader<T>(&self, req: &Request<T>) -> Result<Option<RequestAuth>, Status> {
        self.reads.barrier().await?;
        Ok(self.callers.of(req).await?)
    }

    /// [`AuthService::reader`] and the admin check (auth status and the lists need a
    /// root user while auth is on).
    async fn admin_read<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let caller = self.reader(req).await?;
        self.auth.state().check_admin(name(&caller))?;
        Ok(())
    }

    /// A JWT for `name` at auth revision `revision`, signed on the blocking pool (RSA
    /// takes milliseconds); etcd's errors (code Unknown) when it cannot be made.
    async fn sign(&self, name: &str, revision: u64) -> Result<String, Status> {
        let auth = self.auth.clone();
        let name = name.to_string();
        let signed = tokio::task::spawn_blocking(move || match &auth.tokens {
            TokenProvider::Jwt(jwt) => Some(jwt.sign(&name, revision, SystemTime::now())),
            _ => None,
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        match signed {
            Some(Ok(token)) => Ok(token),
            Some(Err(SignError::VerifyOnly)) => Err(EtcdError::JwtVerifyOnly.into()),
            Some(Err(SignError::InvalidKey)) => Err(EtcdError::JwtInvalidKey.into()),
            Some(Err(SignError::Failed(e))) => Err(Status::unknown(e)),
            None => Err(Status::internal(
                "no token was recorded for an Authenticate",
            )),
        }
    }

    /// `password` hashed with bcrypt and base64-encoded, as etcd 3.5's `hashedPassword`.
    async fn hash(&self, password: String) -> Result<String, Status> {
        let cost = self.auth.bcrypt_cost;
        tokio::task::spawn_blocking(move || password::hash(&password, cost))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::unknown(e.to_string()))
    }

    /// Checks `password` for `name` as etcd's CheckPassword: the revision it was checked
    /// at, or why it failed.
    async fn check_password(&self, name: &str, password: String) -> Result<u64, Status> {
        let (hash, revision) = {
            let state = self.auth.state();
            if !state.enabled {
                return Err(EtcdError::AuthNotEnabled.into());
            }
            let user = state.users.get(name).ok_or(EtcdError::AuthFailed)?;
            if no_password(user) {
                return Err(EtcdError::NoPasswordUser.into());
            }
            (user.password.clone(), state.revision)
        };
        let cache = &self.auth.passwords;
        if cache.verified(name, &hash, &password) {
            return Ok(revision);
        }
        let (ok, hash, password) = tokio::task::spawn_blocking(move || {
            let ok = password::matches(&hash, &password);
            (ok, hash, password)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        match ok {
            Some(true) => {
                cache.remember(name, &hash, &password);
                Ok(revision)
            }
            _ => Err(EtcdError::AuthFailed.into()),
        }
    }
}

type Answer<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(&self, req: Request<AuthEnableRequest>) -> Answer<AuthEnableResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthEnableResponse { header }))
    }

    async fn auth_disable(&self, req: Request<AuthDisableRequest>) -> Answer<AuthDisableResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthDisableResponse { header }))
    }

    async fn auth_status(&self, req: Request<AuthStatusRequest>) -> Answer<AuthStatusResponse> {
        self.admin_read(&req).await?;
        let (enabled, auth_revision) = {
            let s = self.auth.state();
            (s.enabled, s.revision)
        };
        Ok(Response::new(AuthStatusResponse {
            header: self.header(),
            enabled,
            auth_revision,
        }))
    }

    /// etcd's Authenticate: the password is checked, the success proposed; once it is
    /// applied, a simple token is the one every member recorded, and a JWT is signed
    /// here, with the auth revision the entry applied at. (etcd signs JWTs inside its
    /// apply loop, on every member, each signature thrown away but the proposer's; oxcd
    /// signs once, on the blocking pool, outside the apply loop.) If the auth store
    /// changed between the check and the apply, the password is checked again.
    async fn authenticate(
        &self,
        req: Request<AuthenticateRequest>,
    ) -> Answer<AuthenticateResponse> {
        self.reads.barrier().await?;
        let r = req.into_inner();
        for _ in 0..AUTHENTICATE_TRIES {
            let checked = self.check_password(&r.name, r.password.clone()).await?;
            // etcd's token prefix: random letters for simple tokens, none otherwise.
            let prefix = match &self.auth.tokens {
                TokenProvider::Simple(_) => {
                    tokens::new_prefix().map_err(|e| Status::internal(e.to_string()))?
                }
                _ => String::new(),
            };
            let login = AuthenticateOp {
                name: r.name.clone(),
                simple_token: prefix,
            };
            let login = self.writes.propose(login, None).await?;
            // What etcd's apply of the entry answers when no token can be made.
            match &self.auth.tokens {
                TokenProvider::Nop => return Err(EtcdError::AuthFailed.into()),
                TokenProvider::Jwt(jwt) if jwt.verify_only() => {
                    return Err(EtcdError::JwtVerifyOnly.into());
                }
                _ => {}
            }
            if checked == self.auth.revision() {
                let token = match login.simple_token {
                    Some(token) => token,
                    None => self.sign(&r.name, login.auth_revision).await?,
                };
                return Ok(Response::new(AuthenticateResponse {
                    header: Some(login.header),
                    token,
                }));
            }
            tracing::info!(
                user = r.name,
                "auth changed while a password was checked; retrying"
            );
        }
        Err(EtcdError::AuthOldRevision.into())
    }

    async fn user_add(&self, req: Request<AuthUserAddRequest>) -> Answer<AuthUserAddResponse> {
        let caller = self.callers.of(&req).await?;
        // Checked again when applied; here first, so no password is hashed for nothing.
        self.auth.state().check_admin(name(&caller))?;
        let mut r = req.into_inner();
        if r.name.is_empty() {
            return Err(EtcdError::UserEmpty.into());
        }
        if !r.options.is_some_and(|o| o.no_password) {
            r.hashed_password = self.hash(std::mem::take(&mut r.password)).await?;
        }
        let header = Some(self.writes.propose(r, caller).await?);
        Ok(Response::new(AuthUserAddResponse { header }))
    }

    async fn user_get(&self, req: Request<AuthUserGetRequest>) -> Answer<AuthUserGetResponse> {
        let caller = self.reader(&req).await?;
        let wanted = req.into_inner().name;
        let roles = {
            let s = self.auth.state();
            // A user may read itself (etcd's rule).
            if name(&caller) != Some(wanted.as_str()) {
                s.check_admin(name(&caller))?;
            }
            s.users
                .get(&wanted)
                .ok_or(EtcdError::UserNotFound)?
                .roles
                .clone()
        };
        Ok(Response::new(AuthUserGetResponse {
            header: self.header(),
            roles,
        }))
    }

    async fn user_list(&self, req: Request<AuthUserListRequest>) -> Answer<AuthUserListResponse> {
        self.admin_read(&req).await?;
        let users = self.auth.state().users.keys().cloned().collect();
        Ok(Response::new(AuthUserListResponse {
            header: self.header(),
            users,
        }))
    }

    async fn user_delete(
        &self,
        req: Request<AuthUserDeleteRequest>,
    ) -> Answer<AuthUserDeleteResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthUserDeleteResponse { header }))
    }

    async fn user_change_password(
        &self,
        req: Request<AuthUserChangePasswordRequest>,
    ) -> Answer<AuthUserChangePasswordResponse> {
        let caller = self.callers.of(&req).await?;
        let mut r = req.into_inner();
        r.hashed_password = self.hash(std::mem::take(&mut r.password)).await?;
        let header = Some(self.writes.propose(r, caller).await?);
        Ok(Response::new(AuthUserChangePasswordResponse { header }))
    }

    async fn user_grant_role(
        &self,
        req: Request<AuthUserGrantRoleRequest>,
    ) -> Answer<AuthUserGrantRoleResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthUserGrantRoleResponse { header }))
    }

    async fn user_revoke_role(
        &self,
        req: Request<AuthUserRevokeRoleRequest>,
    ) -> Answer<AuthUserRevokeRoleResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthUserRevokeRoleResponse { header }))
    }

    async fn role_add(&self, req: Request<AuthRoleAddRequest>) -> Answer<AuthRoleAddResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthRoleAddResponse { header }))
    }

    async fn role_get(&self, req: Request<AuthRoleGetRequest>) -> Answer<AuthRoleGetResponse> {
        let caller = self.reader(&req).await?;
        let wanted = req.into_inner().role;
        let perm = {
            let s = self.auth.state();
            // A user may read the roles it holds (etcd's rule).
            let holds = name(&caller)
                .and_then(|u| s.users.get(u))
                .is_some_and(|u| u.roles.contains(&wanted));
            if !holds {
                s.check_admin(name(&caller))?;
            }
            s.roles
                .get(&wanted)
                .ok_or(EtcdError::RoleNotFound)?
                .key_permission
                .clone()
        };
        Ok(Response::new(AuthRoleGetResponse {
            header: self.header(),
            perm,
        }))
    }

    async fn role_list(&self, req: Request<AuthRoleListRequest>) -> Answer<AuthRoleListResponse> {
        self.admin_read(&req).await?;
        let roles = self.auth.state().roles.keys().cloned().collect();
        Ok(Response::new(AuthRoleListResponse {
            header: self.header(),
            roles,
        }))
    }

    async fn role_delete(
        &self,
        req: Request<AuthRoleDeleteRequest>,
    ) -> Answer<AuthRoleDeleteResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthRoleDeleteResponse { header }))
    }

    async fn role_grant_permission(
        &self,
        req: Request<AuthRoleGrantPermissionRequest>,
    ) -> Answer<AuthRoleGrantPermissionResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthRoleGrantPermissionResponse { header }))
    }

    async fn role_revoke_permission(
        &self,
        req: Request<AuthRoleRevokePermissionRequest>,
    ) -> Answer<AuthRoleRevokePermissionResponse> {
        let header = self.change(req).await?;
        Ok(Response::new(AuthRoleRevokePermissionResponse { header }))
    }
}
