//! `endpoint health` and `endpoint status`, each endpoint asked on its own.

use std::time::Instant;

use oxcd_api::etcdserverpb::HashKvRequest;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{
    AlarmRequest, AlarmType, MemberListRequest, RangeRequest, StatusRequest,
};

use super::{Command, Run};
use crate::args::boolean;
use crate::output::{Health, Out};
use crate::{Ctx, Fail, exit};

/// `endpoint health`.
pub const HEALTH: Command = Command {
    words: &["endpoint", "health"],
    flags: &[boolean("cluster")],
    help: "endpoint health - Checks the healthiness of endpoints specified in `--endpoints` flag\n\nOPTIONS:\n  --cluster  use all endpoints from the cluster member list\n",
    run: health,
};

/// `endpoint status`.
pub const STATUS: Command = Command {
    words: &["endpoint", "status"],
    flags: &[boolean("cluster")],
    help: "endpoint status - Prints out the status of endpoints specified in `--endpoints` flag\n\nOPTIONS:\n  --cluster  use all endpoints from the cluster member list\n",
    run: status,
};

/// `endpoint hashkv`.
pub const HASHKV: Command = Command {
    words: &["endpoint", "hashkv"],
    flags: &[boolean("cluster"), crate::args::value("rev", "0")],
    help: "endpoint hashkv - Prints the KV history hash for each endpoint in --endpoints\n\nOPTIONS:\n  --cluster  use all endpoints from the cluster member list\n  --rev=0  maximum revision to hash (default: all revisions)\n",
    run: hashkv,
};

/// The endpoints to ask: the flag's, or every member's client URLs with `--cluster`.
async fn endpoints(ctx: &Ctx) -> Result<Vec<String>, Fail> {
    if !ctx.flags.flag("cluster") {
        return Ok(ctx.endpoints());
    }
    let c = ctx.client().await?;
    let members = ctx
        .timed(c.cluster().member_list(MemberListRequest {
            linearizable: false,
        }))
        .await?;
    let mut eps: Vec<String> = members
        .members
        .into_iter()
        .flat_map(|m| m.client_ur_ls)
        .collect();
    eps.dedup();
    Ok(eps)
}

/// A context that talks to `ep` only.
pub fn single(ctx: &Ctx, ep: &str) -> Ctx {
    let mut flags =
        crate::args::parse(&[format!("--endpoints={ep}")], crate::GLOBAL).unwrap_or_default();
    flags.set_if_unset("endpoints", ep.to_string());
    Ctx {
        flags,
        printer: ctx.printer,
        conn: ctx.conn.clone(),
    }
}

async fn check(ctx: &Ctx, ep: &str) -> Health {
    let one = single(ctx, ep);
    let start = Instant::now();
    let mut h = Health {
        endpoint: ep.to_string(),
        healthy: false,
        took: Default::default(),
        error: String::new(),
    };
    let c = match one.client().await {
        Ok(c) => c,
        Err(e) => {
            h.took = start.elapsed();
            h.error = e.msg;
            return h;
        }
    };
    let got = one
        .timed(c.kv().range(RangeRequest {
            key: b"health".to_vec(),
            ..Default::default()
        }))
        .await;
    h.took = start.elapsed();
    match got {
        Ok(_) => h.healthy = true,
        Err(e) if e.msg == oxcd_api::errors::EtcdError::PermissionDenied.message() => {
            h.healthy = true
        }
        Err(e) => h.error = e.msg,
    }
    if h.healthy {
        let alarms = one
            .timed(c.maintenance().alarm(AlarmRequest {
                action: AlarmAction::Get as i32,
                member_id: 0,
                alarm: 0,
            }))
            .await;
        match alarms {
            Ok(a) if !a.alarms.is_empty() => {
                h.healthy = false;
                h.error = "Active Alarm(s): ".to_string();
                for al in a.alarms {
                    h.error.push_str(match AlarmType::try_from(al.alarm) {
                        Ok(AlarmType::Nospace) => "NOSPACE ",
                        Ok(AlarmType::Corrupt) => "CORRUPT ",
                        _ => "UNKNOWN ",
                    });
                }
            }
            Ok(_) => {}
            Err(_) => {
                h.healthy = false;
                h.error = "Unable to fetch the alarm list".into();
            }
        }
    }
    h
}

fn health(ctx: Ctx) -> Run {
    Box::pin(async move {
        let eps = endpoints(&ctx).await?;
        let checks = eps.iter().map(|ep| check(&ctx, ep));
        let list: Vec<Health> = futures_join(checks).await;
        let out = ctx
            .printer
            .health(&list)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?;
        if list.iter().any(|h| !h.healthy) {
            let mut f = Fail::new(exit::ERROR, "unhealthy cluster");
            f.partial = out;
            return Err(f);
        }
        Ok(out)
    })
}

/// Runs the checks concurrently, keeping the endpoints' order.
async fn futures_join<F: std::future::Future<Output = Health>>(
    fs: impl Iterator<Item = F>,
) -> Vec<Health> {
    let mut set = Vec::new();
    for f in fs {
        set.push(f);
    }
    let mut out = Vec::with_capacity(set.len());
    for f in set {
        out.push(f.await);
    }
    out
}

/// Asks every endpoint on its own with `ask`; returns the answers and etcdctl's
/// "Failed to get the <what> of endpoint ..." lines for those that failed.
async fn per_endpoint<T, F>(
    ctx: &Ctx,
    what: &str,
    ask: F,
) -> Result<(Vec<(String, T)>, String), Fail>
where
    F: AsyncFn(&Ctx, &oxcd_client::Client) -> Result<T, Fail>,
{
    let mut list = Vec::new();
    let mut failed = String::new();
    for ep in &endpoints(ctx).await? {
        let one = single(ctx, ep);
        let res = match one.client().await {
            Ok(c) => ask(&one, &c).await,
            Err(e) => Err(e),
        };
        match res {
            Ok(x) => list.push((ep.clone(), x)),
            Err(e) => failed.push_str(&format!(
                "Failed to get the {what} of endpoint {ep} ({})\n",
                e.msg
            )),
        }
    }
    Ok((list, failed))
}

/// Prints what was answered; with failures the exit code is 1 and no "Error:" line
/// follows (the failure lines already said it), as etcdctl does.
fn finish(printed: Result<Out, String>, failed: String) -> Result<Out, Fail> {
    let mut out = printed.map_err(|e| Fail::new(exit::BAD_FEATURE, e))?;
    if failed.is_empty() {
        return Ok(out);
    }
    out.stderr = failed + &out.stderr;
    Err(Fail {
        code: exit::ERROR,
        msg: String::new(),
        partial: out,
    })
}

fn status(ctx: Ctx) -> Run {
    Box::pin(async move {
        let (list, failed) = per_endpoint(
            &ctx,
            "status",
            async |one: &Ctx, c: &oxcd_client::Client| {
                one.timed(c.maintenance().status(StatusRequest {})).await
            },
        )
        .await?;
        finish(ctx.printer.status(&list), failed)
    })
}

fn hashkv(ctx: Ctx) -> Run {
    Box::pin(async move {
        let rev: i64 = ctx.flags.get("rev").parse().map_err(|_| {
            Fail::new(
                exit::BAD_ARGS,
                format!(
                    "invalid argument {:?} for \"--rev\" flag",
                    ctx.flags.get("rev")
                ),
            )
        })?;
        let (list, failed) =
            per_endpoint(&ctx, "hash", async |one: &Ctx, c: &oxcd_client::Client| {
                one.timed(c.maintenance().hash_kv(HashKvRequest { revision: rev }))
                    .await
            })
            .await?;
        finish(ctx.printer.hashkv(&list), failed)
    })
}
