//! Election.Observe, as concurrency's `Election.observe` does it: send the current
//! leader (waiting for the first put under the prefix if there is none), then every put
//! of the leader's key, until the key is deleted; then look for the leader again.
//!
//! Headers: a leader read from the store carries the read's revision; one seen in the
//! feed carries the revision of the put (etcd's watch response revision for it).
//! As in etcd, the stream ends without an error when the member cannot answer.

use std::sync::Arc;

use oxcd_api::mvccpb::KeyValue;
use oxcd_api::mvccpb::event::EventType;
use oxcd_api::v3electionpb::LeaderResponse;
use tokio::sync::mpsc;
use tonic::Status;

use super::recipes::{self, Caller, Change, Changes};
use crate::edge::services::recipes::RecipeHandles;

/// The observer went away, or the member cannot answer: the stream ends.
struct End;

struct Observer {
    handles: Arc<RecipeHandles>,
    caller: Caller,
    prefix: Vec<u8>,
    changes: Changes,
    out: mpsc::Sender<Result<LeaderResponse, Status>>,
}

/// Serves one Observe stream of the election whose keys live under `prefix`.
/// Reads are checked as `caller`'s (a refusal ends the stream, as any failure).
pub async fn run(
    handles: Arc<RecipeHandles>,
    caller: Caller,
    prefix: Vec<u8>,
    out: mpsc::Sender<Result<LeaderResponse, Status>>,
) {
    let mut o = Observer {
        changes: Changes::subscribe(&handles, &prefix),
        handles,
        caller,
        prefix,
        out,
    };
    let _ = o.serve().await;
}

impl Observer {
    async fn serve(&mut self) -> Result<(), End> {
        loop {
            let first = recipes::first_created(&self.prefix);
            let resp = recipes::get(&self.handles, &self.caller, &first)
                .await
                .map_err(|_| End)?;
            let (rev, kv) = match resp.kvs.into_iter().next() {
                Some(kv) => (recipes::rev_of(&resp.header), kv),
                None => self.first_put(recipes::rev_of(&resp.header)).await?,
            };
            self.send(rev, kv.clone()).await?;
            self.follow(kv, rev).await?;
        }
    }

    async fn send(&self, rev: i64, kv: KeyValue) -> Result<(), End> {
        let resp = LeaderResponse {
            header: Some(self.handles.reads.header(rev)),
            kv: Some(kv),
        };
        self.out.send(Ok(resp)).await.map_err(|_| End)
    }

    /// The next change, or End when the observer goes away or the member stops.
    async fn next(&mut self) -> Result<Change, End> {
        tokio::select! {
            c = self.changes.next() => c.map_err(|_| End),
            _ = self.out.closed() => Err(End),
        }
    }

    /// Waits for the first put under the prefix after revision `after`.
    async fn first_put(&mut self, after: i64) -> Result<(i64, KeyValue), End> {
        loop {
            match self.next().await? {
                Change::Batch(feed) => {
                    let put = feed.events.iter().flatten().find_map(|e| {
                        let kv = e.kv.as_ref()?;
                        let wanted = e.r#type == EventType::Put as i32
                            && kv.mod_revision > after
                            && kv.key.starts_with(&self.prefix);
                        wanted.then(|| kv.clone())
                    });
                    if let Some(kv) = put {
                        return Ok((kv.mod_revision, kv));
                    }
                }
                Change::Missed => {
                    let first = recipes::first_created(&self.prefix);
                    let resp = recipes::get(&self.handles, &self.caller, &first)
                        .await
                        .map_err(|_| End)?;
                    if let Some(kv) = resp.kvs.into_iter().next() {
                        return Ok((kv.mod_revision, kv));
                    }
                }
            }
        }
    }

    /// Sends every put of the leader's key after revision `seen` until it is deleted.
    async fn follow(&mut self, leader: KeyValue, mut seen: i64) -> Result<(), End> {
        loop {
            match self.next().await? {
                Change::Batch(feed) => {
                    for e in feed.events.iter().flatten() {
                        let Some(kv) = e.kv.as_ref() else { continue };
                        if kv.key != leader.key || kv.mod_revision <= seen {
                            continue;
                        }
                        if e.r#type == EventType::Delete as i32 {
                            return Ok(());
                        }
                        seen = kv.mod_revision;
                        self.send(seen, kv.clone()).await?;
                    }
                }
                Change::Missed => {
                    let now =
                        recipes::get(&self.handles, &self.caller, &recipes::get_key(&leader.key))
                            .await
                            .map_err(|_| End)?;
                    match now.kvs.into_iter().next() {
                        Some(kv) if kv.create_revision == leader.create_revision => {
                            if kv.mod_revision > seen {
                                seen = kv.mod_revision;
                                self.send(seen, kv).await?;
                            }
                        }
                        _ => return Ok(()),
                    }
                }
            }
        }
    }
}
