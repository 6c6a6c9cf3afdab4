//! `downgrade validate|enable|cancel` (etcdctl 3.6,
//! `etcdctl/ctlv3/command/downgrade_command.go`): the Downgrade RPC, with etcdctl's
//! argument errors and output.

use oxcd_api::etcdserverpb::downgrade_request::DowngradeAction;

use crate::command::{Command, Run};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};

/// `downgrade`: the group.
pub const GROUP: Command = Command {
    path: &["downgrade"],
    use_: "downgrade <TARGET_VERSION>",
    short: "Downgrade related commands",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `downgrade validate <TARGET_VERSION>`.
pub const VALIDATE: Command = Command {
    path: &["downgrade", "validate"],
    use_: "validate <TARGET_VERSION>",
    short: "Validate downgrade capability before starting downgrade",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(validate),
};

/// `downgrade enable <TARGET_VERSION>`.
pub const ENABLE: Command = Command {
    path: &["downgrade", "enable"],
    use_: "enable <TARGET_VERSION>",
    short: "Start a downgrade action to cluster",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(enable),
};

/// `downgrade cancel`.
pub const CANCEL: Command = Command {
    path: &["downgrade", "cancel"],
    use_: "cancel",
    short: "Cancel the ongoing downgrade action to cluster",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(cancel),
};

fn validate(ctx: Ctx) -> Run {
    Box::pin(run(ctx, DowngradeAction::Validate, "validate"))
}

fn enable(ctx: Ctx) -> Run {
    Box::pin(run(ctx, DowngradeAction::Enable, "enable"))
}

fn cancel(ctx: Ctx) -> Run {
    Box::pin(run(ctx, DowngradeAction::Cancel, "cancel"))
}

/// The target version argument, refused with etcdctl's texts.
fn target(args: &[String]) -> Result<String, Fail> {
    match args {
        [] => Err(Fail::new(exit::BAD_ARGS, "TARGET_VERSION not provided")),
        [v] if v.is_empty() => Err(Fail::new(exit::BAD_ARGS, "target version not provided")),
        [v] => Ok(v.clone()),
        _ => Err(Fail::new(exit::BAD_ARGS, "too many arguments")),
    }
}

async fn run(
    mut ctx: Ctx,
    action: DowngradeAction,
    verb: &'static str,
) -> Result<crate::output::Out, Fail> {
    let version = if action == DowngradeAction::Cancel {
        String::new()
    } else {
        target(&ctx.flags.args)?
    };
    let s = ctx.session()?;
    let c = s.client().await?;
    let resp = c.downgrade(action, &version).await?;
    s.printer
        .downgrade(verb, &resp)
        .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
}
