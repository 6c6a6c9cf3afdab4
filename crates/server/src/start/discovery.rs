//! How a new member learns its initial cluster when `--initial-cluster` does not give
//! it: DNS SRV records (`--discovery-srv`, etcd 3.5; [`oxcd_transport::srv`]) or etcd
//! 3.6's v3 discovery (`--discovery-endpoints`, `--discovery-token`) through an existing
//! etcd or oxcd cluster's KV.
//!
//! v3 discovery, as etcd 3.6 does it: the discovery cluster holds the expected size at
//! `/_etcd/registry/<token>/_config/size` (written by the operator); each member puts
//! `name=peer-url,...` at `/_etcd/registry/<token>/members/<member id in hex>`, then
//! waits (watching the prefix) until `size` members have registered; the initial
//! cluster is the first `size` registrations in creation order. A member that finds the
//! cluster full before its own key is refused ("discovery: cluster is full"); without
//! a size key, discovery fails at once ("discovery: size key not found").
//!
//! Invariants: only a member without a WAL discovers (a restart uses what it has);
//! every member computes the same cluster, since all read the same keys in the same
//! creation order.

use std::time::Duration;

use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::watch_client::WatchClient;
use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{PutRequest, RangeRequest, WatchCreateRequest, WatchRequest};
use oxcd_api::mvccpb::KeyValue;
use oxcd_api::mvccpb::event::EventType;
use tonic::transport::Channel;

use crate::edge::services::recipes::prefix_end;
use crate::peer::PeerDialer;
use crate::peer::dialer::DialError;
use oxcd_config::settings::Settings;

/// The root of every discovery token's keys.
const PREFIX: &str = "/_etcd/registry";
/// How long a discovery request may take (etcd's default request timeout).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dialing an endpoint may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest pause between retries (etcd: 2^8 s; shorter here, since a member waiting
/// on a discovery service that comes back should not sleep minutes).
const MAX_BACKOFF: Duration = Duration::from_secs(16);

/// Why discovery found no initial cluster.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// DNS SRV discovery failed.
    #[error("{0}")]
    Srv(String),
    /// v3 discovery failed for good.
    #[error("failed to join discovery cluster ({0})")]
    Join(ServiceError),
    /// The discovered cluster's text does not parse.
    #[error("{0}")]
    InitialCluster(String),
    /// The discovered cluster does not list this member as it is.
    #[error("{0}")]
    Bootstrap(String),
}

/// Why the v3 discovery service could not be used: for good when
/// `ServiceError::is_final`, else retried.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No endpoint was given.
    #[error("no discovery endpoint")]
    NoEndpoint,
    /// The last endpoint tried could not be dialed.
    #[error("{endpoint}: {error}")]
    Dial {
        /// The endpoint as given.
        endpoint: String,
        /// Why.
        error: DialError,
    },
    /// A request took longer than the request timeout.
    #[error("request timed out")]
    TimedOut,
    /// The discovery service refused a request.
    #[error("{}", .0.message())]
    Refused(Box<tonic::Status>),
    /// The size key is missing.
    #[error("discovery: size key not found")]
    NoSizeKey,
    /// The size key holds no positive number.
    #[error("discovery: size key is bad")]
    BadSizeKey,
    /// `size` members registered before this one.
    #[error("discovery: cluster is full")]
    Full,
    /// The watch request could not be queued (the watch stream is gone).
    #[error("channel closed")]
    WatchClosed,
    /// The watch ended before enough members registered.
    #[error("the discovery watch ended")]
    WatchEnded,
}

impl ServiceError {
    /// Whether retrying cannot help (the token's keys say no).
    fn is_final(&self) -> bool {
        matches!(
            self,
            ServiceError::NoSizeKey | ServiceError::BadSizeKey | ServiceError::Full
        )
    }

    fn refused(status: tonic::Status) -> ServiceError {
        ServiceError::Refused(Box::new(status))
    }
}

/// One registration: its key, its `name=url,...` text and when it was created.
#[derive(Debug, Clone)]
struct Registration {
    key: String,
    peers: String,
    created: i64,
}

impl Registration {
    /// The registration a key-value of the members prefix holds (trimmed, as etcd reads it).
    fn of(kv: &KeyValue) -> Registration {
        Registration {
            key: String::from_utf8_lossy(&kv.key).trim().to_string(),
            peers: String::from_utf8_lossy(&kv.value).trim().to_string(),
            created: kv.create_revision,
        }
    }
}

/// The registrations found so far, in creation order.
#[derive(Debug, Default)]
struct Registrations(Vec<Registration>);

impl Registrations {
    fn add(&mut self, r: Registration) {
        if !r.peers.contains('=') || self.0.iter().any(|x| x.key == r.key) {
            return;
        }
        self.0.push(r);
        self.0.sort_by_key(|r| r.created);
    }
}

/// The discovery service of one member.
struct Service {
    token: String,
    endpoints: Vec<String>,
    dialer: PeerDialer,
}

fn members_prefix(token: &str) -> String {
    format!("{PREFIX}/{token}/members/")
}

impl Service {
    /// A channel to the first endpoint that answers.
    async fn channel(&self) -> Result<Channel, ServiceError> {
        let mut last = ServiceError::NoEndpoint;
        for ep in &self.endpoints {
            let url = if ep.contains("://") {
                ep.clone()
            } else {
                format!("http://{ep}")
            };
            match self.dialer.connect(&url, DIAL_TIMEOUT).await {
                Ok(c) => return Ok(c),
                Err(error) => {
                    last = ServiceError::Dial {
                        endpoint: ep.clone(),
                        error,
                    }
                }
            }
        }
        Err(last)
    }

    /// The expected cluster size; a final error when the key is missing or bad, another
    /// when the service could not be asked (retried).
    async fn size(&self, kv: &mut KvClient<Channel>) -> Result<usize, ServiceError> {
        let key = format!("{PREFIX}/{}/_config/size", self.token);
        let resp = tokio::time::timeout(
            REQUEST_TIMEOUT,
            kv.range(RangeRequest {
                key: key.into_bytes(),
                ..Default::default()
            }),
        )
        .await
        .map_err(|_| ServiceError::TimedOut)?
        .map_err(ServiceError::refused)?
        .into_inner();
        let Some(kv) = resp.kvs.first() else {
            return Err(ServiceError::NoSizeKey);
        };
        match std::str::from_utf8(&kv.value)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
        {
            Some(n) if n > 0 => Ok(n as usize),
            _ => Err(ServiceError::BadSizeKey),
        }
    }

    /// Every registration, and the revision they were read at.
    async fn registrations(
        &self,
        kv: &mut KvClient<Channel>,
    ) -> Result<(Registrations, i64), ServiceError> {
        let prefix = members_prefix(&self.token);
        let resp = tokio::time::timeout(
            REQUEST_TIMEOUT,
            kv.range(RangeRequest {
                key: prefix.clone().into_bytes(),
                range_end: prefix_end(prefix.as_bytes()),
                ..Default::default()
            }),
        )
        .await
        .map_err(|_| ServiceError::TimedOut)?
        .map_err(ServiceError::refused)?
        .into_inner();
        let mut regs = Registrations::default();
        for kv in resp.kvs {
            regs.add(Registration::of(&kv));
        }
        let rev = resp.header.map(|h| h.revision).unwrap_or(0);
        Ok((regs, rev))
    }

    /// Waits until `size` members have registered, watching from `rev + 1`.
    async fn wait(
        &self,
        channel: Channel,
        regs: &mut Registrations,
        size: usize,
        rev: i64,
    ) -> Result<(), ServiceError> {
        let prefix = members_prefix(&self.token);
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let create = WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: prefix.clone().into_bytes(),
                range_end: prefix_end(prefix.as_bytes()),
                start_revision: rev + 1,
                ..Default::default()
            })),
        };
        tx.send(create)
            .await
            .map_err(|_| ServiceError::WatchClosed)?;
        let mut stream = WatchClient::new(channel)
            .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .map_err(ServiceError::refused)?
            .into_inner();
        tracing::info!(
            cluster_size = size,
            found_peers = regs.0.len(),
            "waiting for peers from discovery service"
        );
        while regs.0.len() < size {
            let resp = stream
                .message()
                .await
                .map_err(ServiceError::refused)?
                .ok_or(ServiceError::WatchEnded)?;
            for ev in resp.events {
                if ev.r#type != EventType::Put as i32 {
                    continue;
                }
                if let Some(kv) = ev.kv {
                    regs.add(Registration::of(&kv));
                }
            }
        }
        drop(tx);
        Ok(())
    }

    /// Registers `member` with `peers` and returns the initial cluster's text once
    /// complete. Transient failures are retried with backoff.
    async fn join(&self, member: u64, peers: &str) -> Result<String, ServiceError> {
        let own_key = format!("{}{member:x}", members_prefix(&self.token));
        let mut backoff = Duration::from_secs(1);
        loop {
            match self.attempt(&own_key, peers).await {
                Ok(cluster) => return Ok(cluster),
                Err(e) if e.is_final() => return Err(e),
                Err(e) => {
                    tracing::warn!(
                        backoff = ?backoff,
                        "retry connecting to discovery service: {e}"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// One try of [`Service::join`].
    async fn attempt(&self, own_key: &str, peers: &str) -> Result<String, ServiceError> {
        let channel = self.channel().await?;
        let mut kv = KvClient::new(channel.clone());
        let size = self.size(&mut kv).await?;
        let (regs, _) = self.registrations(&mut kv).await?;
        full(&regs, own_key, size)?;
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            kv.put(PutRequest {
                key: own_key.as_bytes().to_vec(),
                value: peers.as_bytes().to_vec(),
                ..Default::default()
            }),
        )
        .await
        .map_err(|_| ServiceError::TimedOut)?
        .map_err(ServiceError::refused)?;
        tracing::info!(
            member_key = own_key,
            member_info = peers,
            "registered with the discovery service"
        );
        let (mut regs, rev) = self.registrations(&mut kv).await?;
        full(&regs, own_key, size)?;
        if regs.0.len() < size {
            self.wait(channel, &mut regs, size, rev).await?;
        }
        Ok(regs
            .0
            .iter()
            .take(size)
            .map(|r| r.peers.as_str())
            .collect::<Vec<_>>()
            .join(","))
    }
}

/// etcd's check: the cluster is full when `size` registrations come before `own_key`'s.
fn full(regs: &Registrations, own_key: &str, size: usize) -> Result<(), ServiceError> {
    for (i, r) in regs.0.iter().enumerate() {
        if r.key == own_key {
            return Ok(());
        }
        if i + 1 >= size {
            return Err(ServiceError::Full);
        }
    }
    Ok(())
}

/// `name=url,...` of this member's advertised peer URLs, sorted (etcd's URLsMap text).
fn own_peers(s: &Settings) -> String {
    let mut urls = s.peer_urls.clone();
    urls.sort();
    urls.iter()
        .map(|u| format!("{}={u}", s.name))
        .collect::<Vec<_>>()
        .join(",")
}

/// A new member's settings with the initial cluster its discovery flags find, checked
/// as `--initial-cluster` is; `settings` unchanged without them or with a WAL.
pub async fn discover(mut s: Settings) -> Result<Settings, DiscoveryError> {
    let discovers = !s.discovery_srv.is_empty() || !s.discovery_endpoints.is_empty();
    if !discovers || oxcd_storage::wal::Wal::exists(&s.wal_dir()) {
        return Ok(s);
    }
    let cluster = if !s.discovery_srv.is_empty() {
        let resolver = oxcd_transport::srv::SrvResolver::new().map_err(DiscoveryError::Srv)?;
        oxcd_transport::srv::initial_cluster(
            &resolver,
            &s.discovery_srv,
            &s.discovery_srv_name,
            &s.name,
            &s.peer_urls,
        )
        .await
        .map_err(DiscoveryError::Srv)?
    } else {
        let service = Service {
            token: s.discovery_token.clone(),
            endpoints: s.discovery_endpoints.clone(),
            dialer: PeerDialer::new(None, None),
        };
        let me = crate::domains::membership::ids::member_id(&s.peer_urls, &s.initial_cluster_token);
        let text = service
            .join(me, &own_peers(&s))
            .await
            .map_err(DiscoveryError::Join)?;
        oxcd_config::flags::parse_initial_cluster(&text).map_err(DiscoveryError::InitialCluster)?
    };
    tracing::info!(found_cluster = ?cluster, "got the initial cluster by discovery");
    oxcd_config::flags::verify_bootstrap(&s.name, &cluster, &s.peer_urls)
        .map_err(DiscoveryError::Bootstrap)?;
    s.initial_cluster = cluster;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(key: &str, created: i64) -> Registration {
        Registration {
            key: key.into(),
            peers: format!("{key}=http://{key}:2380"),
            created,
        }
    }

    #[test]
    fn registrations_keep_creation_order_and_the_cluster_fills() {
        let mut r = Registrations::default();
        r.add(reg("b", 7));
        r.add(reg("a", 5));
        r.add(reg("a", 9));
        r.add(Registration {
            key: "bad".into(),
            peers: "no-equals".into(),
            created: 1,
        });
        let keys: Vec<&str> = r.0.iter().map(|x| x.key.as_str()).collect();
        assert_eq!(keys, vec!["a", "b"]);
        assert!(full(&r, "b", 2).is_ok());
        assert!(full(&r, "c", 3).is_ok());
        let e = full(&r, "c", 2).expect_err("full");
        assert!(matches!(e, ServiceError::Full) && e.is_final(), "{e:?}");
    }
}
