//! `watch`: streams a key's or a range's events as etcdctl 3.4 prints them, optionally
//! running a command per event; ends (exit 5, "watch is canceled by the server") when
//! the server cancels the watch, e.g. because its start revision was compacted.

use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{WatchCreateRequest, WatchRequest};
use oxcd_client::prefix_end;

use super::watch_events::{FLAGS, show};
use super::watch_interactive;
use crate::args::Parsed;
use crate::command::{Command, Run, bad_args};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};

/// `watch [options] [key or prefix] [range_end] [--] [exec-command arg1 arg2 ...]`.
pub const WATCH: Command = Command {
    path: &["watch"],
    use_: "watch [options] [key or prefix] [range_end] [--] [exec-command arg1 arg2 ...]",
    short: "Watches events stream on keys or prefixes",
    long: "",
    flags: FLAGS,
    persistent: &[],
    run: Some(watch),
};

/// The `ETCDCTL_WATCH_KEY` and `ETCDCTL_WATCH_RANGE_END` variables (empty when unset);
/// a range end without a key is refused.
fn env_keys() -> Result<(String, String), Fail> {
    let env_key = std::env::var("ETCDCTL_WATCH_KEY").unwrap_or_default();
    let env_range = std::env::var("ETCDCTL_WATCH_RANGE_END").unwrap_or_default();
    if env_key.is_empty() && !env_range.is_empty() {
        return Err(bad_args(&format!(
            "ETCDCTL_WATCH_KEY is empty but got ETCDCTL_WATCH_RANGE_END={}",
            oxcd_go::quote::quote_str(&env_range)
        )));
    }
    Ok((env_key, env_range))
}

/// The watch request and the command to run per event, from the arguments and the
/// `ETCDCTL_WATCH_KEY` / `ETCDCTL_WATCH_RANGE_END` variables.
fn request(
    p: &Parsed,
    env_key: String,
    env_range: String,
) -> Result<(WatchCreateRequest, Vec<String>), Fail> {
    // etcdctl's rules: a `--` needs a command after it; a key in the environment
    // conflicts with a key argument; more than two keys watch the first alone.
    let dash = p.args_before_dash.unwrap_or(p.args.len());
    let (before, exec) = (&p.args[..dash], p.args[dash..].to_vec());
    if p.args_before_dash.is_some() && exec.is_empty() {
        return Err(bad_args(
            "bad number of arguments (found separator --, but no commands)",
        ));
    }
    if !env_key.is_empty() && !before.is_empty() {
        return Err(bad_args(
            "bad number of arguments (found conflicting environment key)",
        ));
    }
    let mut keys: Vec<String> = before.to_vec();
    if !env_key.is_empty() {
        keys.push(env_key);
        if !env_range.is_empty() {
            keys.push(env_range);
        }
    }
    if keys.is_empty() {
        return Err(bad_args("bad number of arguments"));
    }
    let mut req = WatchCreateRequest {
        key: keys[0].clone().into_bytes(),
        start_revision: p.get("rev").parse().unwrap_or(0),
        prev_kv: p.flag("prev-kv"),
        progress_notify: p.flag("progress-notify"),
        ..Default::default()
    };
    if let [_, end] = keys.as_slice() {
        if p.flag("prefix") {
            return Err(bad_args(
                "`range_end` and `--prefix` are mutually exclusive",
            ));
        }
        req.range_end = end.clone().into_bytes();
    }
    if p.flag("prefix") {
        req.range_end = prefix_end(&req.key);
    }
    Ok((req, exec))
}

fn watch(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let (env_key, env_range) = env_keys()?;
        if ctx.flags.flag("interactive") {
            return watch_interactive::run(ctx, env_key, env_range).await;
        }
        let (mut req, exec) = request(&ctx.flags, env_key, env_range)?;
        let s = ctx.session()?;
        loop {
            let client = s.client().await?;
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let create = WatchRequest {
                request_union: Some(RequestUnion::CreateRequest(req.clone())),
            };
            if tx.send(create).await.is_err() {
                return Err(Fail::new(exit::ERROR, "watch request not sent"));
            }
            let stream = client
                .watch()
                .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await;
            let mut stream = match stream {
                Ok(s) => s.into_inner(),
                Err(_) => {
                    // As clientv3: keep trying until the cluster answers.
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                    continue;
                }
            };
            // The stream breaking (a member stopped) ends this loop: resume elsewhere.
            while let Ok(Some(resp)) = stream.message().await {
                if let Some(kv) = resp.events.last().and_then(|e| e.kv.as_ref()) {
                    // Where to resume if the stream breaks.
                    req.start_revision = kv.mod_revision + 1;
                }
                if show(&s.printer, &resp, &exec)? {
                    drop(tx);
                    return Err(Fail::new(
                        exit::INTERRUPTED,
                        "watch is canceled by the server",
                    ));
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
}
