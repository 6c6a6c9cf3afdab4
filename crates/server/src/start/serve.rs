//! Serving a started member: resolve its TLS, bind the client, metrics and peer URLs,
//! serve gRPC and HTTP on each, log readiness, and stop cleanly on a shutdown signal or
//! when the member fails.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use oxcd_raft::RaftError;
use oxcd_transport::listen::Addr;
use tokio::sync::{oneshot, watch};

use crate::domains::lease::renewals::Renewals;
use crate::domains::version::release::Release;
use crate::edge::http;
use crate::jobs::corrupt;
use crate::machine::fatal::Fatal;
use crate::machine::member::Member;
use crate::peer::PeerDialer;
use crate::peer::service::PeerService;
use crate::peer::transport::PeerFaults;
use crate::start::bootstrap::{self, StartError};
use crate::start::discovery::DiscoveryError;
use crate::start::listeners::{self, ClientListener, ListenError, PlainListener};
use crate::start::{client_routes, security, wiring};
use oxcd_api::oxcdpb::peer_server::PeerServer;
use oxcd_config::settings::Settings;

/// Why serving ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The member could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// A client URL could not be used.
    #[error("{0}")]
    Listen(#[from] ListenError),
    /// The member stopped on a fatal error (disk full, disk error).
    #[error("member stopped: {0}")]
    Fatal(#[from] Fatal),
    /// The member was removed from the cluster before it could serve.
    #[error("member stopped: {}", crate::peer::MEMBER_REMOVED)]
    Removed,
    /// The start-up task ended without an answer (it panicked).
    #[error("member stopped: the start-up task failed: {0}")]
    StartTask(tokio::task::JoinError),
    /// The initial corruption check found this member's data differs from its peers'
    /// (or could not hash it).
    #[error("member stopped: {0}")]
    Corrupt(#[from] crate::jobs::corrupt::CheckError),
    /// Discovery (`--discovery-srv`, `--discovery-endpoints`) found no cluster, or one
    /// that does not list this member.
    #[error("{0}")]
    Discovery(#[from] DiscoveryError),
}

/// What tests may add to a member; the binary runs with none.
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Cut peer links (partition tests).
    pub peer_faults: Option<PeerFaults>,
}

/// Starts the member in `settings` and serves clients until `shutdown` completes or the
/// member fails. `on_ready` is told each bound TCP client address once serving.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()>,
    on_ready: impl FnOnce(Vec<SocketAddr>),
) -> Result<(), ServeError> {
    run_with(settings, TestHooks::default(), shutdown, on_ready).await
}

/// [`run`] with test hooks.
pub async fn run_with(
    settings: Settings,
    hooks: TestHooks,
    shutdown: impl Future<Output = ()>,
    on_ready: impl FnOnce(Vec<SocketAddr>),
) -> Result<(), ServeError> {
    let settings = crate::start::discovery::discover(settings)
        .await
        .map_err(ServeError::Discovery)?;
    let security = security::load(&settings).map_err(ListenError::from)?;
    // Peer listeners first, as etcd: a port in use fails the start before anything
    // touches the data dir.
    let mut peer_listeners = Vec::new();
    for url in &settings.listen_peer_urls {
        let l = bind(
            url,
            "peer",
            security.peer.as_ref(),
            security.peer_check.clone(),
        )?;
        peer_listeners.push((l, url));
    }
    let mut client_listeners = Vec::new();
    for url in &settings.listen_client_urls {
        client_listeners.push(bind(url, "client", security.client.as_ref(), None)?);
    }
    let mut http_listeners = Vec::new();
    for url in &settings.listen_client_http_urls {
        if settings
            .listen_client_urls
            .iter()
            .any(|c| listen_address(c) == listen_address(url))
        {
            return Err(ListenError::ClientAndHttpUrl(url.clone()).into());
        }
        http_listeners.push(bind(url, "client", security.client.as_ref(), None)?);
    }
    let mut metrics_listeners = Vec::new();
    for url in &settings.listen_metrics_urls {
        metrics_listeners.push(bind(url, "metrics", security.client.as_ref(), None)?);
    }
    let dialer = PeerDialer::new(security.peer_dialer.clone(), settings.peer_source_ip)
        .for_release(Release::emulating(&settings.emulated_version));
    let joining = if oxcd_storage::wal::Wal::exists(&settings.wal_dir()) {
        None
    } else {
        crate::peer::remote::check_fresh_member(&settings, &dialer)
            .await
            .map_err(StartError::Join)?
    };
    let s = settings.clone();
    let start_dialer = dialer.clone();
    let started = tokio::task::spawn_blocking(move || {
        bootstrap::start(&s, start_dialer, hooks.peer_faults, joining)
    })
    .await
    .map_err(ServeError::StartTask)??;
    let member = started.member.clone();
    let mut apply_ended = started.apply_ended;
    let raft_thread = started.raft_thread;
    let apply_thread = started.apply_thread;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut servers = Vec::new();
    let until_stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let lease = Arc::new(wiring::lease(&member));
    let membership = Arc::new(wiring::membership(&member));
    let jobs = Arc::new(wiring::jobs(&member));
    let renewals = Arc::new(Renewals::start(&lease, dialer.clone()));
    let versions = Arc::new(wiring::version(
        &member,
        dialer.clone(),
        started.etcd_streams.clone(),
    ));
    // Peers must reach us before a leader can be elected: serve them first. Every
    // member listens for peers, one alone too: it can grow.
    let peer_service = Arc::new(PeerService::new(
        member.raft.clone(),
        &membership,
        settings.snap_dir(),
        renewals.clone(),
        member.metrics.peers.clone(),
        member.id.release,
        member.id.vocabulary.clone(),
    ));
    let direct_links = crate::peer::direct::receiver::routes(peer_service.clone(), stop_rx.clone());
    let peer_router = tonic::service::Routes::new(
        PeerServer::from_arc(peer_service)
            .max_decoding_message_size(crate::peer::MAX_SNAPSHOT_CHUNK),
    )
    .into_axum_router()
    .merge(direct_links)
    .merge(crate::domains::version::report::routes(
        Arc::downgrade(member.reads.store()),
        member.id.release,
    ))
    .merge(crate::domains::version::enabled::routes(Arc::downgrade(
        &versions,
    )))
    .merge(crate::peer::etcd::routes::routes(Arc::downgrade(
        &membership,
    )));
    let etcd_raft = crate::peer::etcd::leases::routes(renewals.clone(), Arc::downgrade(&lease))
        .merge(crate::peer::etcd::receive::routes(Arc::new(
            crate::peer::etcd::receive::Receiver {
                raft: member.raft.clone(),
                membership: Arc::downgrade(&membership),
                snap_dir: settings.snap_dir(),
                release: member.id.release,
                receiving: Default::default(),
                streams: started.etcd_streams.clone(),
            },
        )));
    let peer_router = peer_router
        .merge(crate::peer::etcd::guard::refusing_unless_etcd(
            etcd_raft,
            member.id.vocabulary.clone(),
        ))
        .layer(axum::middleware::map_response(
            crate::peer::etcd::routes::mark_oxcd,
        ));
    for (l, url) in peer_listeners {
        tracing::info!(address = %l.local_addr(), url, "serving peer traffic");
        let server = crate::peer::server::serve(l, peer_router.clone(), stop_rx.clone());
        servers.push(tokio::spawn(async move {
            server.await;
            Ok(())
        }));
    }
    // As etcd: serve clients once the member has joined a leader and replayed its log,
    // and a member is ready once its name and client URLs are published, so the
    // membership checks never see a serving member as not started.
    let ready = match wait_until_ready(&member, &mut apply_ended).await {
        Ok(()) => publish_attributes(member.clone(), stop_rx.clone(), &mut apply_ended).await,
        Err(e) => Err(e),
    };
    if let Err(e) = ready {
        let _ = stop_tx.send(true);
        stop_member(&member);
        let e = match e {
            NotReady::Removed => ServeError::Removed,
            NotReady::Stopped(ended) => failure(ended, raft_thread).await.into(),
        };
        return Err(e);
    }
    if settings.initial_corrupt_check
        && let Err(e) = corrupt::initial_check(&jobs, &dialer).await
    {
        let _ = stop_tx.send(true);
        stop_member(&member);
        return Err(ServeError::Corrupt(e));
    }
    if !settings.corrupt_check_time.is_zero() {
        tokio::spawn(corrupt::periodic(
            jobs.clone(),
            dialer.clone(),
            settings.corrupt_check_time,
            stop_rx.clone(),
        ));
    }
    member
        .metrics
        .grpc
        .set_extensive(settings.metrics_extensive);
    let services = wiring::services(
        &member,
        &lease,
        &membership,
        renewals,
        stop_rx.clone(),
        settings.stop_grpc_service_on_defrag,
    );
    let http = Arc::new(wiring::http(&member));
    let split = !http_listeners.is_empty();
    let routers = client_routes::build(client_routes::RouterParts {
        services: &services,
        http: http.clone(),
        membership: member.state.membership.clone(),
        grpc_metrics: member.metrics.grpc.clone(),
        gateway: settings.enable_grpc_gateway,
        max_streams: settings.max_concurrent_streams,
        split,
        pprof: settings.enable_pprof,
    });
    let mut bound = Vec::new();
    let client_traffic = if split { Traffic::Grpc } else { Traffic::Both };
    let client_side = client_listeners
        .into_iter()
        .zip(&settings.listen_client_urls)
        .map(|(l, url)| (l, url, &routers.client, client_traffic));
    let http_side = http_listeners
        .into_iter()
        .zip(&settings.listen_client_http_urls)
        .filter_map(|(l, url)| Some((l, url, routers.http_only.as_ref()?, Traffic::Http)));
    for (l, url, router, traffic) in client_side.chain(http_side) {
        let addr = l.local_addr().clone();
        if is_tls(url) {
            tracing::info!(address = %addr, url, traffic = traffic.name(), "serving client traffic securely");
        } else {
            tracing::info!(address = %addr, url, traffic = traffic.name(), "serving client traffic insecurely; this is strongly discouraged!");
        }
        if let Addr::Tcp(a) = addr
            && traffic != Traffic::Http
        {
            bound.push(a);
        }
        let cert_names_user = settings.client_tls.client_cert_auth;
        let listener = ClientListener {
            listener: l,
            cert_names_user,
            bytes: member.metrics.client_bytes.clone(),
        };
        // Requests carry their connection's certificate name only where CN auth applies:
        // elsewhere they pay nothing for it.
        let mut builder =
            hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
        if traffic == Traffic::Grpc {
            // As etcd's gRPC-only port: a connection that does not speak HTTP/2 is
            // closed.
            builder = builder.http2_only();
        }
        builder
            .http2()
            .max_concurrent_streams(settings.max_concurrent_streams);
        let served = oxcd_transport::serve::serve(
            listener,
            builder,
            router.clone(),
            cert_names_user,
            stop_rx.clone(),
        );
        let server = tokio::spawn(async move {
            served.await;
            Ok(())
        });
        servers.push(server);
    }
    let metrics_router = http::routes(http);
    for (l, url) in metrics_listeners
        .into_iter()
        .zip(&settings.listen_metrics_urls)
    {
        tracing::info!(address = %l.local_addr(), url, "serving metrics");
        let server = axum::serve(PlainListener(l), metrics_router.clone())
            .with_graceful_shutdown(until_stopped(stop_rx.clone()));
        servers.push(tokio::spawn(async move { server.await }));
    }
    tracing::info!(
        name = %settings.name,
        member_id = %format!("{:x}", member.id.member_id),
        cluster_id = %format!("{:x}", member.id.cluster_id),
        "ready to serve client requests"
    );
    on_ready(bound);
    tokio::spawn(crate::domains::lease::expiry::run(
        lease.clone(),
        stop_rx.clone(),
    ));
    if let Some(mode) = settings.auto_compaction {
        tokio::spawn(crate::jobs::compactor::run(
            jobs.clone(),
            mode,
            settings.auto_compaction_revision_interval,
            stop_rx.clone(),
        ));
    }
    tokio::spawn(crate::domains::version::monitor::run(
        (*versions).clone(),
        stop_rx.clone(),
    ));
    if !settings.downgrade_check_time.is_zero() {
        tokio::spawn(
            crate::domains::version::monitor::cancel_finished_downgrades(
                (*versions).clone(),
                settings.downgrade_check_time,
                stop_rx.clone(),
            ),
        );
    }
    if settings.auto_promote_learners {
        tokio::spawn(crate::domains::membership::auto_promote::run(
            membership.clone(),
            stop_rx.clone(),
        ));
    }
    let mut removed = member.state.membership.removed_self();
    let result = tokio::select! {
        _ = shutdown => {
            tracing::info!("received shutdown signal; stopping");
            // As etcd's `Stop`: a leader hands over first, so the cluster does not
            // wait an election timeout (and leases are not left unrenewed) for a new
            // one.
            hand_over_leadership(&member, settings.election_timeout).await;
            Ok(())
        }
        ended = &mut apply_ended => Err(ended),
        _ = async {
            if removed.wait_for(|r| *r).await.is_err() {
                std::future::pending::<()>().await;
            }
        } => {
            // As etcd: a moment for the leader to tell the others the removal
            // committed, then stop (a clean stop: restarting would be refused). A
            // leader first hands over to the voter most caught up, so the cluster
            // does not wait an election timeout for a new one.
            tokio::time::sleep(10 * settings.heartbeat).await;
            hand_over_leadership(&member, settings.election_timeout).await;
            tracing::warn!("{}; stopping", crate::peer::MEMBER_REMOVED);
            Ok(())
        }
    };
    let _ = stop_tx.send(true);
    stop_member(&member);
    // Open client streams would hold a graceful shutdown forever: bound the wait, for
    // every server at once.
    if tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(servers))
        .await
        .is_err()
    {
        tracing::warn!("client connections still open after 2s; closing them");
    }
    let result = match result {
        Ok(()) => {
            let raft = join_threads(raft_thread, apply_thread).await;
            if let Err(e) = raft {
                tracing::error!("raft: {e}");
            }
            Ok(())
        }
        Err(ended) => Err(failure(ended, raft_thread).await.into()),
    };
    drop(started.lock);
    tracing::info!("stopped serving");
    result
}

/// What the apply thread's end channel gave: its result, or nothing if it went away.
type ApplyEnded = Result<Result<(), Fatal>, oneshot::error::RecvError>;

/// Why the member stopped on its own, once the apply thread ended: its fatal error, or
/// (when raft's events ended first) the raft loop's. The raft thread has ended, or is
/// ending: it is joined.
async fn failure(ended: ApplyEnded, raft_thread: oxcd_raft::node::RaftThread) -> Fatal {
    let raft = tokio::task::spawn_blocking(move || raft_thread.join()).await;
    match ended {
        Ok(Err(fatal)) => fatal,
        _ => match raft {
            Ok(Ok(Err(e))) => Fatal::Raft(e),
            _ => Fatal::Raft(RaftError::Stopped),
        },
    }
}

/// Joins the raft and apply threads after a clean stop: raft's result.
async fn join_threads(
    raft_thread: oxcd_raft::node::RaftThread,
    apply_thread: std::thread::JoinHandle<()>,
) -> Result<(), RaftError> {
    let joined = tokio::task::spawn_blocking(move || {
        let raft = raft_thread.join();
        let _ = apply_thread.join();
        raft
    })
    .await;
    match joined {
        Ok(Ok(raft)) => raft,
        _ => Err(RaftError::Stopped),
    }
}

fn is_tls(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("unixs://")
}

fn bind(
    url: &str,
    side: &'static str,
    tls: Option<&Arc<oxcd_transport::tls::ServerTls>>,
    check: Option<oxcd_transport::listen::ConnCheck>,
) -> Result<oxcd_transport::listen::Listener, ServeError> {
    Ok(listeners::bind(url, side, tls, check)?)
}

fn stop_member(member: &Arc<Member>) {
    member.state.watch_hub.close();
    member.raft.stop();
}

/// Publishes this member's name and client URLs through raft (as etcd does on start),
/// retrying until it is applied or the member stops.
async fn publish_attributes(
    member: Arc<Member>,
    mut stop: watch::Receiver<bool>,
    apply_ended: &mut oneshot::Receiver<Result<(), Fatal>>,
) -> Result<(), NotReady> {
    let attrs = oxcd_api::oxcdpb::MemberAttributes {
        id: member.id.member_id,
        name: member.id.name.clone(),
        client_urls: member.id.client_urls.clone(),
    };
    loop {
        tokio::select! {
            published = member.writes.propose(attrs.clone(), None) => match published {
                Ok(_) => {
                    tracing::info!(client_urls = ?attrs.client_urls, "published local member to cluster");
                    return Ok(());
                }
                Err(e) => tracing::warn!("failed to publish local member to cluster: {e}; retrying"),
            },
            // Applied without answering us: in a snapshot the leader sent (an entry a
            // snapshot covers completes no waiter).
            () = attributes_applied(&member, &attrs) => {
                tracing::info!(client_urls = ?attrs.client_urls, "published local member to cluster (applied through a snapshot)");
                return Ok(());
            }
            // The member stopped (a fatal apply): its end says why, never retried.
            ended = &mut *apply_ended => return Err(NotReady::Stopped(ended)),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.wait_for(|s| *s) => return Ok(()),
        }
    }
}

/// Returns once the store holds `attrs` as this member's published attributes, checked
/// at each index applied from now on (a restarted member that published the same before
/// still publishes, as etcd's members do at every start).
async fn attributes_applied(member: &Member, attrs: &oxcd_api::oxcdpb::MemberAttributes) {
    let mut applied = member.state.store.applied_index();
    applied.mark_unchanged();
    loop {
        if applied.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
        let store = member.reads.store();
        if crate::domains::membership::published(store).get(&attrs.id) == Some(attrs) {
            return;
        }
    }
}

/// When this member leads: asks the voter with the most of the log to take over, and
/// waits (up to `within`) until it has.
async fn hand_over_leadership(member: &Member, within: Duration) {
    let Ok(progress) = member.role.progress().await else {
        return;
    };
    let me = member.role.me();
    let voters = member.roster.voters();
    let Some((&to, _)) = progress
        .iter()
        .filter(|(id, _)| **id != me && voters.contains(id))
        .max_by_key(|(_, matched)| **matched)
    else {
        return;
    };
    tracing::info!(to = %format!("{to:x}"), "handing leadership over before stopping");
    if member.role.transfer_leader(to).is_err() {
        return;
    }
    member
        .role
        .wait_for_leader(within, |leader| leader != me)
        .await;
}

/// Why a member did not become ready.
enum NotReady {
    /// It was removed from the cluster.
    Removed,
    /// Its apply thread ended.
    Stopped(ApplyEnded),
}

/// Waits until a leader is known and everything committed then is applied, as etcd
/// before it serves clients: on raft's leadership watch and the store's applied index.
async fn wait_until_ready(
    member: &Member,
    apply_ended: &mut oneshot::Receiver<Result<(), Fatal>>,
) -> Result<(), NotReady> {
    let ready = async {
        let mut leadership = member.role.leadership();
        let mut reminder = tokio::time::interval_at(
            tokio::time::Instant::now() + NO_LEADER_REMINDER,
            NO_LEADER_REMINDER,
        );
        loop {
            tokio::select! {
                known = async { leadership.wait_for(|l| l.leader != 0).await.is_ok() } => {
                    if !known {
                        // Raft stopped: the apply thread's end says why.
                        std::future::pending::<()>().await;
                    }
                    break;
                }
                _ = reminder.tick() => tracing::info!("waiting for a leader before serving clients"),
            }
        }
        let commit = member.role.commit();
        let mut applied = member.state.store.applied_index();
        if applied.wait_for(|a| *a >= commit).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let mut removed = member.state.membership.removed_self();
    tokio::select! {
        _ = ready => Ok(()),
        ended = apply_ended => Err(NotReady::Stopped(ended)),
        _ = async {
            if removed.wait_for(|r| *r).await.is_err() {
                std::future::pending::<()>().await;
            }
        } => Err(NotReady::Removed),
    }
}

/// How often a member that waits for a leader says so.
const NO_LEADER_REMINDER: Duration = Duration::from_secs(5);

/// What a client listener serves (etcd's `traffic` in its log line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Traffic {
    /// gRPC only (`--listen-client-urls` beside `--listen-client-http-urls`).
    Grpc,
    /// HTTP only (`--listen-client-http-urls`).
    Http,
    /// Both, on one port.
    Both,
}

impl Traffic {
    fn name(self) -> &'static str {
        match self {
            Traffic::Grpc => "grpc",
            Traffic::Http => "http",
            Traffic::Both => "grpc+http",
        }
    }
}

/// The address a listen URL binds (what follows the scheme), as etcd compares them.
fn listen_address(url: &str) -> &str {
    url.split_once("://").map_or(url, |(_, rest)| rest)
}
