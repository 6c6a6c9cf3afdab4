//! The link to one etcd peer, in etcd's peer protocol (etcd 3.5.16 rafthttp; design
//! §A.2-A.3): this member dials the peer's two streams (`message` and `msgappv2`) to
//! receive what the peer sends it, redialing at most every 100 ms as etcd does, and
//! sends its own messages on the streams the peer dialed to this member
//! ([`super::streams`]), or on the peer's pipeline (`POST /raft`, one kept connection,
//! one message at a time) while it has none.
//!
//! Received messages are stepped into raft, except etcd's link heartbeats (a heartbeat
//! from and to nobody, which raft-rs would take for a leader's) and messages addressed
//! to another member. A message that cannot be sent reports the peer unreachable to
//! raft, which probes and resends; a peer that says this member was removed stops it.
//!
//! Snapshots go their own way: the transport hands them to [`super::snapshot_sender`],
//! and none reaches the link.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::StatusCode;
use oxcd_raft::Message;
use oxcd_raft::node::RaftHandle;
use tokio::sync::mpsc;

use super::client::{self, Identity, PeerHttpError, Pipeline, StreamKind};
use super::codec::is_link_heartbeat;
use super::streams::Delivery;
use crate::machine::vocabulary::{LiveVocabulary, Vocabulary};
use crate::peer::PeerDialer;
use crate::peer::transport::LinkReports;

/// How long a pipeline POST or a stream dial may take (etcd's dial timeout with
/// default settings is 1 s + the election timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The least time between two dials of one stream (etcd's `DialRetryFrequency`).
const REDIAL_EVERY: Duration = Duration::from_millis(100);
/// Messages decoded from the streams, waiting to be stepped.
const RECEIVED: usize = 4096;

/// One etcd peer and who this member is to it.
#[derive(Clone)]
pub struct EtcdLink {
    /// Who this member is.
    pub me: Identity,
    /// The peer's id.
    pub peer: u64,
    /// The peer's URL.
    pub url: String,
    /// How to reach it.
    pub dialer: PeerDialer,
    /// Raft, once started.
    pub raft: Arc<OnceLock<RaftHandle>>,
    /// Where connection and removal reports go.
    pub reports: LinkReports,
    /// The log's vocabulary: nothing is sent while it is oxcd's.
    pub vocabulary: LiveVocabulary,
}

impl EtcdLink {
    fn unreachable(&self) {
        if let Some(r) = self.raft.get() {
            r.report_unreachable(self.peer);
        }
    }
}

/// Runs the link until `queue` closes (the peer left the cluster, or the transport
/// stopped): receives on the peer's streams, sends what the queue holds.
pub async fn run(link: EtcdLink, mut queue: mpsc::Receiver<Message>) {
    tracing::info!(peer = %format!("{:x}", link.peer), url = link.url, "peer speaks etcd's protocol");
    let (tx, rx) = mpsc::channel(RECEIVED);
    let readers = [
        tokio::spawn(keep_reading(link.clone(), StreamKind::Message, tx.clone())),
        tokio::spawn(keep_reading(link.clone(), StreamKind::MsgAppV2, tx)),
    ];
    let stepper = tokio::spawn(step_received(link.clone(), rx));
    let mut pipeline = Pipeline::new(link.dialer.clone(), link.url.clone(), link.me.clone());
    while let Some(m) = queue.recv().await {
        if link.vocabulary.get() != Vocabulary::Etcd {
            // The log switched to oxcd's vocabulary: an etcd member cannot read it.
            super::guard::refuse_link(link.peer);
            continue;
        }
        // On a stream the peer dialed, when it has one; else on its pipeline.
        match link.reports.etcd_streams.send(&m) {
            Delivery::Sent => continue,
            Delivery::Dropped => {
                link.unreachable();
                continue;
            }
            Delivery::NotAttached => {}
        }
        match pipeline.post(&m, REQUEST_TIMEOUT).await {
            Ok(()) => link.reports.health.connected(link.peer),
            Err(PeerHttpError::Refused { status, text, .. })
                if status == StatusCode::FORBIDDEN && text.contains("removed member") =>
            {
                tracing::error!(peer = %format!("{:x}", link.peer), "peer refused us: {text}");
                (link.reports.removed)();
            }
            Err(e) => {
                tracing::debug!(peer = %format!("{:x}", link.peer), "pipeline message not delivered: {e}");
                link.reports.health.disconnected(link.peer);
                link.unreachable();
            }
        }
    }
    for r in readers {
        r.abort();
    }
    stepper.abort();
    link.reports.health.disconnected(link.peer);
}

/// Dials the peer's stream of `kind` again and again, handing what it decodes to `out`.
async fn keep_reading(link: EtcdLink, kind: StreamKind, out: mpsc::Sender<Message>) {
    let mut logged = false;
    loop {
        let dialed = tokio::time::Instant::now();
        match client::dial_stream(
            &link.dialer,
            &link.url,
            &link.me,
            link.peer,
            kind,
            REQUEST_TIMEOUT,
        )
        .await
        {
            Ok(body) => {
                logged = false;
                link.reports.health.connected(link.peer);
                tracing::info!(peer = %format!("{:x}", link.peer), ?kind, "receiving on the peer's stream");
                let decoder = kind.decoder(link.me.member, link.peer);
                if let Err(e) = client::read_stream(body, decoder, out.clone()).await {
                    tracing::debug!(peer = %format!("{:x}", link.peer), ?kind, "stream ended: {e}");
                }
            }
            Err(PeerHttpError::Refused { status, text, .. }) if status == StatusCode::GONE => {
                tracing::error!(peer = %format!("{:x}", link.peer), "peer refused us: {text}");
                (link.reports.removed)();
                return;
            }
            Err(e) => {
                link.reports.health.disconnected(link.peer);
                if !logged {
                    tracing::warn!(peer = %format!("{:x}", link.peer), ?kind, "cannot dial the peer's stream: {e}");
                    logged = true;
                }
            }
        }
        if out.is_closed() {
            return;
        }
        tokio::time::sleep_until(dialed + REDIAL_EVERY).await;
    }
}

/// Steps the messages the streams decoded into raft, dropping etcd's link heartbeats
/// and what is addressed to another member.
async fn step_received(link: EtcdLink, mut rx: mpsc::Receiver<Message>) {
    while let Some(m) = rx.recv().await {
        if is_link_heartbeat(&m) {
            continue;
        }
        if m.to != link.me.member {
            tracing::debug!(to = %format!("{:x}", m.to), "dropping a message for another member");
            continue;
        }
        let Some(raft) = link.raft.get() else {
            continue;
        };
        if raft.step(m).is_err() {
            return;
        }
    }
}
