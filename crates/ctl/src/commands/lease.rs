//! `lease grant`, `lease revoke`, `lease timetolive` and `lease list` with etcdctl 3.4's
//! argument checks, messages and exit codes: lease ids in hex, as Go's
//! `strconv.ParseInt(id, 16, 64)` reads them; grant and revoke failures wrapped ("failed
//! to grant lease (...)", exit 1), timetolive and list failures bare (exit 2). `lease
//! keep-alive` is [`super::keep_alive`]'s.

use oxcd_client::Client;

use crate::args::boolean;
use crate::command::{Command, Run, bad_args};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::session::{Session, connect_failure};
use oxcd_go::strconv;

/// `lease`: prints its help.
pub const GROUP: Command = Command {
    path: &["lease"],
    use_: "lease <subcommand>",
    short: "Lease related commands",
    long: "",
    flags: &[],
    persistent: &[],
    run: None,
};

/// `lease grant <ttl>`.
pub const GRANT: Command = Command {
    path: &["lease", "grant"],
    use_: "grant <ttl>",
    short: "Creates leases",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(grant),
};

/// `lease revoke <leaseID>`.
pub const REVOKE: Command = Command {
    path: &["lease", "revoke"],
    use_: "revoke <leaseID>",
    short: "Revokes leases",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(revoke),
};

/// `lease timetolive <leaseID> [--keys]`.
pub const TIME_TO_LIVE: Command = Command {
    path: &["lease", "timetolive"],
    use_: "timetolive <leaseID> [options]",
    short: "Get lease information",
    long: "",
    flags: &[boolean("keys", "Get keys attached to this lease")],
    persistent: &[],
    run: Some(time_to_live),
};

/// `lease list`.
pub const LIST: Command = Command {
    path: &["lease", "list"],
    use_: "list",
    short: "List all active leases",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(list),
};

/// A lease id argument, read as etcdctl's `leaseFromArgs` reads it.
pub(super) fn lease_id(arg: &str) -> Result<i64, Fail> {
    strconv::parse_int(arg, 16, 64)
        .map_err(|e| bad_args(&format!("bad lease ID arg ({e}), expecting ID in Hex")))
}

/// Connects for a request whose failure `fail` words. etcdctl's client connects lazily,
/// so an unreachable cluster is its request's failure; a refused login stays the
/// client's.
pub(super) async fn connect(
    s: &Session,
    fail: impl Fn(oxcd_client::Error) -> Fail,
) -> Result<Client, Fail> {
    Client::connect(&s.endpoints, &s.conn)
        .await
        .map_err(|e| match e {
            oxcd_client::Error::DeadlineExceeded => fail(e),
            other => connect_failure(other),
        })
}

/// How timetolive, list and keep-alive fail: the client's error, exit 2.
pub(super) fn bad_connection(e: oxcd_client::Error) -> Fail {
    Fail::new(exit::BAD_CONNECTION, e.to_string())
}

fn grant(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args("lease grant command needs TTL argument"));
        }
        let ttl = strconv::parse_int(&args[0], 10, 64)
            .map_err(|e| bad_args(&format!("bad TTL ({e})")))?;
        let s = ctx.session()?;
        let failed =
            |e: oxcd_client::Error| Fail::new(exit::ERROR, format!("failed to grant lease ({e})"));
        let resp = connect(&s, failed)
            .await?
            .lease_grant(ttl, 0)
            .await
            .map_err(failed)?;
        s.printer
            .grant(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

fn revoke(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args("lease revoke command needs 1 argument"));
        }
        let id = lease_id(&args[0])?;
        let s = ctx.session()?;
        let failed =
            |e: oxcd_client::Error| Fail::new(exit::ERROR, format!("failed to revoke lease ({e})"));
        let resp = connect(&s, failed)
            .await?
            .lease_revoke(id)
            .await
            .map_err(failed)?;
        s.printer
            .revoke(id, &resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

fn time_to_live(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(bad_args(
                "lease timetolive command needs lease ID as argument",
            ));
        }
        // etcdctl sets its client up (and checks the output format) before it reads the id.
        let s = ctx.session()?;
        let id = lease_id(&args[0])?;
        let keys = ctx.flags.flag("keys");
        let resp = connect(&s, bad_connection)
            .await?
            .lease_time_to_live(id, keys)
            .await
            .map_err(bad_connection)?;
        s.printer
            .time_to_live(&resp, keys)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

/// `lease list`: etcdctl takes (and ignores) any arguments.
fn list(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let s = ctx.session()?;
        let resp = connect(&s, bad_connection)
            .await?
            .leases()
            .await
            .map_err(bad_connection)?;
        s.printer
            .leases(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}
