//! `lease keep-alive [--once] <leaseID>`: renews a lease once, or until it is gone, as
//! clientv3's keep-alive renews it for etcdctl 3.4: a keepalive a third of the TTL after
//! each answer (every half second while none comes), a new stream half a second after
//! one breaks, and the end once an answer says the lease is gone (TTL 0) or none came
//! within the TTL (within the dial timeout and a second, before the first answer).
//! Unlike clientv3, a new stream starts with a keepalive even when none is due yet (a
//! server answers the stream's headers with its first message).

use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::LeaseKeepAliveRequest;
use oxcd_client::Client;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::{Instant, sleep, timeout_at};

use super::lease::{bad_connection, connect, lease_id};
use crate::args::boolean;
use crate::command::{Command, Run};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::session::{Session, connect_failure};

/// `lease keep-alive [options] <leaseID>`.
pub const KEEP_ALIVE: Command = Command {
    path: &["lease", "keep-alive"],
    use_: "keep-alive [options] <leaseID>",
    short: "Keeps leases alive (renew)",
    long: "",
    flags: &[boolean(
        "once",
        "Resets the keep-alive time to its original value and exits immediately",
    )],
    persistent: &[],
    run: Some(keep_alive),
};

/// clientv3's pause between keepalives while no answer comes, and before a new stream.
const RETRY: Duration = Duration::from_millis(500);

fn keep_alive(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        if args.len() != 1 {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "lease keep-alive command needs lease ID as argument",
            ));
        }
        let id = lease_id(&args[0])?;
        let s = ctx.session()?;
        if ctx.flags.flag("once") {
            let resp = connect(&s, bad_connection)
                .await?
                .lease_keep_alive_once(id)
                .await
                .map_err(bad_connection)?;
            if resp.ttl <= 0 {
                return Err(Fail::new(
                    exit::BAD_CONNECTION,
                    EtcdError::LeaseNotFound.message(),
                ));
            }
            return s
                .printer
                .keep_alive(&resp)
                .map_err(|e| Fail::new(exit::BAD_FEATURE, e));
        }
        renew(&s, id).await?;
        Ok(s.printer.keep_alive_end(id))
    })
}

/// A TTL as a duration (capped at 2^32 seconds, beyond any wait that matters).
fn secs(ttl: i64) -> Duration {
    Duration::from_secs(ttl.clamp(0, 1 << 32).unsigned_abs())
}

/// Keeps lease `id` alive, printing each answer, until it is gone or an answer is late.
async fn renew(s: &Session, id: i64) -> Result<(), Fail> {
    // clientv3 waits the dial timeout and a second for the first answer (5 s without one).
    let first = match s.conn.dial_timeout {
        Duration::ZERO => Duration::from_secs(5),
        d => d + Duration::from_secs(1),
    };
    let mut deadline = Instant::now() + first;
    while Instant::now() < deadline {
        let client = match Client::connect(&s.endpoints, &s.conn).await {
            Ok(c) => c,
            Err(oxcd_client::Error::DeadlineExceeded) => {
                sleep(RETRY).await;
                continue;
            }
            Err(e) => return Err(connect_failure(e)),
        };
        let Ok((tx, mut stream)) = client.lease_keep_alive(id).await else {
            sleep(RETRY).await;
            continue;
        };
        let mut next = Instant::now() + RETRY;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            if now >= next {
                // A full queue (a server not reading) skips this keepalive, as the
                // deadline must still be kept.
                if let Err(TrySendError::Closed(_)) = tx.try_send(LeaseKeepAliveRequest { id }) {
                    break;
                }
                next = now + RETRY;
            }
            let resp = match timeout_at(next.min(deadline), stream.message()).await {
                // Time to send again, or to give up.
                Err(_) => continue,
                Ok(Ok(Some(resp))) => resp,
                // The stream broke: a new one after a pause.
                Ok(_) => break,
            };
            if resp.id != id {
                continue;
            }
            if resp.ttl <= 0 {
                return Ok(());
            }
            s.printer
                .keep_alive(&resp)
                .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?
                .write();
            let now = Instant::now();
            next = now + secs(resp.ttl) / 3;
            deadline = now + secs(resp.ttl);
        }
        sleep(RETRY).await;
    }
    Ok(())
}
