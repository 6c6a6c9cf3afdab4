//! `role add|delete|get|list|grant-permission|revoke-permission` with etcdctl 3.4's
//! argument checks, messages and exit codes; a permission's range is read from the key,
//! an optional end, `--prefix` or `--from-key` as etcdctl reads them.

use oxcd_client::{PermissionType, prefix_end};

use crate::args::boolean;
use crate::command::{Command, Run, bad_args, printed};
use crate::ctx::Ctx;
use crate::fail::Fail;
use crate::output::auth::Done;

/// `role`: prints its help.
pub const GROUP: Command = Command {
    path: &["role"],
    use_: "role <subcommand>",
    short: "Role related commands",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `role add`.
pub const ADD: Command = Command {
    path: &["role", "add"],
    use_: "add <role name>",
    short: "Adds a new role",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(add),
};

/// `role delete`.
pub const DELETE: Command = Command {
    path: &["role", "delete"],
    use_: "delete <role name>",
    short: "Deletes a role",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(delete),
};

/// `role get`.
pub const GET: Command = Command {
    path: &["role", "get"],
    use_: "get <role name>",
    short: "Gets detailed information of a role",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(get),
};

/// `role list`.
pub const LIST: Command = Command {
    path: &["role", "list"],
    use_: "list",
    short: "Lists all roles",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(list),
};

/// `role grant-permission`.
pub const GRANT_PERMISSION: Command = Command {
    path: &["role", "grant-permission"],
    use_: "grant-permission [options] <role name> <permission type> <key> [endkey]",
    short: "Grants a key to a role",
    long: "",
    flags: &[
        boolean(
            "from-key",
            "grant a permission of keys that are greater than or equal to the given key using byte compare",
        ),
        boolean("prefix", "grant a prefix permission"),
    ],
    persistent: &[],
    run: Some(grant_permission),
};

/// `role revoke-permission`.
pub const REVOKE_PERMISSION: Command = Command {
    path: &["role", "revoke-permission"],
    use_: "revoke-permission <role name> <key> [endkey]",
    short: "Revokes a key from a role",
    long: "",
    flags: &[
        boolean(
            "from-key",
            "revoke a permission of keys that are greater than or equal to the given key using byte compare",
        ),
        boolean("prefix", "revoke a prefix permission"),
    ],
    persistent: &[],
    run: Some(revoke_permission),
};

const EXCLUSIVE: &str = "--from-key and --prefix flags are mutually exclusive";

/// The `[key, end)` a permission's arguments name (etcdctl's `permRange`): an empty key
/// is `"\0"` (the whole key space with `--prefix` or `--from-key`, else the key `"\0"`).
fn perm_range(ctx: &Ctx, args: &[String]) -> Result<(Vec<u8>, Vec<u8>), Fail> {
    let (prefix, from_key) = (ctx.flags.flag("prefix"), ctx.flags.flag("from-key"));
    let key = args[0].as_bytes();
    if key.is_empty() {
        if prefix && from_key {
            return Err(bad_args(EXCLUSIVE));
        }
        let end = if prefix || from_key { vec![0] } else { vec![] };
        return Ok((vec![0], end));
    }
    let end = match (args.get(1), prefix, from_key) {
        (None, true, true) => return Err(bad_args(EXCLUSIVE)),
        (None, true, false) => prefix_end(key),
        (None, false, true) => vec![0],
        (None, false, false) => vec![],
        (Some(_), true, _) => {
            return Err(bad_args("unexpected endkey argument with --prefix flag"));
        }
        (Some(_), false, true) => {
            return Err(bad_args("unexpected endkey argument with --from-key flag"));
        }
        (Some(end), false, false) => end.clone().into_bytes(),
    };
    Ok((key.to_vec(), end))
}

fn add(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "role add command requires role name as its argument",
            ));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.role_add(&args[0]).await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("Role {} created\n", args[0]).into_bytes(),
        }))
    })
}

fn delete(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "role delete command requires role name as its argument",
            ));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.role_delete(&args[0]).await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("Role {} deleted\n", args[0]).into_bytes(),
        }))
    })
}

fn get(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "role get command requires role name as its argument",
            ));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.role_get(&args[0]).await?;
        printed(s.printer.role_get(&args[0], &resp))
    })
}

fn list(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(bad_args("role list command requires no arguments"));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.role_list().await?;
        printed(s.printer.role_list(&resp))
    })
}

fn grant_permission(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() < 3 {
            return Err(bad_args(
                "role grant command requires role name, permission type, and key [endkey] as its argument",
            ));
        }
        let perm = PermissionType::parse(&args[1])
            .ok_or_else(|| bad_args(&format!("invalid permission type: {}", args[1])))?;
        let (key, end) = perm_range(&ctx, &args[2..])?;
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .role_grant_permission(&args[0], &key, &end, perm)
            .await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("Role {} updated\n", args[0]).into_bytes(),
        }))
    })
}

fn revoke_permission(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() < 2 {
            return Err(bad_args(
                "role revoke-permission command requires role name and key [endkey] as its argument",
            ));
        }
        let (key, end) = perm_range(&ctx, &args[1..])?;
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .role_revoke_permission(&args[0], &key, &end)
            .await?;
        // etcdctl names the key as typed (not the "\0" an empty key becomes).
        let (role, typed) = (&args[0], args[1].as_bytes());
        let mut sentence = Vec::new();
        if end.is_empty() {
            sentence.extend_from_slice(b"Permission of key ");
            sentence.extend_from_slice(typed);
        } else {
            sentence.extend_from_slice(b"Permission of range [");
            sentence.extend_from_slice(typed);
            if end != b"\0" {
                sentence.extend_from_slice(b", ");
                sentence.extend_from_slice(&end);
                sentence.push(b')');
            } else {
                sentence.extend_from_slice(b", <open ended>");
            }
        }
        sentence.extend_from_slice(format!(" is revoked from role {role}\n").as_bytes());
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence,
        }))
    })
}
