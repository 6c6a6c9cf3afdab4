//! Serving a started member: bind the client URLs, serve gRPC and HTTP on each, log
//! readiness, and stop cleanly on a shutdown signal or when the member fails.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::bootstrap::{self, StartError};
use crate::corrupt;
use crate::member::Member;
use crate::peer::service::PeerService;
use crate::settings::Settings;
use crate::{http, services};
use oxcd_api::oxcdpb::peer_server::PeerServer;

/// Why serving ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The member could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// A client URL could not be used.
    #[error("{0}")]
    Listen(String),
    /// The member stopped on a fatal error (disk full, disk error).
    #[error("member stopped: {0}")]
    Fatal(String),
}

/// Resolves a listen URL (`http://host:port`) to a socket address; `localhost` is the
/// IPv4 loopback, as etcd binds it.
pub fn listen_addr(url: &str) -> Result<SocketAddr, ServeError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        ServeError::Listen(format!(
            "listen URL {url:?}: only http:// is supported yet (TLS comes later)"
        ))
    })?;
    let hostport = rest.trim_end_matches('/');
    let hostport = match hostport.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => hostport.to_string(),
    };
    hostport
        .parse()
        .map_err(|_| ServeError::Listen(format!("listen URL {url:?}: expected http://<ip>:<port>")))
}

/// Starts the member in `settings` and serves clients until `shutdown` completes or the
/// member fails. `on_ready` is told each bound address once serving.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()>,
    on_ready: impl FnOnce(Vec<SocketAddr>),
) -> Result<(), ServeError> {
    let addrs: Vec<SocketAddr> = settings
        .listen_client_urls
        .iter()
        .map(|u| listen_addr(u))
        .collect::<Result<_, _>>()?;
    let mut listeners = Vec::new();
    for addr in addrs {
        let l = TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Listen(format!("listen tcp {addr}: bind: {e}")))?;
        listeners.push(l);
    }
    crate::peer::set_source_ip(settings.peer_source_ip);
    if !oxcd_storage::wal::Wal::exists(&settings.wal_dir()) {
        crate::peer::remote::check_fresh_member(&settings)
            .await
            .map_err(StartError::Other)?;
    }
    let s = settings.clone();
    let started = tokio::task::spawn_blocking(move || bootstrap::start(&s))
        .await
        .map_err(|e| ServeError::Fatal(e.to_string()))??;
    let member = started.member.clone();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut servers = Vec::new();
    if member.id.members.len() > 1 {
        // Peers must reach us before a leader can be elected: serve them first.
        let peer_router = tonic::service::Routes::new(
            PeerServer::new(PeerService::new(
                member.raft.clone(),
                member.store.clone(),
                settings.snap_dir(),
            ))
            .max_decoding_message_size(crate::peer::MAX_SNAPSHOT_CHUNK),
        )
        .into_axum_router();
        for url in &settings.listen_peer_urls {
            let addr = listen_addr(url)?;
            let l = TcpListener::bind(addr)
                .await
                .map_err(|e| ServeError::Listen(format!("listen tcp {addr}: bind: {e}")))?;
            tracing::info!(address = %addr, "serving peer traffic");
            let mut rx = stop_rx.clone();
            let server = axum::serve(l, peer_router.clone()).with_graceful_shutdown(async move {
                let _ = rx.wait_for(|s| *s).await;
            });
            servers.push(tokio::spawn(async move { server.await }));
        }
    }
    // As etcd: serve clients once the member has joined a leader and replayed its log.
    wait_until_ready(&member, &started.raft_thread, &started.apply_thread).await?;
    if settings.initial_corrupt_check
        && let Err(e) = corrupt::initial_check(&member).await
    {
        let _ = stop_tx.send(true);
        stop_member(&member);
        return Err(ServeError::Fatal(e));
    }
    if !settings.corrupt_check_time.is_zero() {
        tokio::spawn(corrupt::periodic(
            member.clone(),
            settings.corrupt_check_time,
            stop_rx.clone(),
        ));
    }
    let router = services::routes(member.clone())
        .into_axum_router()
        .merge(http::routes(member.clone()))
        .layer(axum::middleware::map_response(crate::grpc_compat::rewrite));
    let mut bound = Vec::new();
    for l in listeners {
        let addr = l
            .local_addr()
            .map_err(|e| ServeError::Listen(e.to_string()))?;
        tracing::info!(address = %addr, "serving client traffic insecurely; this is strongly discouraged!");
        bound.push(addr);
        let mut rx = stop_rx.clone();
        let server = axum::serve(crate::authority::FixingListener(l), router.clone())
            .with_graceful_shutdown(async move {
                let _ = rx.wait_for(|s| *s).await;
            });
        servers.push(tokio::spawn(async move { server.await }));
    }
    tracing::info!(
        name = %settings.name,
        member_id = %format!("{:x}", member.id.member_id),
        cluster_id = %format!("{:x}", member.id.cluster_id),
        "ready to serve client requests"
    );
    on_ready(bound);
    tokio::spawn(publish_attributes(member.clone(), stop_rx.clone()));
    let fatal = wait_for_failure(&started.raft_thread, &started.apply_thread);
    let result = tokio::select! {
        _ = shutdown => {
            tracing::info!("received shutdown signal; stopping");
            Ok(())
        }
        reason = fatal => Err(ServeError::Fatal(reason)),
    };
    let _ = stop_tx.send(true);
    stop_member(&member);
    for s in servers {
        // Open client streams would hold a graceful shutdown forever: bound the wait.
        if tokio::time::timeout(Duration::from_secs(2), s)
            .await
            .is_err()
        {
            tracing::warn!("client connections still open after 2s; closing them");
        }
    }
    let raft_thread = started.raft_thread;
    let apply_thread = started.apply_thread;
    let joined = tokio::task::spawn_blocking(move || {
        let r = raft_thread.join();
        let a = apply_thread.join();
        (r, a)
    })
    .await;
    if let Ok((Ok(Err(e)), _)) = &joined {
        tracing::error!("raft: {e}");
    }
    drop(started.lock);
    tracing::info!("stopped serving");
    result
}

fn stop_member(member: &Arc<Member>) {
    member.raft.stop();
}

/// Publishes this member's name and client URLs through raft (as etcd does on start),
/// retrying until it is applied or the member stops.
async fn publish_attributes(member: Arc<Member>, mut stop: watch::Receiver<bool>) {
    let attrs = oxcd_api::oxcdpb::MemberAttributes {
        id: member.id.member_id,
        name: member.id.name.clone(),
        client_urls: member.id.client_urls.clone(),
    };
    loop {
        let op = oxcd_api::oxcdpb::internal_request::Op::MemberAttributes(attrs.clone());
        match member.propose(op).await {
            Ok(_) => {
                tracing::info!(client_urls = ?attrs.client_urls, "published local member to cluster");
                return;
            }
            Err(e) => tracing::warn!("failed to publish local member to cluster: {e}; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Waits until a leader is known and everything committed at start is applied.
async fn wait_until_ready<A, B>(
    member: &Member,
    raft: &std::thread::JoinHandle<A>,
    apply: &std::thread::JoinHandle<B>,
) -> Result<(), ServeError> {
    let mut waited = Duration::ZERO;
    loop {
        let st = member.raft.status();
        if st.leader() != 0 && member.applied_index() >= st.commit() {
            return Ok(());
        }
        if raft.is_finished() || apply.is_finished() {
            return Err(ServeError::Fatal(
                "the member stopped while starting (see the error above)".into(),
            ));
        }
        if waited.as_secs() > 0 && waited.as_millis().is_multiple_of(5000) {
            tracing::info!("waiting for a leader before serving clients");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += Duration::from_millis(10);
    }
}

/// Completes with a reason when the raft or apply thread ends on its own.
async fn wait_for_failure<A, B>(
    raft: &std::thread::JoinHandle<A>,
    apply: &std::thread::JoinHandle<B>,
) -> String {
    loop {
        if raft.is_finished() {
            return "the raft loop stopped (see the error above)".into();
        }
        if apply.is_finished() {
            return "the apply loop stopped (see the error above)".into();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
