use super::*;
use crate::changes as ops;
use oxcd_api::etcdserverpb::{AuthRoleAddRequest, AuthUserAddRequest, AuthUserGrantRoleRequest};

fn simple() -> TokenProvider {
    TokenProvider::Simple(SimpleTokens::new(DEFAULT_TOKEN_TTL))
}

fn backend(dir: &std::path::Path) -> Backend {
    Backend::open(&dir.join("db")).expect("backend")
}

#[test]
fn changes_raise_the_revision_and_survive_a_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = backend(dir.path());
    let store = AuthStore::load(&b, simple(), DEFAULT_BCRYPT_COST).expect("load");
    assert_eq!(
        (store.revision(), store.enabled()),
        (1, false),
        "etcd starts at 1"
    );
    let tx = b.begin_batch().expect("batch");
    let add = AuthUserAddRequest {
        name: ROOT.into(),
        hashed_password: "JDJhJDEwJHg=".into(),
        ..Default::default()
    };
    store
        .apply(&tx, |s, c| ops::user_add(s, c, &add))
        .expect("backend")
        .expect("added");
    let role = AuthRoleAddRequest { name: ROOT.into() };
    store
        .apply(&tx, |s, c| ops::role_add(s, c, &role))
        .expect("backend")
        .expect("role");
    let grant = AuthUserGrantRoleRequest {
        user: ROOT.into(),
        role: ROOT.into(),
    };
    store
        .apply(&tx, |s, c| ops::user_grant_role(s, c, &grant))
        .expect("backend")
        .expect("granted");
    let refused = store
        .apply(&tx, |s, c| ops::user_add(s, c, &add))
        .expect("backend");
    assert_eq!(refused, Err(EtcdError::UserAlreadyExist));
    store
        .apply(&tx, ops::enable)
        .expect("backend")
        .expect("enabled");
    assert_eq!(
        store.revision(),
        4,
        "three changes raise it; a refusal and enabling do not"
    );
    tx.commit(9, 1, true).expect("commit");
    assert!(store.state().is_root(ROOT));
    let again = AuthStore::load(&b, simple(), DEFAULT_BCRYPT_COST).expect("reload");
    assert_eq!(*again.state(), *store.state());
}

#[test]
fn permissions_follow_the_revision() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = backend(dir.path());
    let store = AuthStore::load(&b, simple(), DEFAULT_BCRYPT_COST).expect("load");
    let tx = b.begin_batch().expect("batch");
    let run = |f: &dyn Fn(&mut AuthState, &mut Changes) -> Result<(), EtcdError>| {
        store.apply(&tx, f).expect("backend").expect("accepted")
    };
    run(&|s, c| {
        ops::user_add(
            s,
            c,
            &AuthUserAddRequest {
                name: "u".into(),
                ..Default::default()
            },
        )
    });
    run(&|s, c| ops::role_add(s, c, &AuthRoleAddRequest { name: "r".into() }));
    run(&|s, c| {
        ops::user_grant_role(
            s,
            c,
            &AuthUserGrantRoleRequest {
                user: "u".into(),
                role: "r".into(),
            },
        )
    });
    assert!(
        !store.state().perms("u").may_read(b"k", b""),
        "no grant yet"
    );
    run(&|s, c| {
        ops::role_grant_permission(
            s,
            c,
            &oxcd_api::etcdserverpb::AuthRoleGrantPermissionRequest {
                name: "r".into(),
                perm: Some(oxcd_api::authpb::Permission {
                    perm_type: oxcd_api::authpb::permission::Type::Read as i32,
                    key: b"k".to_vec(),
                    range_end: Vec::new(),
                }),
            },
        )
    });
    assert!(
        store.state().perms("u").may_read(b"k", b""),
        "the permissions follow each change"
    );
}
