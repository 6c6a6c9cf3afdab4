//! The recorded workload: concurrent clients, each on one member, issuing puts,
//! linearizable and serializable gets, deletes, compare-and-set txns on value and on
//! mod_revision, multi-key txns and prefix ranges, and lease work: grant (a client-chosen
//! id, a short TTL), puts with the lease on keys of its own (`kl<client>-<lease>-<n>`,
//! under the ranges' prefix, written by nothing else), keepalives while the client uses
//! it, then a revocation or abandonment (it expires). Every operation is recorded with
//! its invocation and completion time; one with no answer is indeterminate, never
//! dropped. Each lease that was not revoked gets an expiry in the history, an
//! indeterminate operation of no client from half its TTL after the grant was sent.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, LeaseGrantOptions, PutOptions, Txn, TxnOp,
};

use crate::history::{Op, Operation, Outcome, Response};
use crate::rng::Rng;

/// What the clients do.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// Concurrent clients (client `c` talks to member `c % members`).
    pub clients: usize,
    /// Keys `k0..k<keys>`.
    pub keys: u64,
    /// Percent of operations that are writes (the rest are reads).
    pub write_percent: u64,
    /// How long a client waits for an answer before recording it indeterminate.
    pub op_timeout: Duration,
    /// Seed for the clients' choices.
    pub seed: u64,
}

/// TTL of the workload's leases, in seconds: short, so abandoned leases expire in the run.
pub const LEASE_TTL: i64 = 3;

/// How often a client renews the lease it uses.
const KEEPALIVE_EVERY: Duration = Duration::from_millis(800);

/// Errors that prove the request never reached a server (nothing was sent).
fn never_sent(e: &str) -> bool {
    e.contains("tcp connect error") || e.contains("Connection refused")
}

/// Refusals that prove a lease request took no effect (the lease did not exist when it
/// was applied).
fn lease_refused(op: &Op, e: &str) -> bool {
    matches!(op, Op::PutLease { .. } | Op::LeaseRevoke { .. })
        && e.contains("requested lease not found")
}

/// The lease a client is using.
struct LeaseUse {
    id: i64,
    /// Puts sent with it.
    puts: u64,
    /// Puts answered (its keys).
    attached: u64,
}

/// One client's choices and what it last saw of each key (for its compare-and-sets).
struct ClientState {
    id: usize,
    rng: Rng,
    seq: u64,
    seen: HashMap<String, (String, i64)>,
    lease: Option<LeaseUse>,
    leases: i64,
}

impl ClientState {
    /// A lease step, one operation in twelve: grant when the client holds none; else
    /// put with it (two keys at most), revoke it, or leave it to expire.
    fn lease_op(&mut self) -> Option<Op> {
        if self.rng.below(12) != 0 {
            return None;
        }
        let Some(l) = &mut self.lease else {
            self.leases += 1;
            return Some(Op::LeaseGrant {
                lease: (self.id as i64 + 1) * 1_000_000 + self.leases,
            });
        };
        match self.rng.below(4) {
            0 | 1 if l.puts < 2 => {
                l.puts += 1;
                Some(Op::PutLease {
                    key: format!("kl{}-{}-{}", self.id, l.id, l.puts),
                    value: format!("c{}-{}", self.id, self.seq),
                    lease: l.id,
                })
            }
            2 => Some(Op::LeaseRevoke {
                lease: l.id,
                attached: l.attached > 0,
            }),
            _ => {
                self.lease = None;
                None
            }
        }
    }

    /// What the client knows of its lease after `op` ended with `outcome`.
    fn after_lease_op(&mut self, op: &Op, outcome: &Outcome) {
        match (op, outcome) {
            (Op::LeaseGrant { lease }, Outcome::Ok(_)) => {
                self.lease = Some(LeaseUse {
                    id: *lease,
                    puts: 0,
                    attached: 0,
                });
            }
            (Op::PutLease { .. }, Outcome::Ok(_)) => {
                if let Some(l) = &mut self.lease {
                    l.attached += 1;
                }
            }
            // Not knowing what a put or grant did, the client cannot tell whether a
            // revocation would write: it leaves the lease to expire. A revocation ends it.
            (Op::LeaseGrant { .. } | Op::PutLease { .. } | Op::LeaseRevoke { .. }, _) => {
                self.lease = None;
            }
            _ => {}
        }
    }

    fn next_op(&mut self, cfg: &WorkloadConfig) -> Op {
        self.seq += 1;
        if let Some(op) = self.lease_op() {
            return op;
        }
        self.seq -= 1;
        let key = format!("k{}", self.rng.below(cfg.keys));
        self.seq += 1;
        let value = format!("c{}-{}", self.id, self.seq);
        if self.rng.below(100) < cfg.write_percent {
            match self.rng.below(6) {
                0 | 1 => Op::Put { key, value },
                2 => Op::Delete { key },
                3 => Op::CasValue {
                    expect: self.seen.get(&key).map(|(v, _)| v.clone()),
                    key,
                    value,
                },
                4 => Op::CasModRev {
                    expect: self.seen.get(&key).map(|(_, r)| *r).unwrap_or(0),
                    key,
                    value,
                },
                _ => {
                    let other = format!("k{}", self.rng.below(cfg.keys));
                    let mut kvs = vec![(key, value.clone())];
                    if other != kvs[0].0 {
                        kvs.push((other, value));
                    }
                    Op::MultiPut { kvs }
                }
            }
        } else {
            let serializable = self.rng.below(3) == 0;
            if self.rng.below(4) == 0 {
                Op::Range {
                    prefix: "k".into(),
                    serializable,
                }
            } else {
                Op::Get { key, serializable }
            }
        }
    }

    fn remember(&mut self, resp: &Response, op: &Op) {
        match (op, resp) {
            (Op::Get { key, .. }, Response::Get { kv, .. }) => match kv {
                Some(kv) => {
                    self.seen.insert(key.clone(), kv.clone());
                }
                None => {
                    self.seen.remove(key);
                }
            },
            (Op::Range { .. }, Response::Range { kvs, .. }) => {
                self.seen = kvs
                    .iter()
                    .map(|(k, v, r)| (k.clone(), (v.clone(), *r)))
                    .collect();
            }
            _ => {}
        }
    }
}

fn rev_of(h: Option<&etcd_client::ResponseHeader>) -> i64 {
    h.map(|h| h.revision()).unwrap_or(0)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) async fn execute(c: &mut Client, op: &Op) -> Result<Response, etcd_client::Error> {
    Ok(match op {
        Op::Put { key, value } => Response::Write {
            rev: rev_of(c.put(key.as_str(), value.as_str(), None).await?.header()),
        },
        Op::Get { key, serializable } => {
            let opts = serializable.then(|| GetOptions::new().with_serializable());
            let r = c.get(key.as_str(), opts).await?;
            Response::Get {
                rev: rev_of(r.header()),
                kv: r
                    .kvs()
                    .first()
                    .map(|kv| (text(kv.value()), kv.mod_revision())),
            }
        }
        Op::Range {
            prefix,
            serializable,
        } => {
            let mut opts = GetOptions::new().with_prefix();
            if *serializable {
                opts = opts.with_serializable();
            }
            let r = c.get(prefix.as_str(), Some(opts)).await?;
            Response::Range {
                rev: rev_of(r.header()),
                kvs: r
                    .kvs()
                    .iter()
                    .map(|kv| (text(kv.key()), text(kv.value()), kv.mod_revision()))
                    .collect(),
            }
        }
        Op::Delete { key } => {
            let r = c.delete(key.as_str(), None).await?;
            Response::Delete {
                rev: rev_of(r.header()),
                deleted: r.deleted(),
            }
        }
        Op::CasValue { key, expect, value } => {
            let cmp = match expect {
                Some(v) => Compare::value(key.as_str(), CompareOp::Equal, v.as_str()),
                None => Compare::version(key.as_str(), CompareOp::Equal, 0),
            };
            cas(c, cmp, key, value).await?
        }
        Op::CasModRev { key, expect, value } => {
            let cmp = Compare::mod_revision(key.as_str(), CompareOp::Equal, *expect);
            cas(c, cmp, key, value).await?
        }
        Op::MultiPut { kvs } => {
            let puts: Vec<TxnOp> = kvs
                .iter()
                .map(|(k, v)| TxnOp::put(k.as_str(), v.as_str(), None))
                .collect();
            let r = c.txn(Txn::new().and_then(puts)).await?;
            Response::Write {
                rev: rev_of(r.header()),
            }
        }
        Op::LeaseGrant { lease } => {
            let opts = LeaseGrantOptions::new().with_id(*lease);
            Response::Lease {
                rev: rev_of(c.lease_grant(LEASE_TTL, Some(opts)).await?.header()),
            }
        }
        Op::PutLease { key, value, lease } => {
            let opts = PutOptions::new().with_lease(*lease);
            Response::Write {
                rev: rev_of(
                    c.put(key.as_str(), value.as_str(), Some(opts))
                        .await?
                        .header(),
                ),
            }
        }
        Op::LeaseRevoke { lease, .. } => Response::Revoke {
            rev: rev_of(c.lease_revoke(*lease).await?.header()),
        },
        Op::LeaseExpire { .. } => {
            return Err(etcd_client::Error::InvalidArgs(
                "an expiry is the server's, not a request".into(),
            ));
        }
    })
}

/// Renews `lease` once (not recorded: keepalives change no state the model checks; the
/// expiries they postpone are in the history as indeterminate operations).
async fn keep_alive(c: &mut Client, lease: i64) {
    let once = async {
        let (mut keeper, mut stream) = c.lease_keep_alive(lease).await?;
        keeper.keep_alive().await?;
        stream.message().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), once).await;
}

/// The expiry of every lease whose grant may have happened and that was not revoked.
fn expiries(ops: &[Operation], first_client: usize) -> Vec<Operation> {
    let revoked: HashSet<i64> = ops
        .iter()
        .filter(|o| matches!(o.op, Op::LeaseRevoke { .. }) && matches!(o.outcome, Outcome::Ok(_)))
        .filter_map(|o| o.op.lease())
        .collect();
    // Not before half its TTL from the grant, nor before the last answered put with it
    // was sent (that put found it alive). One pass: a lookup per lease over the whole
    // history took minutes on a 10-minute run.
    let mut earliest: HashMap<i64, u64> = HashMap::new();
    for o in ops {
        let at = match (&o.op, &o.outcome) {
            (Op::LeaseGrant { .. }, _) => o.invoke + LEASE_TTL as u64 * 500_000_000,
            (Op::PutLease { .. }, Outcome::Ok(_)) => o.invoke,
            _ => continue,
        };
        if let Some(lease) = o.op.lease() {
            let e = earliest.entry(lease).or_insert(0);
            *e = (*e).max(at);
        }
    }
    ops.iter()
        .filter(|o| {
            matches!(o.op, Op::LeaseGrant { .. }) && !matches!(o.outcome, Outcome::Failed(_))
        })
        .filter_map(|o| o.op.lease())
        .filter(|lease| !revoked.contains(lease))
        .enumerate()
        .map(|(i, lease)| {
            let at = earliest.get(&lease).copied().unwrap_or(0);
            Operation {
                id: 0,
                client: first_client + i,
                op: Op::LeaseExpire { lease },
                invoke: at,
                complete: at,
                outcome: Outcome::Indeterminate("expiry, decided by the leader".into()),
            }
        })
        .collect()
}

async fn cas(
    c: &mut Client,
    cmp: Compare,
    key: &str,
    value: &str,
) -> Result<Response, etcd_client::Error> {
    let r = c
        .txn(
            Txn::new()
                .when([cmp])
                .and_then([TxnOp::put(key, value, None)]),
        )
        .await?;
    Ok(Response::Cas {
        rev: rev_of(r.header()),
        succeeded: r.succeeded(),
    })
}

/// What became of `op` given its answer (`Err` when the client gave up waiting): an
/// answer is `Ok`; a failed read, a request never sent, or an error `refused` says took
/// no effect is `Failed`; any other failed write is `Indeterminate`.
pub(crate) fn outcome_of<E>(
    op: &Op,
    res: Result<Result<Response, etcd_client::Error>, E>,
    refused: &dyn Fn(&Op, &str) -> bool,
) -> Outcome {
    match res {
        Ok(Ok(resp)) => Outcome::Ok(resp),
        Ok(Err(e)) => {
            let e = e.to_string();
            if !op.is_write() || never_sent(&e) || refused(op, &e) {
                Outcome::Failed(e)
            } else {
                Outcome::Indeterminate(e)
            }
        }
        Err(_) if op.is_write() => Outcome::Indeterminate("client timeout".into()),
        Err(_) => Outcome::Failed("client timeout".into()),
    }
}

/// Runs client `id` against `url` until `stop`; returns its operations (ids unset).
async fn client_loop(
    id: usize,
    url: String,
    opts: Option<etcd_client::ConnectOptions>,
    cfg: WorkloadConfig,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<Operation> {
    let mut st = ClientState {
        id,
        rng: Rng::new(cfg.seed.wrapping_mul(1000).wrapping_add(id as u64)),
        seq: 0,
        seen: HashMap::new(),
        lease: None,
        leases: 0,
    };
    let mut renewed = Instant::now();
    let mut out = Vec::new();
    let mut client: Option<Client> = None;
    let now = || start.elapsed().as_nanos() as u64;
    while !stop.load(Ordering::Relaxed) {
        let op = st.next_op(&cfg);
        let invoke = now();
        if client.is_none() {
            let connect = Client::connect([url.clone()], opts.clone());
            client = match tokio::time::timeout(cfg.op_timeout, connect).await {
                Ok(Ok(c)) => Some(c),
                _ => {
                    // Not sent: nothing to record; back off a little.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
        }
        let Some(c) = client.as_mut() else { continue };
        if let Some(l) = &st.lease
            && renewed.elapsed() >= KEEPALIVE_EVERY
        {
            keep_alive(c, l.id).await;
            renewed = Instant::now();
        }
        let res = tokio::time::timeout(cfg.op_timeout, execute(c, &op)).await;
        let complete = now();
        if res.is_err() {
            // The connection may be stuck on a paused or cut member: start afresh.
            client = None;
        }
        let outcome = outcome_of(&op, res, &lease_refused);
        if let Outcome::Ok(resp) = &outcome {
            st.remember(resp, &op);
        }
        st.after_lease_op(&op, &outcome);
        if matches!(outcome, Outcome::Failed(_)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        out.push(Operation {
            id: 0,
            client: id,
            op,
            invoke,
            complete,
            outcome,
        });
    }
    out
}

/// Starts the clients; they run until `stop` is set. Await the handle for the history.
pub fn start(
    urls: &[String],
    opts: Option<etcd_client::ConnectOptions>,
    cfg: &WorkloadConfig,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Operation>> {
    let clients = cfg.clients;
    let tasks: Vec<_> = (0..cfg.clients)
        .map(|id| {
            tokio::spawn(client_loop(
                id,
                urls[id % urls.len()].clone(),
                opts.clone(),
                cfg.clone(),
                start,
                stop.clone(),
            ))
        })
        .collect();
    tokio::spawn(async move {
        let mut all = Vec::new();
        for t in tasks {
            if let Ok(ops) = t.await {
                all.extend(ops);
            }
        }
        let expiries = expiries(&all, clients);
        all.extend(expiries);
        all.sort_by_key(|o| (o.invoke, o.client));
        for (i, o) in all.iter_mut().enumerate() {
            o.id = i;
        }
        all
    })
}
