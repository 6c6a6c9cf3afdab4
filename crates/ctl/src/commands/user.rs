//! `user add|delete|get|list|passwd|grant-role|revoke-role` with etcdctl 3.4's argument
//! checks, password prompts, messages and exit codes.

use std::io::Read;

use crate::args::{boolean, string};
use crate::command::{Command, Run, bad_args, printed};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::auth::Done;

/// `user`: prints its help.
pub const GROUP: Command = Command {
    path: &["user"],
    use_: "user <subcommand>",
    short: "User related commands",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `user add`.
pub const ADD: Command = Command {
    path: &["user", "add"],
    use_: "add <user name or user:password> [options]",
    short: "Adds a new user",
    long: "",
    flags: &[
        boolean(
            "interactive",
            "Read password from stdin instead of interactive terminal",
        )
        .default("true"),
        string(
            "new-user-password",
            "",
            "Supply password from the command line flag",
        ),
        boolean(
            "no-password",
            "Create a user without password (CN based auth only)",
        ),
    ],
    persistent: &[],
    run: Some(add),
};

/// `user delete`.
pub const DELETE: Command = Command {
    path: &["user", "delete"],
    use_: "delete <user name>",
    short: "Deletes a user",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(delete),
};

/// `user get`.
pub const GET: Command = Command {
    path: &["user", "get"],
    use_: "get <user name> [options]",
    short: "Gets detailed information of a user",
    long: "",
    flags: &[boolean(
        "detail",
        "Show permissions of roles granted to the user",
    )],
    persistent: &[],
    run: Some(get),
};

/// `user list`.
pub const LIST: Command = Command {
    path: &["user", "list"],
    use_: "list",
    short: "Lists all users",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(list),
};

/// `user passwd`.
pub const PASSWD: Command = Command {
    path: &["user", "passwd"],
    use_: "passwd <user name> [options]",
    short: "Changes password of user",
    long: "",
    flags: &[boolean(
        "interactive",
        "If true, read password from stdin instead of interactive terminal",
    )
    .default("true")],
    persistent: &[],
    run: Some(passwd),
};

/// `user grant-role`.
pub const GRANT_ROLE: Command = Command {
    path: &["user", "grant-role"],
    use_: "grant-role <user name> <role name>",
    short: "Grants a role to a user",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(grant_role),
};

/// `user revoke-role`.
pub const REVOKE_ROLE: Command = Command {
    path: &["user", "revoke-role"],
    use_: "revoke-role <user name> <role name>",
    short: "Revokes a role from a user",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(revoke_role),
};

/// A password read as Go's `fmt.Scanf("%s")` reads one (`--interactive=false`): the first
/// word of stdin's first line, or nothing.
fn password_from_stdin() -> String {
    let mut input = Vec::new();
    let _ = std::io::stdin()
        .lock()
        .take(1 << 20)
        .read_to_end(&mut input);
    let text = String::from_utf8_lossy(&input);
    let line = text.split('\n').next().unwrap_or("");
    line.trim_start_matches([' ', '\t', '\r'])
        .split([' ', '\t', '\r'])
        .next()
        .unwrap_or("")
        .to_string()
}

/// etcdctl's prompt for a new password: asked twice, refused if empty or different.
fn password_from_terminal(name: &str) -> Result<String, Fail> {
    let ask = |prompt: String| {
        oxcd_client::ask_secret(&prompt, &mut std::io::stdout())
            .map_err(|e| bad_args(&format!("failed to ask password: {e}")))
    };
    let first = ask(format!("Password of {name}: "))?;
    if first.is_empty() {
        return Err(bad_args("empty password"));
    }
    let second = ask(format!("Type password of {name} again for confirmation: "))?;
    if first != second {
        return Err(bad_args("given passwords are different"));
    }
    Ok(first)
}

/// A new password, from stdin or the terminal as `--interactive` says.
fn new_password(ctx: &Ctx, name: &str) -> Result<String, Fail> {
    if ctx.flags.flag("interactive") {
        password_from_terminal(name)
    } else {
        Ok(password_from_stdin())
    }
}

fn add(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "user add command requires user name as its argument",
            ));
        }
        let no_password = ctx.flags.flag("no-password");
        let from_flag = ctx.flags.get("new-user-password").to_string();
        let (user, password) = if no_password {
            (args[0].clone(), String::new())
        } else if !from_flag.is_empty() {
            (args[0].clone(), from_flag)
        } else if let Some((user, password)) = args[0].split_once(':') {
            if user.is_empty() {
                return Err(bad_args("empty user name is not allowed"));
            }
            (user.to_string(), password.to_string())
        } else {
            (args[0].clone(), new_password(&ctx, &args[0])?)
        };
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .user_add(&user, &password, no_password)
            .await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("User {user} created\n").into_bytes(),
        }))
    })
}

fn delete(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "user delete command requires user name as its argument",
            ));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.user_delete(&args[0]).await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("User {} deleted\n", args[0]).into_bytes(),
        }))
    })
}

fn get(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "user get command requires user name as its argument",
            ));
        }
        let name = &args[0];
        let s = ctx.session()?;
        let client = s.client().await?;
        let resp = client.user_get(name).await?;
        if !ctx.flags.flag("detail") {
            return printed(s.printer.user_get(name, &resp));
        }
        // etcdctl prints the user's line, then each role as `role get` prints it.
        let mut out = crate::output::Out::text(format!("User: {name}\n"));
        for role in &resp.roles {
            out = out.then(crate::output::Out::text("\n".into()));
            let shown = match client.role_get(role).await {
                Ok(r) => s
                    .printer
                    .role_get(role, &r)
                    .map_err(|e| (exit::BAD_FEATURE, e)),
                Err(e) => Err((exit::ERROR, e.to_string())),
            };
            match shown {
                Ok(shown) => out = out.then(shown),
                Err((code, msg)) => {
                    return Err(Fail {
                        partial: out,
                        ..Fail::new(code, msg)
                    });
                }
            }
        }
        Ok(out)
    })
}

fn list(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(bad_args("user list command requires no arguments"));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.user_list().await?;
        printed(s.printer.user_list(&resp))
    })
}

fn passwd(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "user passwd command requires user name as its argument",
            ));
        }
        let password = new_password(&ctx, &args[0])?;
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .user_change_password(&args[0], &password)
            .await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: b"Password updated\n".to_vec(),
        }))
    })
}

fn grant_role(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 2 {
            return Err(bad_args(
                "user grant command requires user name and role name as its argument",
            ));
        }
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .user_grant_role(&args[0], &args[1])
            .await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("Role {} is granted to user {}\n", args[1], args[0]).into_bytes(),
        }))
    })
}

fn revoke_role(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 2 {
            return Err(bad_args(
                "user revoke-role requires user name and role name as its argument",
            ));
        }
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .user_revoke_role(&args[0], &args[1])
            .await?;
        printed(s.printer.auth_done(Done {
            resp: &resp,
            header: &resp.header,
            sentence: format!("Role {} is revoked from user {}\n", args[1], args[0]).into_bytes(),
        }))
    })
}
