//! `lock <lockname> [exec-command arg1 arg2 ...]`, as etcdctl 3.4: takes the lock
//! (the Lock service, on a session lease of `--ttl` seconds), then either prints the
//! lock's key as `get` would and holds it until SIGINT or SIGTERM, or runs the command
//! with `ETCD_LOCK_KEY` and `ETCD_LOCK_REV` set and releases it once the command ends.
//! An interrupt while waiting ends with "context canceled" (exit 1).

use std::process::Stdio;

use super::hold::{CANCELED, Interrupts, LeaseSession, exit_error, spawn_error};
use crate::args::int64;
use crate::command::{Command, Run, failed};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};

/// `lock <lockname> [exec-command arg1 arg2 ...]`.
pub const LOCK: Command = Command {
    path: &["lock"],
    use_: "lock <lockname> [exec-command arg1 arg2 ...]",
    short: "Acquires a named lock",
    long: "",
    flags: &[int64("ttl", "timeout for session").default("10")],
    persistent: &[],
    run: Some(lock),
};

fn lock(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        let Some((name, exec)) = args.split_first() else {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "lock takes a lock name argument and an optional command to execute",
            ));
        };
        let ttl = ctx.flags.int("ttl");
        let s = ctx.session()?;
        let client = s.client().await?;
        let session = LeaseSession::grant(&client, ttl).await?;
        let mut interrupts = Interrupts::catch()?;
        let held = tokio::select! {
            r = client.lock(name.as_bytes(), session.id()) => r.map_err(failed)?,
            _ = interrupts.recv() => return Err(Fail::new(exit::ERROR, CANCELED)),
        };
        let key = held.key;
        if !exec.is_empty() {
            let rev = held.header.map(|h| h.revision);
            let ran = run_command(exec, &key, rev).await;
            let unlocked = client.unlock(key).await;
            ran?;
            unlocked.map_err(failed)?;
            return Ok(Default::default());
        }
        let got = client.get(key.clone()).await.map_err(failed)?;
        if got.kvs.is_empty() {
            return Err(Fail::new(exit::ERROR, "lock lost on init"));
        }
        s.printer
            .range(&got)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?
            .write();
        tokio::select! {
            _ = interrupts.recv() => {
                client.unlock(key).await.map_err(failed)?;
                Ok(Default::default())
            }
            _ = session.expired() => Err(Fail::new(exit::ERROR, "session expired")),
        }
    })
}

/// Runs `exec` with the lock's variables (which, as in etcdctl, the environment's own
/// values of the same names override), stdin closed, stdout and stderr shared.
async fn run_command(exec: &[String], key: &[u8], rev: Option<i64>) -> Result<(), Fail> {
    let mut cmd = tokio::process::Command::new(&exec[0]);
    cmd.args(&exec[1..]).stdin(Stdio::null());
    if let Some(rev) = rev {
        let vars = [
            ("ETCD_LOCK_KEY", String::from_utf8_lossy(key).into_owned()),
            ("ETCD_LOCK_REV", rev.to_string()),
        ];
        for (k, v) in vars {
            if std::env::var_os(k).is_none() {
                cmd.env(k, v);
            }
        }
    }
    let status = cmd
        .status()
        .await
        .map_err(|e| Fail::new(exit::ERROR, spawn_error(&exec[0], &e)))?;
    match exit_error(status) {
        Some(msg) => Err(Fail::new(exit::ERROR, msg)),
        None => Ok(()),
    }
}
