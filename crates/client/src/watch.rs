//! A watch that survives broken streams: [`Watch`] follows one key range and, when its
//! stream ends or fails, opens a new one from the revision after the last event or
//! progress notification it delivered, so the caller sees every revision once, in
//! order, whatever happened to the connection (as clientv3's watcher resumes).
//!
//! Invariants: `next_revision` only grows; a response is handed out only after its
//! revision moved `next_revision` past it, so a resumed stream never repeats an event.
//! The server's refusals end the watch with an error: a compacted start revision
//! ([`Error::Compacted`], with the oldest revision still available) or any other
//! cancelation ([`Error::WatchCanceled`]).

use std::time::Duration;

use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{
    WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::{Client, Error, prefix_end};

/// How often a broken stream is reopened before the watch gives up.
const REOPEN_ATTEMPTS: u32 = 10;

/// The pause before the first reopen; doubled after each failed one, up to 2 s.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// A resumable watch on one key range; see the module doc.
pub struct Watch {
    client: Client,
    create: WatchCreateRequest,
    next_revision: i64,
    stream: Option<(mpsc::Sender<WatchRequest>, tonic::Streaming<WatchResponse>)>,
    resumed: u64,
}

/// What to watch: `key` alone, or `[key, range_end)`.
pub fn watch_request(key: impl Into<Vec<u8>>, range_end: Vec<u8>) -> WatchCreateRequest {
    WatchCreateRequest {
        key: key.into(),
        range_end,
        ..Default::default()
    }
}

/// What to watch: every key starting with `prefix`.
pub fn watch_prefix(prefix: impl Into<Vec<u8>>) -> WatchCreateRequest {
    let key = prefix.into();
    let range_end = prefix_end(&key);
    watch_request(key, range_end)
}

impl Client {
    /// Starts a resumable watch; `create.start_revision` 0 means from the next change.
    /// Returns once the server created it (or refused it).
    pub async fn watch_resumable(&self, create: WatchCreateRequest) -> Result<Watch, Error> {
        let mut w = Watch {
            client: self.clone(),
            next_revision: create.start_revision,
            create,
            stream: None,
            resumed: 0,
        };
        w.open().await?;
        Ok(w)
    }
}

impl Watch {
    /// The revision the next stream would start from (0: none delivered yet, from now).
    pub fn next_revision(&self) -> i64 {
        self.next_revision
    }

    /// How many times a broken stream was reopened.
    pub fn resumed(&self) -> u64 {
        self.resumed
    }

    async fn open(&mut self) -> Result<(), Error> {
        let (tx, rx) = mpsc::channel(4);
        let create = WatchCreateRequest {
            start_revision: self.next_revision,
            ..self.create.clone()
        };
        let req = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(create)),
        };
        // The receiver is alive: this cannot fail.
        let _ = tx.try_send(req);
        let mut stream = self
            .client
            .bounded(self.client.watch().watch(ReceiverStream::new(rx)))
            .await?;
        let created = tokio::time::timeout(self.client.request_timeout, stream.message()).await;
        match created {
            Ok(Ok(Some(resp))) => {
                if resp.canceled {
                    return Err(refusal(&resp));
                }
                if self.next_revision == 0
                    && let Some(h) = &resp.header
                {
                    self.next_revision = h.revision + 1;
                }
            }
            Ok(Ok(None)) => return Err(Error::Eof),
            Ok(Err(s)) => return Err(Error::Status(s)),
            Err(_) => return Err(Error::DeadlineExceeded),
        }
        self.stream = Some((tx, stream));
        Ok(())
    }

    /// Reopens the stream from `next_revision`, with backoff; the last error if every
    /// attempt failed, or the server's refusal at once.
    async fn reopen(&mut self) -> Result<(), Error> {
        let mut pause = FIRST_BACKOFF;
        let mut last = Error::Eof;
        for _ in 0..REOPEN_ATTEMPTS {
            tokio::time::sleep(pause).await;
            match self.open().await {
                Ok(()) => {
                    self.resumed += 1;
                    return Ok(());
                }
                Err(e @ (Error::Compacted(_) | Error::WatchCanceled(_))) => return Err(e),
                Err(e) => last = e,
            }
            pause = (pause * 2).min(Duration::from_secs(2));
        }
        Err(last)
    }

    /// The next response with events, or a progress notification (no events; its
    /// header revision is a revision to resume from). Waits as long as it takes.
    pub async fn next(&mut self) -> Result<WatchResponse, Error> {
        loop {
            if self.stream.is_none() {
                self.reopen().await?;
            }
            let Some((_, stream)) = self.stream.as_mut() else {
                continue;
            };
            let resp = match stream.message().await {
                Ok(Some(resp)) => resp,
                Ok(None) | Err(_) => {
                    self.stream = None;
                    continue;
                }
            };
            if resp.canceled {
                self.stream = None;
                return Err(refusal(&resp));
            }
            if resp.created {
                continue;
            }
            match resp.events.last().and_then(|e| e.kv.as_ref()) {
                Some(kv) => self.next_revision = self.next_revision.max(kv.mod_revision + 1),
                None => {
                    let rev = resp.header.as_ref().map(|h| h.revision).unwrap_or(0);
                    if rev + 1 < self.next_revision {
                        // A progress notification behind what was delivered says nothing new.
                        continue;
                    }
                    self.next_revision = rev + 1;
                }
            }
            return Ok(resp);
        }
    }

    /// Asks the server for a progress notification on this stream (delivered by
    /// [`Watch::next`] when every watcher on the stream is up to date).
    pub async fn request_progress(&mut self) -> Result<(), Error> {
        let Some((tx, _)) = &self.stream else {
            return Ok(());
        };
        let req = WatchRequest {
            request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})),
        };
        tx.send(req).await.map_err(|_| Error::Eof)
    }
}

fn refusal(resp: &WatchResponse) -> Error {
    if resp.compact_revision > 0 {
        Error::Compacted(resp.compact_revision)
    } else {
        Error::WatchCanceled(resp.cancel_reason.clone())
    }
}
