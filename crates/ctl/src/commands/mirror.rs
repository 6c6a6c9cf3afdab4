//! `make-mirror [options] <destination>`, as etcdctl 3.4: copies every key under
//! `--prefix` (all keys by default) as of the current revision to the destination
//! cluster, with the prefix replaced by `--dest-prefix` (the same prefix by default,
//! none with `--no-dest-prefix`), then follows the source's changes from the next
//! revision, one destination txn per source revision. Every 30 seconds it prints how
//! many keys it has written (puts and deletes). It runs until it fails: a compacted
//! revision or a refused write ends it with the error (exit 1).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{
    DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest,
};
use oxcd_api::mvccpb::event::EventType;
use oxcd_client::{Client, ConnectOptions, TlsConfig, prefix_end};

use crate::args::{Parsed, boolean, string};
use crate::command::{Command, Run, failed};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};

/// `make-mirror [options] <destination>`.
pub const MAKE_MIRROR: Command = Command {
    path: &["make-mirror"],
    use_: "make-mirror [options] <destination>",
    short: "Makes a mirror at the destination etcd cluster",
    long: "",
    flags: &[
        string("prefix", "", "Key-value prefix to mirror"),
        string(
            "dest-prefix",
            "",
            "destination prefix to mirror a prefix to a different prefix in the destination cluster",
        ),
        boolean(
            "no-dest-prefix",
            "mirror key-values to the root of the destination cluster",
        ),
        string(
            "dest-cert",
            "",
            "Identify secure client using this TLS certificate file for the destination cluster",
        ),
        string(
            "dest-key",
            "",
            "Identify secure client using this TLS key file",
        ),
        string(
            "dest-cacert",
            "",
            "Verify certificates of TLS enabled secure servers using this CA bundle",
        ),
        boolean(
            "dest-insecure-transport",
            "Disable transport security for client connections",
        )
        .default("true"),
    ],
    persistent: &[],
    run: Some(make_mirror),
};

/// How many keys one read of the initial copy asks for.
const BATCH: i64 = 1000;

/// How often the count is printed.
const REPORT_EVERY: Duration = Duration::from_secs(30);

/// etcd's text for a compacted revision.
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";

/// The destination's settings: the global timeouts, its own TLS flags, no credentials.
fn dest_options(f: &Parsed, source: &ConnectOptions) -> ConnectOptions {
    let path = |name: &str| {
        Some(f.get(name))
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    let (ca_file, cert_file, key_file) = (path("dest-cacert"), path("dest-cert"), path("dest-key"));
    let given = ca_file.is_some() || cert_file.is_some() || key_file.is_some();
    let tls = (given || !f.flag("dest-insecure-transport")).then_some(TlsConfig {
        ca_file,
        cert_file,
        key_file,
        insecure_skip_verify: false,
    });
    ConnectOptions {
        credentials: None,
        tls,
        ..source.clone()
    }
}

/// Connects, trying again while no endpoint answers (as etcdctl waits for a cluster);
/// unusable settings fail at once.
async fn connect(endpoints: &[String], opts: &ConnectOptions) -> Result<Client, Fail> {
    loop {
        match Client::connect(endpoints, opts).await {
            Ok(c) => return Ok(c),
            Err(e @ (oxcd_client::Error::BadEndpoint(..) | oxcd_client::Error::Tls(_))) => {
                return Err(Fail::from(e));
            }
            Err(oxcd_client::Error::Status(s)) => {
                return Err(crate::session::connect_failure(oxcd_client::Error::Status(
                    s,
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// etcdctl's key mapping: the first occurrence of the source prefix replaced.
fn rename(key: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = if from.is_empty() {
        Some(0)
    } else {
        key.windows(from.len()).position(|w| w == from)
    };
    match at {
        Some(i) => [&key[..i], to, &key[i + from.len()..]].concat(),
        None => key.to_vec(),
    }
}

fn make_mirror(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = ctx.flags.args.clone();
        let [dest] = args.as_slice() else {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "make-mirror takes one destination argument",
            ));
        };
        let s = ctx.session()?;
        let f = &ctx.flags;
        let dc = connect(std::slice::from_ref(dest), &dest_options(f, &s.conn)).await?;
        let c = connect(&s.endpoints, &s.conn).await?;
        let total = Arc::new(AtomicI64::new(0));
        let counter = total.clone();
        let _report = Reporter(tokio::spawn(async move {
            loop {
                tokio::time::sleep(REPORT_EVERY).await;
                println!("{}", counter.load(Ordering::Relaxed));
            }
        }));
        let prefix = f.get("prefix").as_bytes().to_vec();
        let rev = c
            .get("foo")
            .await
            .map_err(failed)?
            .header
            .map_or(0, |h| h.revision);
        let no_dest = f.flag("no-dest-prefix");
        let dest_prefix = f.get("dest-prefix").as_bytes().to_vec();
        if no_dest && !dest_prefix.is_empty() {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "`--dest-prefix` and `--no-dest-prefix` cannot be set at the same time, choose one",
            ));
        }
        let to = if !no_dest && dest_prefix.is_empty() {
            prefix.clone()
        } else {
            dest_prefix
        };
        let m = Mirror {
            src: c,
            dst: dc,
            from: prefix,
            to,
            total,
        };
        m.copy_base(rev).await?;
        m.follow(rev + 1).await?;
        Ok(Default::default())
    })
}

/// Stops the count's printer when the command ends.
struct Reporter(tokio::task::JoinHandle<()>);

impl Drop for Reporter {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Mirror {
    src: Client,
    dst: Client,
    from: Vec<u8>,
    to: Vec<u8>,
    total: Arc<AtomicI64>,
}

impl Mirror {
    /// The source's range: the prefix, or every key.
    fn range(&self) -> (Vec<u8>, Vec<u8>) {
        if self.from.is_empty() {
            (vec![0], vec![0])
        } else {
            (self.from.clone(), prefix_end(&self.from))
        }
    }

    /// Copies every key as of `rev`, a batch at a time.
    async fn copy_base(&self, rev: i64) -> Result<(), Fail> {
        let (mut key, range_end) = self.range();
        loop {
            let resp = self
                .src
                .range(RangeRequest {
                    key: key.clone(),
                    range_end: range_end.clone(),
                    limit: BATCH,
                    revision: rev,
                    ..Default::default()
                })
                .await
                .map_err(failed)?;
            for kv in &resp.kvs {
                let put = PutRequest {
                    key: rename(&kv.key, &self.from, &self.to),
                    value: kv.value.clone(),
                    ..Default::default()
                };
                self.dst.put_request(put).await.map_err(failed)?;
                self.total.fetch_add(1, Ordering::Relaxed);
            }
            let Some(last) = resp.kvs.last().filter(|_| resp.more) else {
                return Ok(());
            };
            key = [last.key.as_slice(), &[0]].concat();
        }
    }

    /// Follows the source from `rev`: each revision's events as one txn.
    async fn follow(&self, rev: i64) -> Result<(), Fail> {
        let (key, range_end) = self.range();
        let create = WatchCreateRequest {
            key,
            range_end,
            start_revision: rev,
            ..Default::default()
        };
        let mut w = self
            .src
            .watch_resumable(create)
            .await
            .map_err(watch_failed)?;
        loop {
            let resp = w.next().await.map_err(watch_failed)?;
            let mut ops: Vec<RequestOp> = Vec::new();
            let mut last_rev = 0;
            for ev in &resp.events {
                let Some(kv) = &ev.kv else { continue };
                if last_rev != 0 && kv.mod_revision > last_rev {
                    self.apply(std::mem::take(&mut ops)).await?;
                }
                last_rev = kv.mod_revision;
                let key = rename(&kv.key, &self.from, &self.to);
                let req = if ev.r#type == EventType::Delete as i32 {
                    Request::RequestDeleteRange(DeleteRangeRequest {
                        key,
                        ..Default::default()
                    })
                } else {
                    Request::RequestPut(PutRequest {
                        key,
                        value: kv.value.clone(),
                        ..Default::default()
                    })
                };
                ops.push(RequestOp { request: Some(req) });
                self.total.fetch_add(1, Ordering::Relaxed);
            }
            if !ops.is_empty() {
                self.apply(ops).await?;
            }
        }
    }

    async fn apply(&self, success: Vec<RequestOp>) -> Result<(), Fail> {
        let txn = TxnRequest {
            success,
            ..Default::default()
        };
        self.dst.txn(txn).await.map_err(failed)?;
        Ok(())
    }
}

fn watch_failed(e: oxcd_client::Error) -> Fail {
    match e {
        oxcd_client::Error::Compacted(_) => Fail::new(exit::ERROR, COMPACTED),
        other => failed(other),
    }
}

#[cfg(test)]
mod tests {
    use super::rename;

    #[test]
    fn renames_like_strings_replace() {
        assert_eq!(rename(b"a/x", b"a/", b"b/"), b"b/x");
        assert_eq!(rename(b"k", b"", b"p/"), b"p/k");
        assert_eq!(rename(b"a/x", b"a/", b""), b"x");
        assert_eq!(rename(b"a/a/", b"a/", b"c"), b"ca/");
    }
}
