//! The Auth service's calls: users, roles, their permissions, and turning auth on and
//! off. Passwords travel as given (the server hashes them, as etcd's servers do).

use oxcd_api::authpb::UserAddOptions;
use oxcd_api::etcdserverpb::{
    AuthDisableRequest, AuthDisableResponse, AuthEnableRequest, AuthEnableResponse,
    AuthRoleAddRequest, AuthRoleAddResponse, AuthRoleDeleteRequest, AuthRoleDeleteResponse,
    AuthRoleGetRequest, AuthRoleGetResponse, AuthRoleGrantPermissionRequest,
    AuthRoleGrantPermissionResponse, AuthRoleListRequest, AuthRoleListResponse,
    AuthRoleRevokePermissionRequest, AuthRoleRevokePermissionResponse, AuthStatusRequest,
    AuthStatusResponse, AuthUserAddRequest, AuthUserAddResponse, AuthUserChangePasswordRequest,
    AuthUserChangePasswordResponse, AuthUserDeleteRequest, AuthUserDeleteResponse,
    AuthUserGetRequest, AuthUserGetResponse, AuthUserGrantRoleRequest, AuthUserGrantRoleResponse,
    AuthUserListRequest, AuthUserListResponse, AuthUserRevokeRoleRequest,
    AuthUserRevokeRoleResponse,
};

use crate::{Client, Error};

/// A permission's kind, as `authpb.Permission.Type` numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionType {
    /// Read.
    Read = 0,
    /// Write.
    Write = 1,
    /// Both.
    ReadWrite = 2,
}

impl PermissionType {
    /// etcdctl's reading of a permission word (any case).
    pub fn parse(s: &str) -> Option<PermissionType> {
        Some(match s.to_ascii_uppercase().as_str() {
            "READ" => PermissionType::Read,
            "WRITE" => PermissionType::Write,
            "READWRITE" => PermissionType::ReadWrite,
            _ => return None,
        })
    }
}

impl Client {
    /// `Auth.AuthEnable`.
    pub async fn auth_enable(&self) -> Result<AuthEnableResponse, Error> {
        self.bounded(self.auth().auth_enable(AuthEnableRequest {}))
            .await
    }

    /// `Auth.AuthDisable`.
    pub async fn auth_disable(&self) -> Result<AuthDisableResponse, Error> {
        self.bounded(self.auth().auth_disable(AuthDisableRequest {}))
            .await
    }

    /// `Auth.AuthStatus`.
    pub async fn auth_status(&self) -> Result<AuthStatusResponse, Error> {
        self.bounded(self.auth().auth_status(AuthStatusRequest {}))
            .await
    }

    /// `Auth.UserAdd`; `no_password` makes a user that can only be a certificate's CN.
    pub async fn user_add(
        &self,
        name: &str,
        password: &str,
        no_password: bool,
    ) -> Result<AuthUserAddResponse, Error> {
        let req = AuthUserAddRequest {
            name: name.to_string(),
            password: password.to_string(),
            options: Some(UserAddOptions { no_password }),
            hashed_password: String::new(),
        };
        self.bounded(self.auth().user_add(req)).await
    }

    /// `Auth.UserGet`: the user's roles.
    pub async fn user_get(&self, name: &str) -> Result<AuthUserGetResponse, Error> {
        let req = AuthUserGetRequest {
            name: name.to_string(),
        };
        self.bounded(self.auth().user_get(req)).await
    }

    /// `Auth.UserList`.
    pub async fn user_list(&self) -> Result<AuthUserListResponse, Error> {
        self.bounded(self.auth().user_list(AuthUserListRequest {}))
            .await
    }

    /// `Auth.UserDelete`.
    pub async fn user_delete(&self, name: &str) -> Result<AuthUserDeleteResponse, Error> {
        let req = AuthUserDeleteRequest {
            name: name.to_string(),
        };
        self.bounded(self.auth().user_delete(req)).await
    }

    /// `Auth.UserChangePassword`.
    pub async fn user_change_password(
        &self,
        name: &str,
        password: &str,
    ) -> Result<AuthUserChangePasswordResponse, Error> {
        let req = AuthUserChangePasswordRequest {
            name: name.to_string(),
            password: password.to_string(),
            hashed_password: String::new(),
        };
        self.bounded(self.auth().user_change_password(req)).await
    }

    /// `Auth.UserGrantRole`.
    pub async fn user_grant_role(
        &self,
        user: &str,
        role: &str,
    ) -> Result<AuthUserGrantRoleResponse, Error> {
        let req = AuthUserGrantRoleRequest {
            user: user.to_string(),
            role: role.to_string(),
        };
        self.bounded(self.auth().user_grant_role(req)).await
    }

    /// `Auth.UserRevokeRole`.
    pub async fn user_revoke_role(
        &self,
        name: &str,
        role: &str,
    ) -> Result<AuthUserRevokeRoleResponse, Error> {
        let req = AuthUserRevokeRoleRequest {
            name: name.to_string(),
            role: role.to_string(),
        };
        self.bounded(self.auth().user_revoke_role(req)).await
    }

    /// `Auth.RoleAdd`.
    pub async fn role_add(&self, name: &str) -> Result<AuthRoleAddResponse, Error> {
        let req = AuthRoleAddRequest {
            name: name.to_string(),
        };
        self.bounded(self.auth().role_add(req)).await
    }

    /// `Auth.RoleGet`: the role's permissions.
    pub async fn role_get(&self, role: &str) -> Result<AuthRoleGetResponse, Error> {
        let req = AuthRoleGetRequest {
            role: role.to_string(),
        };
        self.bounded(self.auth().role_get(req)).await
    }

    /// `Auth.RoleList`.
    pub async fn role_list(&self) -> Result<AuthRoleListResponse, Error> {
        self.bounded(self.auth().role_list(AuthRoleListRequest {}))
            .await
    }

    /// `Auth.RoleDelete`.
    pub async fn role_delete(&self, role: &str) -> Result<AuthRoleDeleteResponse, Error> {
        let req = AuthRoleDeleteRequest {
            role: role.to_string(),
        };
        self.bounded(self.auth().role_delete(req)).await
    }

    /// `Auth.RoleGrantPermission` on `[key, range_end)` (an empty end: the key alone;
    /// `"\0"`: every key from `key` on).
    pub async fn role_grant_permission(
        &self,
        role: &str,
        key: &[u8],
        range_end: &[u8],
        perm: PermissionType,
    ) -> Result<AuthRoleGrantPermissionResponse, Error> {
        let req = AuthRoleGrantPermissionRequest {
            name: role.to_string(),
            perm: Some(oxcd_api::authpb::Permission {
                perm_type: perm as i32,
                key: key.to_vec(),
                range_end: range_end.to_vec(),
            }),
        };
        self.bounded(self.auth().role_grant_permission(req)).await
    }

    /// `Auth.RoleRevokePermission` of the permission on `[key, range_end)`.
    pub async fn role_revoke_permission(
        &self,
        role: &str,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<AuthRoleRevokePermissionResponse, Error> {
        let req = AuthRoleRevokePermissionRequest {
            role: role.to_string(),
            key: key.to_vec(),
            range_end: range_end.to_vec(),
        };
        self.bounded(self.auth().role_revoke_permission(req)).await
    }
}
