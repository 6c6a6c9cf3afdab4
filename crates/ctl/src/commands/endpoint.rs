//! `endpoint health`, `endpoint status` and `endpoint hashkv`: each endpoint asked on its
//! own; `--cluster` asks every member's client URLs instead of `--endpoints`.

use std::time::Instant;

use oxcd_api::errors::EtcdError;
use oxcd_client::{Client, ConnectOptions};
use tokio::task::JoinSet;

use crate::args::{boolean, int64};
use crate::command::{Command, Run};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::{Health, Out};
use crate::session::Session;

/// `endpoint`: prints its help.
pub const GROUP: Command = Command {
    path: &["endpoint"],
    use_: "endpoint <subcommand>",
    short: "Endpoint related commands",
    long: "",
    flags: &[],
    persistent: &[boolean(
        "cluster",
        "use all endpoints from the cluster member list",
    )],
    run: None,
};

/// `endpoint health`.
pub const HEALTH: Command = Command {
    path: &["endpoint", "health"],
    use_: "health",
    short: "Checks the healthiness of endpoints specified in `--endpoints` flag",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(health),
};

/// `endpoint status`.
pub const STATUS: Command = Command {
    path: &["endpoint", "status"],
    use_: "status",
    short: "Prints out the status of endpoints specified in `--endpoints` flag",
    long: "
When --write-out is set to simple, this command prints out comma-separated status lists for each endpoint.
The items in the lists are endpoint, ID, version, db size, is leader, is learner, raft term, raft index, raft applied index, errors.
",
    flags: &[],
    persistent: &[],
    run: Some(status),
};

/// `endpoint hashkv`.
pub const HASHKV: Command = Command {
    path: &["endpoint", "hashkv"],
    use_: "hashkv",
    short: "Prints the KV history hash for each endpoint in --endpoints",
    long: "",
    flags: &[int64(
        "rev",
        "maximum revision to hash (default: all revisions)",
    )],
    persistent: &[],
    run: Some(hashkv),
};

/// The endpoints to ask: `--endpoints`, or with `--cluster` every member's client URLs
/// (asked without credentials, as etcdctl: listing members needs none).
pub(super) async fn endpoints(ctx: &Ctx, s: &Session) -> Result<Vec<String>, Fail> {
    if !ctx.flags.flag("cluster") {
        return Ok(s.endpoints.clone());
    }
    let opts = ConnectOptions {
        credentials: None,
        ..s.conn.clone()
    };
    let members = match Client::connect(&s.endpoints, &opts).await {
        Ok(c) => c.member_list(false).await,
        Err(e) => Err(e),
    }
    .map_err(|e| {
        Fail::new(
            exit::ERROR,
            format!("failed to fetch endpoints from etcd cluster member list: {e}"),
        )
    })?;
    Ok(members
        .members
        .into_iter()
        .flat_map(|m| m.client_ur_ls)
        .collect())
}

/// One endpoint's health: a linearizable get of `health` (permission denied counts as
/// healthy: the request went through consensus).
async fn check(ep: String, opts: ConnectOptions) -> Health {
    let start = Instant::now();
    let mut h = Health {
        endpoint: ep.clone(),
        healthy: false,
        took: None,
        error: String::new(),
    };
    let c = match Client::connect(std::slice::from_ref(&ep), &opts).await {
        Ok(c) => c,
        Err(e @ oxcd_client::Error::DeadlineExceeded) => {
            h.took = Some(start.elapsed());
            h.error = e.to_string();
            return h;
        }
        Err(e) => {
            h.error = e.to_string();
            return h;
        }
    };
    let start = Instant::now();
    let got = c.get("health").await;
    h.took = Some(start.elapsed());
    match got {
        Ok(_) => h.healthy = true,
        Err(e)
            if e.status()
                .is_some_and(|s| s.message() == EtcdError::PermissionDenied.message()) =>
        {
            h.healthy = true
        }
        Err(e) => h.error = e.to_string(),
    }
    h
}

fn health(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let s = ctx.session()?;
        let eps = endpoints(&ctx, &s).await?;
        let mut set = JoinSet::new();
        for ep in eps {
            set.spawn(check(ep, s.conn.clone()));
        }
        // As etcdctl: in the order the answers come.
        let mut list = Vec::new();
        while let Some(h) = set.join_next().await {
            list.push(h.map_err(|e| Fail::new(exit::ERROR, e.to_string()))?);
        }
        let out = s
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

/// Asks each endpoint with `ask`; failures are reported on stderr as
/// `Failed to get the <what> of endpoint <ep> (<error>)` and the rest printed.
async fn per_endpoint<T, F>(
    s: &Session,
    eps: &[String],
    what: &str,
    ask: impl Fn(Client) -> F,
) -> (Vec<(String, T)>, String, Option<Fail>)
where
    F: Future<Output = Result<T, oxcd_client::Error>>,
{
    let mut list = Vec::new();
    let mut failed = String::new();
    let mut last = None;
    for ep in eps {
        let res = match s.client_for(std::slice::from_ref(ep)).await {
            Ok(c) => ask(c).await.map_err(Fail::from),
            Err(e) => Err(e),
        };
        match res {
            Ok(r) => list.push((ep.clone(), r)),
            Err(e) => {
                let msg = e.msg.clone().unwrap_or_default();
                failed.push_str(&format!(
                    "Failed to get the {what} of endpoint {ep} ({msg})\n"
                ));
                last = Some(e);
            }
        }
    }
    (list, failed, last)
}

fn status(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let s = ctx.session()?;
        let eps = endpoints(&ctx, &s).await?;
        let (list, failed, last) =
            per_endpoint(&s, &eps, "status", |c| async move { c.status().await }).await;
        let out = s
            .printer
            .status(&list)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?;
        let out = Out::err(failed).then(out);
        match last {
            // etcdctl exits 1 without an `Error:` line here.
            Some(_) => {
                let mut f = Fail::silent(exit::ERROR);
                f.partial = out;
                Err(f)
            }
            None => Ok::<Out, Fail>(out),
        }
    })
}

fn hashkv(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let rev = ctx.flags.int("rev");
        let s = ctx.session()?;
        let eps = endpoints(&ctx, &s).await?;
        let (list, failed, last) =
            per_endpoint(&s, &eps, "hash", |c| async move { c.hash_kv(rev).await }).await;
        let out = s
            .printer
            .hashkv(&list)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?;
        let out = Out::err(failed).then(out);
        match last {
            Some(mut f) => {
                f.code = exit::ERROR;
                f.partial = out;
                Err(f)
            }
            None => Ok::<Out, Fail>(out),
        }
    })
}
