//! `member add`, `member remove`, `member update`, `member promote` and `member list`
//! with etcdctl 3.4's argument checks, messages and exit codes: member ids in hex, as
//! Go's `strconv.ParseUint(id, 16, 64)` reads them; peer URLs split on commas and
//! checked as clientv3 checks them before asking; request failures bare (exit 1).
//!
//! etcdctl's client connects lazily, so its checks of the peer URLs come before any
//! connection is made; oxcdctl checks them before connecting too.

use crate::args::{boolean, string};
use crate::command::{Command, Run, bad_args, failed, printed};
use crate::ctx::Ctx;
use crate::fail::Fail;
use oxcd_go::strconv;

/// `member`: prints its help.
pub const GROUP: Command = Command {
    path: &["member"],
    use_: "member <subcommand>",
    short: "Membership related commands",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `member add <memberName> --peer-urls=... [--learner]`.
pub const ADD: Command = Command {
    path: &["member", "add"],
    use_: "add <memberName> [options]",
    short: "Adds a member into the cluster",
    long: "",
    flags: &[
        string(
            "peer-urls",
            "",
            "comma separated peer URLs for the new member.",
        ),
        boolean("learner", "indicates if the new member is raft learner"),
    ],
    persistent: &[],
    run: Some(add),
};

/// `member remove <memberID>`.
pub const REMOVE: Command = Command {
    path: &["member", "remove"],
    use_: "remove <memberID>",
    short: "Removes a member from the cluster",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(remove),
};

/// `member update <memberID> --peer-urls=...`.
pub const UPDATE: Command = Command {
    path: &["member", "update"],
    use_: "update <memberID> [options]",
    short: "Updates a member in the cluster",
    long: "",
    flags: &[string(
        "peer-urls",
        "",
        "comma separated peer URLs for the updated member.",
    )],
    persistent: &[],
    run: Some(update),
};

/// `member list`.
pub const LIST: Command = Command {
    path: &["member", "list"],
    use_: "list",
    short: "Lists all members in the cluster",
    long: "When --write-out is set to simple, this command prints out comma-separated member lists for each endpoint.
The items in the lists are ID, Status, Name, Peer Addrs, Client Addrs, Is Learner.
",
    // etcdctl 3.6 (v3.6.14 etcdctl/ctlv3/command/member_command.go NewMemberListCommand).
    flags: &[string(
        "consistency",
        "l",
        "Linearizable(l) or Serializable(s)",
    )],
    persistent: &[],
    run: Some(list),
};

/// `member promote <memberID>`.
pub const PROMOTE: Command = Command {
    path: &["member", "promote"],
    use_: "promote <memberID>",
    short: "Promotes a non-voting member in the cluster",
    long: "Promotes a non-voting learner member to a voting one in the cluster.\n",
    flags: &[],
    persistent: &[],
    run: Some(promote),
};

/// The one argument of remove, update and promote: a member id in hex.
fn member_id(args: &[String]) -> Result<u64, Fail> {
    let [id] = args else {
        return Err(bad_args("member ID is not provided"));
    };
    strconv::parse_uint(id, 16, 64)
        .map_err(|e| bad_args(&format!("bad member ID arg ({e}), expecting ID in Hex")))
}

/// `--peer-urls`: the flag's text and the URLs it lists; refused when empty.
fn peer_urls(ctx: &Ctx) -> Result<(String, Vec<String>), Fail> {
    let text = ctx.flags.get("peer-urls").to_string();
    if text.is_empty() {
        return Err(bad_args("member peer urls not provided"));
    }
    let urls = text.split(',').map(str::to_string).collect();
    Ok((text, urls))
}

fn add(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        let name = match args.as_slice() {
            [] => return Err(bad_args("member name not provided")),
            [name] => name.clone(),
            _ => {
                let mut msg = String::from("too many arguments");
                for a in args.iter().filter(|a| a.to_lowercase().starts_with("http")) {
                    msg.push_str(&format!(", did you mean --peer-urls={a}"));
                }
                return Err(bad_args(&msg));
            }
        };
        let (text, urls) = peer_urls(&ctx)?;
        let learner = ctx.flags.flag("learner");
        let s = ctx.session()?;
        oxcd_client::check_peer_urls(&urls).map_err(failed)?;
        let resp = s
            .client()
            .await?
            .member_add(urls, learner)
            .await
            .map_err(failed)?;
        printed(s.printer.member_add(&name, &text, &resp))
    })
}

fn remove(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let id = member_id(&ctx.flags.args)?;
        let s = ctx.session()?;
        let resp = s.client().await?.member_remove(id).await.map_err(failed)?;
        printed(s.printer.member_remove(id, &resp))
    })
}

fn update(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let id = member_id(&ctx.flags.args)?;
        let (_, urls) = peer_urls(&ctx)?;
        let s = ctx.session()?;
        oxcd_client::check_peer_urls(&urls).map_err(failed)?;
        let resp = s
            .client()
            .await?
            .member_update(id, urls)
            .await
            .map_err(failed)?;
        printed(s.printer.member_update(id, &resp))
    })
}

/// `member list`: etcdctl takes (and ignores) any arguments. `--consistency` as etcdctl
/// 3.6's, whose error names the value `get` was given (a slip in its member command);
/// oxcdctl names the value given.
fn list(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let linearizable = !crate::command::serializable(ctx.flags.get("consistency"))?;
        let s = ctx.session()?;
        let resp = s
            .client()
            .await?
            .member_list(linearizable)
            .await
            .map_err(failed)?;
        printed(s.printer.member_list(&resp))
    })
}

fn promote(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let id = member_id(&ctx.flags.args)?;
        let s = ctx.session()?;
        let resp = s.client().await?.member_promote(id).await.map_err(failed)?;
        printed(s.printer.member_promote(id, &resp))
    })
}
