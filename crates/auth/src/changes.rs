//! The rules of every auth change: users, roles, permissions, the enabled flag and
//! authentication, with etcd's rules and errors. Each function checks the request
//! against the state first and changes it only when the request is accepted, naming
//! what it changed in [`Changes`]; [`crate::AuthStore::apply`] raises the revision and
//! writes the rows. Passwords arrive already hashed (bcrypt, then base64, as etcd 3.5's
//! `hashedPassword`): bcrypt never runs here. Pure: the same state and request give the
//! same outcome on every member.

use oxcd_api::authpb::{Permission, Role, User, UserAddOptions};
use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::{
    AuthRoleAddRequest, AuthRoleDeleteRequest, AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest, AuthUserAddRequest, AuthUserChangePasswordRequest,
    AuthUserDeleteRequest, AuthUserGrantRoleRequest, AuthUserRevokeRoleRequest,
};
use oxcd_api::oxcdpb::AuthenticateOp;

use crate::{AuthState, Changes, ROOT, no_password};

type Outcome = Result<(), EtcdError>;

/// AuthEnable: needs a root user holding the root role; enabling twice is no change.
/// As etcd, enabling does not raise the revision.
pub fn enable(s: &mut AuthState, c: &mut Changes) -> Outcome {
    if s.enabled {
        return Ok(());
    }
    if !s.users.contains_key(ROOT) {
        return Err(EtcdError::RootUserNotExist);
    }
    if !s.is_root(ROOT) {
        return Err(EtcdError::RootRoleNotExist);
    }
    s.enabled = true;
    c.enabled(false);
    Ok(())
}

/// AuthDisable: disabling twice is no change.
pub fn disable(s: &mut AuthState, c: &mut Changes) -> Outcome {
    if s.enabled {
        s.enabled = false;
        c.enabled(true);
    }
    Ok(())
}

/// Authenticate, after the proposer checked the password: refused if auth was turned
/// off or the user can no longer log in with a password since. (A password changed in
/// between is caught by the proposer, which compares the revision before and after.)
pub fn authenticate(s: &AuthState, op: &AuthenticateOp) -> Outcome {
    if !s.enabled {
        return Err(EtcdError::AuthNotEnabled);
    }
    let user = s.users.get(&op.name).ok_or(EtcdError::AuthFailed)?;
    if no_password(user) {
        return Err(EtcdError::AuthFailed);
    }
    Ok(())
}

/// The stored form of a `hashedPassword`: the bcrypt hash it carries in base64.
fn stored_password(hashed: &str) -> Result<Vec<u8>, EtcdError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(hashed)
        .map_err(|_| EtcdError::NoPasswordUser)
}

/// UserAdd, with `hashed_password` set by the proposer (none for a user without one).
pub fn user_add(s: &mut AuthState, c: &mut Changes, r: &AuthUserAddRequest) -> Outcome {
    if r.name.is_empty() {
        return Err(EtcdError::UserEmpty);
    }
    if s.users.contains_key(&r.name) {
        return Err(EtcdError::UserAlreadyExist);
    }
    let options = r.options.unwrap_or(UserAddOptions { no_password: false });
    let password = if options.no_password {
        Vec::new()
    } else {
        stored_password(&r.hashed_password)?
    };
    let user = User {
        name: r.name.as_bytes().to_vec(),
        password,
        roles: Vec::new(),
        options: Some(options),
    };
    s.users.insert(r.name.clone(), user);
    c.user(&r.name);
    Ok(())
}

/// UserDelete: root cannot be deleted while auth is on.
pub fn user_delete(s: &mut AuthState, c: &mut Changes, r: &AuthUserDeleteRequest) -> Outcome {
    if s.enabled && r.name == ROOT {
        return Err(EtcdError::InvalidAuthMgmt);
    }
    s.users.remove(&r.name).ok_or(EtcdError::UserNotFound)?;
    c.user(&r.name);
    Ok(())
}

/// UserChangePassword, with `hashed_password` set by the proposer; a user without a
/// password keeps none.
pub fn user_change_password(
    s: &mut AuthState,
    c: &mut Changes,
    r: &AuthUserChangePasswordRequest,
) -> Outcome {
    let user = s.users.get_mut(&r.name).ok_or(EtcdError::UserNotFound)?;
    user.password = if no_password(user) {
        Vec::new()
    } else {
        stored_password(&r.hashed_password)?
    };
    c.user(&r.name);
    Ok(())
}

/// UserGrantRole: the role must exist (root needs not); granting it again is no change.
pub fn user_grant_role(
    s: &mut AuthState,
    c: &mut Changes,
    r: &AuthUserGrantRoleRequest,
) -> Outcome {
    let user = s.users.get_mut(&r.user).ok_or(EtcdError::UserNotFound)?;
    if r.role != ROOT && !s.roles.contains_key(&r.role) {
        return Err(EtcdError::RoleNotFound);
    }
    if let Err(at) = user.roles.binary_search(&r.role) {
        user.roles.insert(at, r.role.clone());
        c.user(&r.user);
    }
    Ok(())
}

/// UserRevokeRole: root keeps the root role while auth is on.
pub fn user_revoke_role(
    s: &mut AuthState,
    c: &mut Changes,
    r: &AuthUserRevokeRoleRequest,
) -> Outcome {
    if s.enabled && r.name == ROOT && r.role == ROOT {
        return Err(EtcdError::InvalidAuthMgmt);
    }
    let user = s.users.get_mut(&r.name).ok_or(EtcdError::UserNotFound)?;
    let at = user
        .roles
        .binary_search(&r.role)
        .map_err(|_| EtcdError::RoleNotGranted)?;
    user.roles.remove(at);
    c.user(&r.name);
    Ok(())
}

/// RoleAdd.
pub fn role_add(s: &mut AuthState, c: &mut Changes, r: &AuthRoleAddRequest) -> Outcome {
    if r.name.is_empty() {
        return Err(EtcdError::RoleEmpty);
    }
    if s.roles.contains_key(&r.name) {
        return Err(EtcdError::RoleAlreadyExist);
    }
    let role = Role {
        name: r.name.as_bytes().to_vec(),
        key_permission: Vec::new(),
    };
    s.roles.insert(r.name.clone(), role);
    c.role(&r.name);
    Ok(())
}

/// RoleDelete: the root role stays while auth is on; users holding the role lose it.
pub fn role_delete(s: &mut AuthState, c: &mut Changes, r: &AuthRoleDeleteRequest) -> Outcome {
    if s.enabled && r.role == ROOT {
        return Err(EtcdError::InvalidAuthMgmt);
    }
    s.roles.remove(&r.role).ok_or(EtcdError::RoleNotFound)?;
    c.role(&r.role);
    for (name, user) in s.users.iter_mut() {
        if let Ok(at) = user.roles.binary_search(&r.role) {
            user.roles.remove(at);
            c.user(name);
        }
    }
    Ok(())
}

/// Whether (key, range_end) is a range a permission may name, as etcd: a key, and an
/// end after it (or none, or `\0` for every key from it on).
fn valid_range(key: &[u8], range_end: &[u8]) -> bool {
    !key.is_empty() && (range_end.is_empty() || range_end == [0] || key < range_end)
}

/// RoleGrantPermission: a grant for the same key and range end is replaced; others are
/// kept sorted by key.
pub fn role_grant_permission(
    s: &mut AuthState,
    c: &mut Changes,
    r: &AuthRoleGrantPermissionRequest,
) -> Outcome {
    let perm = r.perm.as_ref().ok_or(EtcdError::PermissionNotGiven)?;
    if !valid_range(&perm.key, &perm.range_end) {
        return Err(EtcdError::InvalidAuthMgmt);
    }
    let role = s.roles.get_mut(&r.name).ok_or(EtcdError::RoleNotFound)?;
    let same = |p: &&mut Permission| p.key == perm.key && p.range_end == perm.range_end;
    match role.key_permission.iter_mut().find(same) {
        Some(p) => p.perm_type = perm.perm_type,
        None => {
            let at = role.key_permission.partition_point(|p| p.key <= perm.key);
            role.key_permission.insert(at, perm.clone());
        }
    }
    c.role(&r.name);
    Ok(())
}

/// RoleRevokePermission: the grant with this key and range end.
pub fn role_revoke_permission(
    s: &mut AuthState,
    c: &mut Changes,
    r: &AuthRoleRevokePermissionRequest,
) -> Outcome {
    let role = s.roles.get_mut(&r.role).ok_or(EtcdError::RoleNotFound)?;
    let at = role
        .key_permission
        .iter()
        .position(|p| p.key == r.key && p.range_end == r.range_end)
        .ok_or(EtcdError::PermissionNotGranted)?;
    role.key_permission.remove(at);
    c.role(&r.role);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::authpb::permission::Type;

    fn add_user(s: &mut AuthState, name: &str) -> Outcome {
        let r = AuthUserAddRequest {
            name: name.into(),
            hashed_password: "JDJhJDEwJGhhc2g=".into(),
            ..Default::default()
        };
        user_add(s, &mut Changes::default(), &r)
    }

    fn grant(s: &mut AuthState, user: &str, role: &str) -> Outcome {
        let r = AuthUserGrantRoleRequest {
            user: user.into(),
            role: role.into(),
        };
        user_grant_role(s, &mut Changes::default(), &r)
    }

    fn add_role(s: &mut AuthState, name: &str) -> Outcome {
        role_add(
            s,
            &mut Changes::default(),
            &AuthRoleAddRequest { name: name.into() },
        )
    }

    #[test]
    fn enabling_needs_root_with_the_root_role() {
        let mut s = AuthState::default();
        let c = &mut Changes::default();
        assert_eq!(enable(&mut s, c), Err(EtcdError::RootUserNotExist));
        add_user(&mut s, ROOT).expect("root");
        assert_eq!(enable(&mut s, c), Err(EtcdError::RootRoleNotExist));
        grant(&mut s, ROOT, ROOT).expect("root needs no role to exist");
        assert_eq!(enable(&mut s, c), Ok(()));
        assert!(s.enabled);
        assert!(c.any(), "the flag changed");
        let again = &mut Changes::default();
        assert_eq!(enable(&mut s, again), Ok(()));
        assert!(!again.any(), "enabling twice changes nothing");
    }

    #[test]
    fn root_is_protected_while_auth_is_on() {
        let mut s = AuthState::default();
        add_user(&mut s, ROOT).expect("root");
        add_role(&mut s, ROOT).expect("root role");
        grant(&mut s, ROOT, ROOT).expect("grant");
        enable(&mut s, &mut Changes::default()).expect("enable");
        let c = &mut Changes::default();
        let del = AuthUserDeleteRequest { name: ROOT.into() };
        assert_eq!(
            user_delete(&mut s, c, &del),
            Err(EtcdError::InvalidAuthMgmt)
        );
        let revoke = AuthUserRevokeRoleRequest {
            name: ROOT.into(),
            role: ROOT.into(),
        };
        assert_eq!(
            user_revoke_role(&mut s, c, &revoke),
            Err(EtcdError::InvalidAuthMgmt)
        );
        let role = AuthRoleDeleteRequest { role: ROOT.into() };
        assert_eq!(
            role_delete(&mut s, c, &role),
            Err(EtcdError::InvalidAuthMgmt)
        );
        assert!(!c.any(), "refusals change nothing");
        disable(&mut s, c).expect("disable");
        assert_eq!(role_delete(&mut s, c, &role), Ok(()));
        assert!(s.users[ROOT].roles.is_empty(), "users lose a deleted role");
    }

    #[test]
    fn users_and_roles_errors_as_etcd() {
        let mut s = AuthState::default();
        let c = &mut Changes::default();
        assert_eq!(add_user(&mut s, ""), Err(EtcdError::UserEmpty));
        add_user(&mut s, "u").expect("u");
        assert_eq!(add_user(&mut s, "u"), Err(EtcdError::UserAlreadyExist));
        assert_eq!(add_role(&mut s, ""), Err(EtcdError::RoleEmpty));
        add_role(&mut s, "r").expect("r");
        assert_eq!(add_role(&mut s, "r"), Err(EtcdError::RoleAlreadyExist));
        assert_eq!(grant(&mut s, "u", "nope"), Err(EtcdError::RoleNotFound));
        assert_eq!(grant(&mut s, "nobody", "r"), Err(EtcdError::UserNotFound));
        grant(&mut s, "u", "r").expect("grant");
        let again = &mut Changes::default();
        user_grant_role(
            &mut s,
            again,
            &AuthUserGrantRoleRequest {
                user: "u".into(),
                role: "r".into(),
            },
        )
        .expect("granting again is accepted");
        assert!(!again.any(), "and changes nothing");
        let revoke = |role: &str| AuthUserRevokeRoleRequest {
            name: "u".into(),
            role: role.into(),
        };
        assert_eq!(
            user_revoke_role(&mut s, c, &revoke("other")),
            Err(EtcdError::RoleNotGranted)
        );
        assert_eq!(user_revoke_role(&mut s, c, &revoke("r")), Ok(()));
    }

    #[test]
    fn permissions_are_replaced_kept_sorted_and_checked() {
        let mut s = AuthState::default();
        let c = &mut Changes::default();
        add_role(&mut s, "r").expect("r");
        let grant = |key: &str, end: &[u8], t: Type| AuthRoleGrantPermissionRequest {
            name: "r".into(),
            perm: Some(Permission {
                perm_type: t as i32,
                key: key.as_bytes().to_vec(),
                range_end: end.to_vec(),
            }),
        };
        role_grant_permission(&mut s, c, &grant("m", b"", Type::Read)).expect("m");
        role_grant_permission(&mut s, c, &grant("a", b"b", Type::Write)).expect("a");
        role_grant_permission(&mut s, c, &grant("m", b"", Type::Readwrite)).expect("again");
        let perms = &s.roles["r"].key_permission;
        assert_eq!(perms.len(), 2);
        assert_eq!(
            (perms[0].key.as_slice(), perms[1].key.as_slice()),
            (&b"a"[..], &b"m"[..])
        );
        assert_eq!(perms[1].perm_type, Type::Readwrite as i32);
        assert_eq!(
            role_grant_permission(&mut s, c, &grant("b", b"a", Type::Read)),
            Err(EtcdError::InvalidAuthMgmt),
            "range end before the key"
        );
        let missing = AuthRoleGrantPermissionRequest {
            name: "r".into(),
            perm: None,
        };
        assert_eq!(
            role_grant_permission(&mut s, c, &missing),
            Err(EtcdError::PermissionNotGiven)
        );
        let revoke = |key: &str| AuthRoleRevokePermissionRequest {
            role: "r".into(),
            key: key.as_bytes().to_vec(),
            range_end: Vec::new(),
        };
        assert_eq!(
            role_revoke_permission(&mut s, c, &revoke("a")),
            Err(EtcdError::PermissionNotGranted),
            "a's grant has a range end"
        );
        assert_eq!(role_revoke_permission(&mut s, c, &revoke("m")), Ok(()));
    }

    #[test]
    fn authenticate_checks_the_user_and_hashes_are_base64() {
        let mut s = AuthState::default();
        let op = |name: &str| AuthenticateOp {
            name: name.into(),
            simple_token: String::new(),
        };
        assert_eq!(authenticate(&s, &op("u")), Err(EtcdError::AuthNotEnabled));
        s.enabled = true;
        assert_eq!(authenticate(&s, &op("u")), Err(EtcdError::AuthFailed));
        add_user(&mut s, "u").expect("u");
        assert_eq!(authenticate(&s, &op("u")), Ok(()));
        let cert_user = AuthUserAddRequest {
            name: "cn".into(),
            options: Some(UserAddOptions { no_password: true }),
            ..Default::default()
        };
        user_add(&mut s, &mut Changes::default(), &cert_user).expect("cn");
        assert_eq!(authenticate(&s, &op("cn")), Err(EtcdError::AuthFailed));
        let bad_hash = AuthUserAddRequest {
            name: "x".into(),
            hashed_password: "not base64!".into(),
            ..Default::default()
        };
        assert_eq!(
            user_add(&mut s, &mut Changes::default(), &bad_hash),
            Err(EtcdError::NoPasswordUser)
        );
    }
}
