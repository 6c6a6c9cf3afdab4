//! `elect <election-name> [proposal]` and `elect -l <election-name>`, as etcdctl 3.4:
//! a candidate campaigns (the Election service, on a 60-second session lease), prints
//! its leader key and value as `get` would once elected, holds the leadership until
//! SIGINT or SIGTERM and then resigns; an observer prints each leader (and each new
//! value of it) as the election reports them, until interrupted.

use oxcd_api::etcdserverpb::RangeResponse;

use super::hold::{CANCELED, Interrupts, LeaseSession};
use crate::args::boolean;
use crate::command::{Command, Run, bad_args, failed};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::Printer;

/// `elect <election-name> [proposal]`.
pub const ELECT: Command = Command {
    path: &["elect"],
    use_: "elect <election-name> [proposal]",
    short: "Observes and participates in leader election",
    long: "",
    flags: &[boolean("listen", "observation mode").short('l')],
    persistent: &[],
    run: Some(elect),
};

fn print(printer: &Printer, resp: &RangeResponse) -> Result<(), Fail> {
    printer
        .range(resp)
        .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?
        .write();
    Ok(())
}

fn elect(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        let listen = ctx.flags.flag("listen");
        if args.is_empty() || args.len() > 2 {
            return Err(bad_args(
                "elect takes one election name argument and an optional proposal argument",
            ));
        }
        let s = ctx.session()?;
        let client = s.client().await?;
        match (args.as_slice(), listen) {
            ([_], false) => Err(bad_args("no proposal argument but -l not set")),
            ([_, _], true) => Err(bad_args("proposal given but -l is set")),
            ([name], true) => observe(&client, &s.printer, name).await,
            ([name, proposal], false) => campaign(&client, &s.printer, name, proposal).await,
            _ => Err(bad_args("bad number of arguments")),
        }
    })
}

/// Prints every leader until interrupted; a broken observation is "observer lost".
async fn observe(
    client: &oxcd_client::Client,
    printer: &Printer,
    name: &str,
) -> Result<crate::output::Out, Fail> {
    // etcdctl opens a session for the observer too.
    let _session = LeaseSession::grant(client, 0).await?;
    let mut interrupts = Interrupts::catch()?;
    let mut stream = tokio::select! {
        r = client.observe(name.as_bytes()) => r.map_err(failed)?,
        _ = interrupts.recv() => return Ok(Default::default()),
    };
    loop {
        let next = tokio::select! {
            m = stream.message() => m,
            _ = interrupts.recv() => return Ok(Default::default()),
        };
        let Ok(Some(leader)) = next else {
            return Err(Fail::new(exit::ERROR, "elect: observer lost"));
        };
        // What clientv3's observer hands out: the header and the leader's kv, no count.
        let resp = RangeResponse {
            header: leader.header,
            kvs: leader.kv.into_iter().collect(),
            ..Default::default()
        };
        print(printer, &resp)?;
    }
}

/// Campaigns, prints the leader key once elected, resigns when interrupted.
async fn campaign(
    client: &oxcd_client::Client,
    printer: &Printer,
    name: &str,
    proposal: &str,
) -> Result<crate::output::Out, Fail> {
    let session = LeaseSession::grant(client, 0).await?;
    let mut interrupts = Interrupts::catch()?;
    let elected = tokio::select! {
        r = client.campaign(name.as_bytes(), session.id(), proposal.as_bytes()) => {
            r.map_err(failed)?
        }
        _ = interrupts.recv() => return Err(Fail::new(exit::ERROR, CANCELED)),
    };
    let Some(leader) = elected.leader else {
        return Err(Fail::new(exit::ERROR, "elect: no leader key in the answer"));
    };
    let got = tokio::select! {
        r = client.get(leader.key.clone()) => r.map_err(failed)?,
        _ = interrupts.recv() => return Err(Fail::new(exit::ERROR, CANCELED)),
    };
    print(printer, &got)?;
    tokio::select! {
        _ = interrupts.recv() => {}
        _ = session.expired() => {
            return Err(Fail::new(exit::ERROR, "elect: session expired"));
        }
    }
    client.resign(leader).await.map_err(failed)?;
    Ok(Default::default())
}
