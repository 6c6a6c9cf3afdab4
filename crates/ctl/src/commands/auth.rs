//! `auth enable|disable|status`. `enable`, as etcdctl's, gives the root user the root
//! role (creating the role) when the server refuses because root lacks it.

use oxcd_api::errors::EtcdError;

use crate::command::{Command, Run, bad_args, printed};
use crate::ctx::Ctx;
use crate::output::Out;

/// `auth`: prints its help.
pub const GROUP: Command = Command {
    path: &["auth"],
    use_: "auth <enable or disable>",
    short: "Enable or disable authentication",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `auth enable`.
pub const ENABLE: Command = Command {
    path: &["auth", "enable"],
    use_: "enable",
    short: "Enables authentication",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(enable),
};

/// `auth disable`.
pub const DISABLE: Command = Command {
    path: &["auth", "disable"],
    use_: "disable",
    short: "Disables authentication",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(disable),
};

/// `auth status` (etcdctl 3.5's).
pub const STATUS: Command = Command {
    path: &["auth", "status"],
    use_: "status",
    short: "Returns authentication status",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(status),
};

fn is(e: &oxcd_client::Error, want: EtcdError) -> bool {
    matches!(e, oxcd_client::Error::Status(s) if s.message() == want.message())
}

fn enable(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(bad_args(
                "auth enable command does not accept any arguments",
            ));
        }
        let s = ctx.session()?;
        let client = s.client().await?;
        loop {
            match client.auth_enable().await {
                Ok(_) => break,
                Err(e) if is(&e, EtcdError::RootRoleNotExist) => {
                    client.role_add("root").await?;
                    client.user_grant_role("root", "root").await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Out::text("Authentication Enabled\n".into()))
    })
}

fn disable(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(bad_args(
                "auth disable command does not accept any arguments",
            ));
        }
        let s = ctx.session()?;
        s.client().await?.auth_disable().await?;
        Ok(Out::text("Authentication Disabled\n".into()))
    })
}

fn status(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(bad_args(
                "auth status command does not accept any arguments",
            ));
        }
        let s = ctx.session()?;
        let resp = s.client().await?.auth_status().await?;
        printed(s.printer.auth_status(&resp))
    })
}
