//! The sending side of peer traffic: one task per peer keeps a link to it open. Where
//! the peer offers one (an oxcd member on an `http://` or `https://` URL), the link is a
//! [`super::direct`] one: the raft thread writes each turn's messages for the peer into
//! its socket itself, one system call per peer, and the task only dials it again when
//! it goes down. Elsewhere (unix sockets, an oxcd from before direct links, an etcd
//! member) the task owns a gRPC stream to the peer and forwards raft messages into it in
//! order.
//!
//! The raft loop never waits on the network: it hands messages over with `try_send`
//! (or a non-blocking write); when a peer's queue is full or the peer is down, the
//! message is dropped and raft is told the peer is unreachable (raft resends what
//! matters). While a peer is down, queued messages are discarded rather than delivered
//! stale later. A connection that stalls without closing fails its HTTP/2 keepalive
//! pings (see the dialer), or a direct link's beacons or write timeout, and is replaced; the
//! sending task never blocks on a stream, so it always sees the stream end.
//!
//! A MsgSnapshot goes its own way: a task per snapshot dumps the backend and streams it
//! on a separate `Snapshot` call, so heartbeats on the raft stream keep flowing, then
//! reports the outcome to raft. At most one snapshot per peer is in flight. The dump
//! runs on a thread of lowered priority, so it never delays the member's requests.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_api::oxcdpb::{PeerMembersRequest, RaftEnvelope, SnapshotChunk};
use oxcd_mvcc::Store;
use oxcd_raft::node::{RaftHandle, Transport};
use oxcd_raft::persist::encode_message;
use oxcd_raft::{Message, MessageType};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use super::dialer::{CONNECT_TIMEOUT, DialError};
use super::direct::handshake::{self, HandshakeError};
use super::direct::sender::Sent;
use super::direct::{DirectLink, KEEPALIVE_INTERVAL, SILENCE_LIMIT, frame};
use super::health::PeerHealth;
use super::traffic::{PROBE_INTERVAL, PeerCounts, PeerTraffic};
use super::{CLUSTER_ID_KEY, FROM_KEY, PeerDialer};
use crate::machine::vocabulary::{LiveVocabulary, LogVocabulary, Vocabulary};

/// Messages queued per peer before new ones are dropped.
const QUEUE: usize = 4096;
/// Bytes of backend dump per snapshot chunk.
const SNAPSHOT_CHUNK: usize = 1 << 20;

/// Links to cut, for partition tests: messages from `from` to `to` are dropped as a
/// network partition would drop them. The server binary never sets one.
#[derive(Debug, Clone, Default)]
pub struct PeerFaults {
    blocked: Arc<std::sync::RwLock<std::collections::HashSet<(u64, u64)>>>,
    /// The member sends over gRPC streams only, as an oxcd from before
    /// [`super::direct`] links did.
    grpc_only: bool,
}

impl PeerFaults {
    /// Faults that also keep the member from opening direct links (it still accepts
    /// them): a member as oxcd was before them, for tests of a cluster mixing both.
    pub fn grpc_only() -> PeerFaults {
        PeerFaults {
            grpc_only: true,
            ..PeerFaults::default()
        }
    }

    /// Cuts both directions between `a` and `b`.
    pub fn cut(&self, a: u64, b: u64) {
        let mut set = self.blocked.write().unwrap_or_else(|p| p.into_inner());
        set.insert((a, b));
        set.insert((b, a));
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.blocked
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn is_cut(&self, from: u64, to: u64) -> bool {
        self.blocked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(from, to))
    }
}

/// The members' peer URLs by id, as the replicated membership publishes them.
pub type PeerUrls = tokio::sync::watch::Receiver<BTreeMap<u64, Vec<String>>>;

/// What the sending tasks tell the rest of the member: which peers are connected, and
/// that a peer refused us because this member was removed from the cluster.
#[derive(Clone)]
pub struct LinkReports {
    /// Connection times, for the strict reconfiguration checks.
    pub health: Arc<PeerHealth>,
    /// Called when a peer says this member was removed (the member then stops).
    pub removed: Arc<dyn Fn() + Send + Sync>,
    /// Bytes, failures and round trips, for `/metrics`.
    pub traffic: Arc<PeerTraffic>,
    /// The streams etcd peers dialed to this member, which their links send on.
    pub etcd_streams: Arc<super::etcd::streams::EtcdStreams>,
}

impl LinkReports {
    /// Reports that go nowhere (tests of the transport alone).
    pub fn none() -> LinkReports {
        LinkReports {
            health: Arc::default(),
            removed: Arc::new(|| {}),
            traffic: Arc::default(),
            etcd_streams: Arc::default(),
        }
    }
}

/// Sends raft messages to peers.
pub struct PeerTransport {
    me: u64,
    cluster_id: u64,
    queues: HashMap<u64, mpsc::Sender<Message>>,
    /// The direct links of peers on `http://` and `https://` URLs (up or not).
    direct: HashMap<u64, Arc<DirectLink>>,
    urls: HashMap<u64, String>,
    /// Membership changes: peers are added, moved and dropped as they apply.
    membership: Option<PeerUrls>,
    store: Arc<Store>,
    snapshots_in_flight: Arc<Mutex<HashSet<u64>>>,
    /// The peers found to speak etcd's protocol (snapshots go to them its way).
    etcd_peers: Arc<Mutex<HashSet<u64>>>,
    /// The log's vocabulary: in oxcd's, an etcd peer gets no link ([`super::etcd::guard`]);
    /// after a switch to etcd's, it gets nothing from before the switch.
    vocabulary: LiveVocabulary,
    raft: Arc<OnceLock<RaftHandle>>,
    faults: Option<PeerFaults>,
    dialer: PeerDialer,
    reports: LinkReports,
    /// The runtime the tasks run on (`send` is called from the raft thread).
    runtime: tokio::runtime::Handle,
}

impl PeerTransport {
    /// Starts one sending task per peer (`id -> peer URL`) on the current runtime, then
    /// follows `membership` (when given and not empty: a backend from before membership
    /// changes keeps the bootstrap peers). The raft handle, for unreachable reports, is
    /// set once raft has started. Snapshots are dumped from `store`.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        me: u64,
        cluster_id: u64,
        peers: &HashMap<u64, String>,
        membership: Option<PeerUrls>,
        store: Arc<Store>,
        raft: Arc<OnceLock<RaftHandle>>,
        faults: Option<PeerFaults>,
        dialer: PeerDialer,
        reports: LinkReports,
        vocabulary: LiveVocabulary,
    ) -> PeerTransport {
        let mut t = PeerTransport {
            me,
            cluster_id,
            queues: HashMap::new(),
            direct: HashMap::new(),
            urls: HashMap::new(),
            membership,
            store,
            snapshots_in_flight: Arc::default(),
            etcd_peers: Arc::default(),
            vocabulary,
            raft,
            faults,
            dialer,
            reports,
            runtime: tokio::runtime::Handle::current(),
        };
        for (&id, url) in peers {
            t.add_peer(id, url.clone());
        }
        t
    }

    fn add_peer(&mut self, id: u64, url: String) {
        let (tx, rx) = mpsc::channel(QUEUE);
        self.queues.insert(id, tx);
        let grpc_only = self.faults.as_ref().is_some_and(|f| f.grpc_only);
        let direct = (handshake::over_tcp(&url) && !grpc_only)
            .then(|| DirectLink::new(id, self.reports.traffic.of(id)));
        if let Some(d) = &direct {
            self.direct.insert(id, d.clone());
        }
        self.urls.insert(id, url.clone());
        let link = Link {
            me: self.me,
            cluster_id: self.cluster_id,
            url,
            dialer: self.dialer.clone(),
        };
        let raft = self.raft.clone();
        let reports = self.reports.clone();
        let etcd_peers = self.etcd_peers.clone();
        let live = self.vocabulary.clone();
        let vocabulary = live.subscribe();
        self.runtime.spawn(async move {
            // A peer that turns out to speak etcd's protocol gets an etcd link once the
            // log is in etcd's vocabulary; until then nothing is sent to it.
            if let Some(mut queue) =
                peer_loop(link.clone(), id, rx, direct, raft.clone(), reports.clone()).await
            {
                if !etcd_link_allowed(id, &mut queue, vocabulary).await {
                    return;
                }
                lock(&etcd_peers).insert(id);
                let etcd = super::etcd::link::EtcdLink {
                    me: link.etcd_identity(),
                    peer: id,
                    url: link.url.clone(),
                    dialer: link.dialer.clone(),
                    raft,
                    reports,
                    vocabulary: live,
                };
                super::etcd::link::run(etcd, queue).await;
            }
        });
    }

    /// Follows the membership: a new member gets a sending task, a removed one loses
    /// it (closing its queue ends the task), a moved one is dialed at its new URL.
    fn follow_membership(&mut self) {
        let Some(rx) = self.membership.as_mut() else {
            return;
        };
        if !rx.has_changed().unwrap_or(false) {
            return;
        }
        let all = rx.borrow_and_update().clone();
        if all.is_empty() {
            // A backend from before the replicated membership: the bootstrap peers.
            return;
        }
        let wanted: HashMap<u64, String> = all
            .iter()
            .filter(|(id, _)| **id != self.me)
            .filter_map(|(id, urls)| urls.first().map(|u| (*id, u.clone())))
            .collect();
        let gone: Vec<u64> = self
            .urls
            .iter()
            .filter(|(id, url)| wanted.get(id) != Some(url))
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            tracing::info!(peer = %format!("{id:x}"), "peer removed or moved");
            lock(&self.etcd_peers).remove(&id);
            self.queues.remove(&id);
            if let Some(d) = self.direct.remove(&id) {
                d.close();
            }
            self.urls.remove(&id);
            self.reports.health.disconnected(id);
        }
        for (id, url) in wanted {
            if !self.urls.contains_key(&id) {
                tracing::info!(peer = %format!("{id:x}"), url, "peer added");
                self.add_peer(id, url);
            }
        }
    }

    /// Starts streaming a snapshot to `m.to`, unless one is already on its way.
    fn send_snapshot(&self, m: Message) {
        let to = m.to;
        let Some(url) = self.urls.get(&to).cloned() else {
            return;
        };
        if !lock(&self.snapshots_in_flight).insert(to) {
            return;
        }
        let to_etcd = lock(&self.etcd_peers).contains(&to);
        let link = Link {
            me: self.me,
            cluster_id: self.cluster_id,
            url,
            dialer: self.dialer.clone(),
        };
        let store = self.store.clone();
        let raft = self.raft.clone();
        let busy = self.snapshots_in_flight.clone();
        self.runtime.spawn(async move {
            let started = std::time::Instant::now();
            let res = if to_etcd {
                let backend = store.backend().clone();
                super::etcd::snapshot_sender::send(
                    &link.etcd_identity(),
                    &link.dialer,
                    &link.url,
                    backend,
                    m,
                    CONNECT_TIMEOUT,
                )
                .await
                .map(|sent| (sent.index, sent.bytes))
                .map_err(SnapshotSendError::Etcd)
            } else {
                stream_snapshot(&link, store, m).await
            };
            match &res {
                Ok((index, bytes)) => tracing::info!(
                    peer = %format!("{to:x}"),
                    index,
                    bytes,
                    took_ms = started.elapsed().as_millis() as u64,
                    "sent a snapshot"
                ),
                Err(e) => {
                    tracing::warn!(peer = %format!("{to:x}"), "sending a snapshot failed: {e}")
                }
            }
            lock(&busy).remove(&to);
            if let Some(r) = raft.get() {
                r.report_snapshot(to, res.is_ok());
            }
        });
    }

    fn unreachable(&self, id: u64) {
        if let Some(r) = self.raft.get() {
            r.report_unreachable(id);
        }
    }
}

impl Drop for PeerTransport {
    fn drop(&mut self) {
        for link in self.direct.values() {
            link.close();
        }
    }
}

impl Transport for PeerTransport {
    fn send(&mut self, msgs: Vec<Message>) {
        self.follow_membership();
        // After a switch to etcd's vocabulary, etcd peers get nothing from before it.
        let since = self.vocabulary.log().since;
        // This turn's frames for each peer with a direct link up: one write each.
        let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
        for m in msgs {
            let to = m.to;
            if self.faults.as_ref().is_some_and(|f| f.is_cut(self.me, to)) {
                continue;
            }
            if since > 0 && reaches_before(&m, since) && lock(&self.etcd_peers).contains(&to) {
                tracing::debug!(
                    to = %format!("{to:x}"),
                    since,
                    "held back from an etcd peer: entries from before the switch to etcd's vocabulary"
                );
                continue;
            }
            if m.msg_type == MessageType::MsgSnapshot {
                self.send_snapshot(m);
                continue;
            }
            if self.direct.get(&to).is_some_and(|d| d.is_up()) {
                let at = match frames.iter().position(|(id, _)| *id == to) {
                    Some(at) => at,
                    None => {
                        frames.push((to, Vec::with_capacity(256)));
                        frames.len() - 1
                    }
                };
                frame::append(&mut frames[at].1, &m);
                continue;
            }
            match self.queues.get(&to) {
                Some(q) => {
                    if q.try_send(m).is_err() {
                        self.unreachable(to);
                    }
                }
                None => {
                    // A member just removed (answering it is moot) or not yet known.
                    tracing::debug!(to = %format!("{to:x}"), "raft message to an unknown member dropped")
                }
            }
        }
        for (to, batch) in frames {
            let sent = self.direct.get(&to).map_or(Sent::Down, |d| d.send(&batch));
            if sent != Sent::Taken {
                self.unreachable(to);
            }
        }
    }
}

/// Waits, dropping what `queue` holds for etcd peer `id`, until the log is in etcd's
/// vocabulary; false when the peer left (or the member stops) first.
async fn etcd_link_allowed(
    id: u64,
    queue: &mut mpsc::Receiver<Message>,
    mut vocabulary: tokio::sync::watch::Receiver<LogVocabulary>,
) -> bool {
    let etcds = |v: &LogVocabulary| v.vocabulary == Vocabulary::Etcd;
    if etcds(&vocabulary.borrow_and_update()) {
        return true;
    }
    super::etcd::guard::refuse_link(id);
    loop {
        tokio::select! {
            m = queue.recv() => if m.is_none() {
                return false;
            },
            switched = vocabulary.wait_for(etcds) => {
                if switched.is_err() {
                    return false;
                }
                tracing::info!(
                    peer = %format!("{id:x}"),
                    "the log is in etcd's vocabulary: the etcd peer gets its link"
                );
                return true;
            }
        }
    }
}

/// Whether the TLS peer `link` reaches is an etcd member: its gRPC calls fail at the
/// transport (etcd 3.5 serves gRPC on its TLS peer port inside a second TLS layer,
/// `embed/etcd.go` `servePeers`), so this is asked only after gRPC failed; its HTTP/1.1
/// `/raft/probing` answers without the header an oxcd member adds.
async fn speaks_etcd_over_tls(link: &Link) -> bool {
    if !link.url.starts_with("https://") {
        return false;
    }
    super::etcd::client::request(
        &link.dialer,
        &link.url,
        http::Method::GET,
        "/raft/probing",
        bytes::Bytes::new(),
        CONNECT_TIMEOUT,
    )
    .await
    .is_ok_and(|a| {
        a.status == 200
            && !a
                .headers
                .contains_key(super::etcd::routes::OXCD_PEER_HEADER)
    })
}

/// Whether `m` carries entries at or before `since`, or a snapshot before it.
fn reaches_before(m: &Message, since: u64) -> bool {
    match m.msg_type {
        MessageType::MsgAppend => m.get_entries().first().is_some_and(|e| e.index <= since),
        MessageType::MsgSnapshot => m.get_snapshot().get_metadata().index < since,
        _ => false,
    }
}

/// Keeps a stream open to one peer and forwards its queue into it, until the queue
/// closes; gives the queue back if the peer turns out to be an etcd member (its peer
/// port has no oxcd service).
async fn peer_loop(
    link: Link,
    id: u64,
    mut queue: mpsc::Receiver<Message>,
    direct: Option<Arc<DirectLink>>,
    raft: Arc<OnceLock<RaftHandle>>,
    reports: LinkReports,
) -> Option<mpsc::Receiver<Message>> {
    let report = |raft: &Arc<OnceLock<RaftHandle>>| {
        if let Some(r) = raft.get() {
            r.report_unreachable(id);
        }
    };
    let mut logged_down = false;
    let url = link.url.clone();
    let counts = reports.traffic.of(id);
    loop {
        let channel = match link.connect().await {
            Ok(c) => c,
            Err(e) => {
                reports.health.disconnected(id);
                if speaks_etcd_over_tls(&link).await {
                    return Some(queue);
                }
                if !logged_down {
                    tracing::warn!(peer = %format!("{id:x}"), url, "peer unreachable: {e}");
                    logged_down = true;
                }
                // Drop what queued up meanwhile: it would be stale when delivered. A
                // closed queue: the peer left the cluster (or the transport stopped).
                let mut dropped = false;
                loop {
                    match queue.try_recv() {
                        Ok(_) => {
                            dropped = true;
                            PeerCounts::add(&counts.sent_failures, 1);
                        }
                        Err(mpsc::error::TryRecvError::Empty) => break,
                        Err(mpsc::error::TryRecvError::Disconnected) => return None,
                    }
                }
                if dropped {
                    report(&raft);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if logged_down {
            tracing::info!(peer = %format!("{id:x}"), url, "peer reachable again");
            logged_down = false;
        }
        if let Some(direct) = &direct {
            match run_direct(&link, id, direct, &mut queue, &channel, &raft, &reports).await {
                DirectEnd::Down if queue.is_closed() => return None,
                DirectEnd::Down => {
                    report(&raft);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                DirectEnd::QueueClosed => return None,
                DirectEnd::NotOffered => {}
            }
        }
        let (tx, rx) = mpsc::channel::<RaftEnvelope>(QUEUE);
        let req = link.request(tokio_stream::wrappers::ReceiverStream::new(rx));
        let mut client = PeerClient::new(channel.clone());
        let mut call = tokio::spawn(async move { client.raft(req).await });
        let prober = tokio::spawn(probe(link.clone(), channel, counts.clone()));
        reports.health.connected(id);
        loop {
            tokio::select! {
                m = queue.recv() => {
                    let Some(m) = m else {
                        call.abort();
                        prober.abort();
                        reports.health.disconnected(id);
                        return None;
                    };
                    // Never wait on the stream here: the call's end must stay observable.
                    let message = encode_message(&m);
                    let size = message.len() as u64;
                    match tx.try_send(RaftEnvelope { message }) {
                        Ok(()) => PeerCounts::add(&counts.sent_bytes, size),
                        Err(mpsc::error::TrySendError::Full(_)) => {
                            PeerCounts::add(&counts.sent_failures, 1);
                            report(&raft);
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => {
                            PeerCounts::add(&counts.sent_failures, 1);
                            report(&raft);
                            break;
                        }
                    }
                }
                res = &mut call => {
                    let etcd = match &res {
                        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => true,
                        Ok(Err(status)) if super::Refusal::of(status).is_none() => {
                            speaks_etcd_over_tls(&link).await
                        }
                        _ => false,
                    };
                    if etcd {
                        prober.abort();
                        reports.health.disconnected(id);
                        return Some(queue);
                    }
                    if let Ok(Err(status)) = res {
                        match super::Refusal::of(&status) {
                            Some(refusal) => refused(id, &url, refusal, &reports),
                            None => tracing::debug!(peer = %format!("{id:x}"), "peer stream ended: {status}"),
                        }
                    }
                    report(&raft);
                    break;
                }
            }
        }
        reports.health.disconnected(id);
        prober.abort();
        // A call still running holds a connection that no longer carries our messages.
        call.abort();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Logs a peer's refusal of our link, and stops this member if the peer says it was
/// removed from the cluster.
fn refused(id: u64, url: &str, refusal: super::Refusal, reports: &LinkReports) {
    use oxcd_api::errors::EtcdError;
    match refusal {
        super::Refusal::IncompatibleVersion => tracing::warn!(
            peer = %format!("{id:x}"),
            url,
            "request sent was ignored by remote peer due to server version incompatibility"
        ),
        super::Refusal::MemberRemoved => {
            tracing::error!(peer = %format!("{id:x}"), url, "peer refused us: {}", refusal.status().message());
            (reports.removed)();
        }
        super::Refusal::Etcd(EtcdError::ClusterIdMismatch) => {
            tracing::error!(peer = %format!("{id:x}"), url, "peer refused us: {}", refusal.status().message())
        }
        super::Refusal::Etcd(_) => tracing::debug!(
            peer = %format!("{id:x}"),
            "peer stream ended: {}",
            refusal.status().message()
        ),
    }
}

/// How a direct link's time in [`peer_loop`] ended.
enum DirectEnd {
    /// The link went down (or could not be opened): dial again.
    Down,
    /// The peer has no direct links: use a gRPC stream.
    NotOffered,
    /// The peer left the cluster, or the member stops.
    QueueClosed,
}

/// Opens a direct link to peer `id` and keeps it until it goes down; meanwhile
/// probes the round trip on `channel` and drops what the queue held from before.
async fn run_direct(
    link: &Link,
    id: u64,
    direct: &Arc<DirectLink>,
    queue: &mut mpsc::Receiver<Message>,
    channel: &Channel,
    raft: &Arc<OnceLock<RaftHandle>>,
    reports: &LinkReports,
) -> DirectEnd {
    let opened = handshake::open(&link.dialer, &link.url, &link.headers(), CONNECT_TIMEOUT).await;
    let handshake::Opened { socket, tls } = match opened {
        Ok(opened) => opened,
        Err(HandshakeError::NotOffered(status)) => {
            tracing::debug!(peer = %format!("{id:x}"), status, "the peer has no direct links: a gRPC stream carries its messages");
            return DirectEnd::NotOffered;
        }
        Err(HandshakeError::Refused(refusal)) => {
            refused(id, &link.url, refusal, reports);
            tokio::time::sleep(Duration::from_millis(50)).await;
            return DirectEnd::Down;
        }
        Err(e) => {
            tracing::debug!(peer = %format!("{id:x}"), "a direct link could not be opened: {e}");
            return DirectEnd::Down;
        }
    };
    // The accepting member writes only beacons on a link; the socket turning readable
    // otherwise means it closed the link (it stopped, or took a newer link from us in
    // its place).
    let closed = match socket.try_clone().and_then(|s| {
        s.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(s)
    }) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::debug!(peer = %format!("{id:x}"), "a direct link cannot be watched: {e}");
            return DirectEnd::Down;
        }
    };
    let generation = match direct.install(socket, tls) {
        Ok(generation) => generation,
        Err(e) => {
            tracing::debug!(peer = %format!("{id:x}"), "a direct link could not be started: {e}");
            return DirectEnd::Down;
        }
    };
    tracing::debug!(peer = %format!("{id:x}"), "direct link up");
    let counts = reports.traffic.of(id);
    // Queued while the link was down: stale now, and raft resends what matters.
    while let Ok(_stale) = queue.try_recv() {
        PeerCounts::add(&counts.sent_failures, 1);
    }
    let prober = tokio::spawn(probe(link.clone(), channel.clone(), counts.clone()));
    reports.health.connected(id);
    let mut keepalive = tokio::time::interval(KEEPALIVE_INTERVAL);
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = tokio::time::Instant::now();
    let end = loop {
        tokio::select! {
            _ = direct.wait_down(generation) => break DirectEnd::Down,
            beacon = peer_beacon(&closed) => {
                if beacon == Beacon::Heard {
                    heard = tokio::time::Instant::now();
                    continue;
                }
                direct.drop_connection(generation);
                break DirectEnd::Down;
            }
            _ = keepalive.tick() => {
                if heard.elapsed() > SILENCE_LIMIT {
                    tracing::warn!(peer = %format!("{id:x}"), "the peer's direct link went silent: dialing again");
                    direct.drop_connection(generation);
                    break DirectEnd::Down;
                }
                direct.send(&frame::KEEPALIVE);
            }
            m = queue.recv() => {
                let Some(m) = m else {
                    direct.close();
                    break DirectEnd::QueueClosed;
                };
                // Sent by the raft thread as the link came up: it goes the same way.
                let mut batch = Vec::new();
                frame::append(&mut batch, &m);
                if direct.send(&batch) != Sent::Taken
                    && let Some(r) = raft.get()
                {
                    r.report_unreachable(id);
                }
            }
        }
    };
    prober.abort();
    reports.health.disconnected(id);
    end
}

/// What a direct link's accepting end said.
#[derive(Debug, PartialEq, Eq)]
enum Beacon {
    /// A liveness beacon: it is reading.
    Heard,
    /// It closed (or broke) the connection.
    Closed,
}

/// Waits for the accepting end of the direct link `socket` carries to send a beacon
/// or close.
async fn peer_beacon(socket: &tokio::net::TcpStream) -> Beacon {
    let mut buf = [0u8; 64];
    loop {
        if socket.readable().await.is_err() {
            return Beacon::Closed;
        }
        match socket.try_read(&mut buf) {
            Ok(0) => return Beacon::Closed,
            Ok(_) => return Beacon::Heard,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Beacon::Closed,
        }
    }
}

/// Measures the round trip to a connected peer every [`PROBE_INTERVAL`] (a membership
/// query, which the peer answers from memory) until aborted.
async fn probe(link: Link, channel: Channel, counts: Arc<PeerCounts>) {
    let mut client = PeerClient::new(channel);
    loop {
        let started = std::time::Instant::now();
        let asked = tokio::time::timeout(
            PROBE_INTERVAL,
            client.members(link.request(PeerMembersRequest {})),
        )
        .await;
        if let Ok(Ok(_)) = asked {
            counts.rtt.observe(started.elapsed());
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}

/// Where one peer is and who we are to it.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) me: u64,
    pub(crate) cluster_id: u64,
    pub(crate) url: String,
    pub(crate) dialer: PeerDialer,
}

impl Link {
    /// Who this member is to an etcd peer.
    pub(crate) fn etcd_identity(&self) -> super::etcd::client::Identity {
        super::etcd::client::Identity {
            member: self.me,
            cluster: self.cluster_id,
            peer_urls: Vec::new(),
            release: self.dialer.release(),
        }
    }

    /// A channel to the peer.
    pub(crate) async fn connect(&self) -> Result<Channel, DialError> {
        self.dialer.connect(&self.url, CONNECT_TIMEOUT).await
    }

    /// A request carrying our cluster and member id and our version headers.
    pub(crate) fn request<T>(&self, body: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(body);
        for (key, value) in self.headers() {
            if let Ok(v) = value.parse() {
                req.metadata_mut().insert(key, v);
            }
        }
        req
    }

    /// Our cluster and member id and our version headers, as every request to a peer
    /// carries them.
    pub(crate) fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            (CLUSTER_ID_KEY, format!("{:x}", self.cluster_id)),
            (FROM_KEY, format!("{:x}", self.me)),
        ];
        headers.extend(super::compat::headers(self.dialer.release()));
        headers
    }
}

/// Why a snapshot could not be sent to a peer.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotSendError {
    /// The backend could not be dumped.
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// The dump is older than the snapshot raft asked for.
    #[error(transparent)]
    Behind(#[from] Behind),
    /// The dump's conf state does not decode.
    #[error(transparent)]
    ConfState(oxcd_raft::RaftError),
    /// The stream's queue closed before the first chunk.
    #[error("snapshot stream closed")]
    StreamClosed,
    /// The dump's thread could not be started.
    #[error("cannot start the snapshot dump: {0}")]
    SpawnDump(std::io::Error),
    /// The peer could not be dialed.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The peer refused the stream.
    #[error("{}", .0.message())]
    Refused(Box<tonic::Status>),
    /// The peer stopped reading before the end.
    #[error("the peer stopped reading")]
    PeerStopped,
    /// The dump's thread went away without a result.
    #[error("the snapshot dump stopped")]
    DumpStopped,
    /// An etcd peer's snapshot was not sent.
    #[error(transparent)]
    Etcd(super::etcd::snapshot_sender::EtcdSnapshotError),
}

/// The state about to be sent is older than the snapshot raft asked for.
#[derive(Debug, thiserror::Error)]
#[error("the backend is at index {index}, behind the snapshot at {snapshot}")]
pub struct Behind {
    /// The state's index.
    pub index: u64,
    /// The snapshot's.
    pub snapshot: u64,
}

/// Moves the snapshot raft asked for in `m` to the state about to be sent, taken at
/// `(index, term)` under `conf`: the state is read when sent, at or after the compaction
/// raft knows of, and the snapshot's position must describe it exactly.
pub(crate) fn place_snapshot(
    m: &mut Message,
    (index, term): (u64, u64),
    conf: Option<oxcd_raft::ConfState>,
) -> Result<(), Behind> {
    let meta = m.mut_snapshot().mut_metadata();
    if index < meta.index {
        return Err(Behind {
            index,
            snapshot: meta.index,
        });
    }
    meta.index = index;
    meta.term = term;
    if let Some(conf) = conf {
        meta.set_conf_state(conf);
    }
    Ok(())
}

/// The set behind `m`, even if a thread panicked holding it (a set of ids stays whole).
fn lock(m: &Mutex<HashSet<u64>>) -> std::sync::MutexGuard<'_, HashSet<u64>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Dumps the backend and streams it with `m` to the peer. The snapshot's position is
/// moved up to the dump's: the dump is taken now, at or after the compaction raft knows
/// of, and its position — index, term and the configuration in force there — must
/// describe its data exactly. Returns (index, bytes sent).
async fn stream_snapshot(
    link: &Link,
    store: Arc<Store>,
    mut m: Message,
) -> Result<(u64, u64), SnapshotSendError> {
    let dump = store.backend().dump()?;
    let (index, term) = dump.position()?;
    let conf = dump
        .conf_state()?
        .map(|c| oxcd_raft::persist::decode_conf_state(&c))
        .transpose()
        .map_err(SnapshotSendError::ConfState)?;
    place_snapshot(&mut m, (index, term), conf)?;
    let (tx, rx) = mpsc::channel::<SnapshotChunk>(4);
    tx.send(SnapshotChunk {
        message: encode_message(&m),
        data: Default::default(),
    })
    .await
    .map_err(|_| SnapshotSendError::StreamClosed)?;
    let sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    // A thread of its own, not the blocking pool: its priority is lowered for good.
    std::thread::Builder::new()
        .name("snapshot-dump".into())
        .spawn(move || {
            crate::backup::priority::yield_to_requests();
            let res = dump.write_to(SNAPSHOT_CHUNK, |data| {
                counter.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
                tx.blocking_send(SnapshotChunk {
                    message: Vec::new(),
                    data: data.into(),
                })
                .is_ok()
            });
            let _ = done_tx.send(res);
        })
        .map_err(SnapshotSendError::SpawnDump)?;
    let channel = link.connect().await?;
    let mut client = PeerClient::new(channel).max_encoding_message_size(super::MAX_SNAPSHOT_CHUNK);
    let req = link.request(tokio_stream::wrappers::ReceiverStream::new(rx));
    client
        .snapshot(req)
        .await
        .map_err(|s| SnapshotSendError::Refused(Box::new(s)))?;
    match done_rx.await {
        Ok(Ok(true)) => Ok((index, sent.load(std::sync::atomic::Ordering::Relaxed))),
        Ok(Ok(false)) => Err(SnapshotSendError::PeerStopped),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(SnapshotSendError::DumpStopped),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heartbeat(to: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgHeartbeat);
        m.to = to;
        m.from = 1;
        m
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn peers_follow_the_membership() {
        let dir = tempfile::tempdir().expect("tempdir");
        let backend = Arc::new(
            oxcd_storage::backend::Backend::open(&dir.path().join("db")).expect("backend"),
        );
        let store = Arc::new(Store::open(backend).expect("store"));
        let urls = |peers: &[(u64, &str)]| -> BTreeMap<u64, Vec<String>> {
            peers
                .iter()
                .map(|(id, u)| (*id, vec![u.to_string()]))
                .collect()
        };
        let (tx, rx) = tokio::sync::watch::channel(BTreeMap::new());
        let bootstrap: HashMap<u64, String> = [(2, "http://127.0.0.1:1".to_string())]
            .into_iter()
            .collect();
        let mut t = PeerTransport::start(
            1,
            9,
            &bootstrap,
            Some(rx),
            store,
            Arc::new(OnceLock::new()),
            None,
            PeerDialer::new(None, None),
            LinkReports::none(),
            LiveVocabulary::new(LogVocabulary::default()),
        );
        let peers = |t: &PeerTransport| -> Vec<(u64, String)> {
            let mut v: Vec<_> = t.urls.iter().map(|(id, u)| (*id, u.clone())).collect();
            v.sort();
            assert_eq!(t.queues.len(), v.len());
            v
        };
        t.send(vec![heartbeat(2)]);
        assert_eq!(peers(&t), [(2, "http://127.0.0.1:1".to_string())]);
        // An empty membership (a backend from before it) keeps the bootstrap peers.
        tx.send_replace(BTreeMap::new());
        t.send(vec![heartbeat(2)]);
        assert_eq!(peers(&t).len(), 1);
        // A member added, this member itself left out.
        tx.send_replace(urls(&[
            (1, "http://me:1"),
            (2, "http://127.0.0.1:1"),
            (3, "http://127.0.0.1:2"),
        ]));
        t.send(vec![heartbeat(3)]);
        assert_eq!(
            peers(&t),
            [
                (2, "http://127.0.0.1:1".to_string()),
                (3, "http://127.0.0.1:2".to_string())
            ]
        );
        // One removed, one moved.
        tx.send_replace(urls(&[(1, "http://me:1"), (3, "http://127.0.0.1:3")]));
        t.send(vec![heartbeat(3)]);
        assert_eq!(peers(&t), [(3, "http://127.0.0.1:3".to_string())]);
    }
}
