//! Starting a member: lock the data dir, open the backend and the store, start the raft
//! loop over the WAL and the apply thread.

use std::sync::{Arc, OnceLock};

use crate::backup::etcd_dir::adopt::{MemberDirs, adopt_if_etcds};
use crate::machine::vocabulary::{LiveVocabulary, LogVocabulary, Vocabulary};
use std::thread::JoinHandle;

use oxcd_mvcc::Store;
use oxcd_raft::node::{self, NodeConfig};
use oxcd_raft::persist::WalMetadata;
use oxcd_storage::backend::Backend;
use oxcd_storage::lock::DirLock;
use oxcd_storage::wal::Wal;
use tokio::sync::oneshot;

use crate::domains::lease::Lessor;
use crate::domains::membership::bootstrap::InitialCluster;
use crate::domains::membership::reconfig::Reconfig;
use crate::domains::membership::{self, Membership};
use crate::domains::watch::WatchHub;
use crate::edge::metrics::Metrics;
use crate::edge::metrics::timing::ApplyTiming;
use crate::machine::apply_lane::ApplyLane;
use crate::machine::apply_thread::ApplyLoop;
use crate::machine::applying::ApplyParts;
use crate::machine::fatal::Fatal;
use crate::machine::member::{Identity, Limits, Member, Replicated};
use crate::machine::waiters::Waiters;
use crate::peer::PeerDialer;
use crate::peer::health::PeerHealth;
use crate::peer::transport::{LinkReports, PeerFaults, PeerTransport};
use oxcd_auth::AuthStore;
use oxcd_auth::provider::TokenProvider;
use oxcd_config::settings::Settings;

/// Why a member could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A storage failure (locked dir, corrupt WAL, unreadable backend).
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// The MVCC store could not be rebuilt.
    #[error(transparent)]
    Mvcc(#[from] oxcd_mvcc::MvccError),
    /// The log's recorded vocabulary could not be read.
    #[error(transparent)]
    Vocabulary(#[from] crate::machine::vocabulary::VocabularyError),
    /// The raft log could not be opened.
    #[error(transparent)]
    Raft(#[from] oxcd_raft::RaftError),
    /// The apply thread could not be started.
    #[error("spawn apply thread: {0}")]
    SpawnApply(std::io::Error),
    /// The cluster this member starts in could not be known.
    #[error(transparent)]
    Cluster(#[from] crate::domains::membership::bootstrap::BootstrapError),
    /// `--auth-token` names no usable token provider.
    #[error(transparent)]
    AuthToken(#[from] oxcd_auth::jwt::OptionsError),
    /// A member without data could not join the running cluster.
    #[error(transparent)]
    Join(#[from] crate::peer::remote::FreshMemberError),
    /// The etcd member's data dir it was started on could not be adopted.
    #[error(transparent)]
    Adopt(#[from] crate::backup::etcd_dir::adopt::AdoptError),
    /// This member was removed from the cluster: its data may not serve again.
    #[error(
        "{}: member {id:x} cannot start again with its data; start a new member (member add) with an empty data dir",
        crate::peer::MEMBER_REMOVED
    )]
    Removed {
        /// Its id.
        id: u64,
    },
}

/// A started member and the threads that run it.
pub struct Started {
    /// The member, for the services.
    pub member: Arc<Member>,
    /// The raft thread.
    pub raft_thread: JoinHandle<Result<(), oxcd_raft::RaftError>>,
    /// The apply thread.
    pub apply_thread: JoinHandle<()>,
    /// Completes when the apply thread ends (it ends when the raft loop does too), with
    /// the fatal error that stopped it, if any.
    pub apply_ended: oneshot::Receiver<Result<(), Fatal>>,
    /// Held for the life of the member.
    pub lock: DirLock,
    /// The streams etcd peers dial to this member (served on the peer port, sent on by
    /// the transport).
    pub etcd_streams: Arc<crate::peer::etcd::streams::EtcdStreams>,
}

/// The cluster this member belongs to: recorded in its WAL, the one it joins, or new
/// from the flags.
fn cluster_of(s: &Settings, joining: Option<InitialCluster>) -> Result<InitialCluster, StartError> {
    match Wal::read_metadata(&s.wal_dir())? {
        Some(bytes) => {
            let meta = WalMetadata::decode(&bytes)?;
            Ok(InitialCluster::recorded(
                meta.member_id,
                meta.cluster_id,
                &meta.members,
            )?)
        }
        None => match joining {
            Some(cluster) => Ok(cluster),
            None => Ok(InitialCluster::bootstrap(s)?),
        },
    }
}

/// The contexts of the conf changes that start a new cluster's log, one per initial
/// member (as etcd bootstraps; used only when the WAL is created). Every initial member
/// writes these entries at the same indexes and term, so they must be the same bytes
/// everywhere: the id, name and peer URLs `--initial-cluster` gives all of them — not
/// the client URLs, which only the member itself knows (it publishes them once serving).
fn bootstrap_contexts(cluster: &InitialCluster) -> Vec<(u64, Vec<u8>)> {
    cluster
        .members
        .iter()
        .map(|m| {
            let ctx = oxcd_api::oxcdpb::ConfChangeContext {
                member: Some(oxcd_api::oxcdpb::MemberInfo {
                    client_urls: Vec::new(),
                    ..m.clone()
                }),
                ..Default::default()
            };
            (m.id, prost::Message::encode_to_vec(&ctx))
        })
        .collect()
}

/// This member's conf change context, as in [`bootstrap_contexts`].
fn own_context(cluster: &InitialCluster) -> Vec<u8> {
    bootstrap_contexts(cluster)
        .into_iter()
        .find(|(id, _)| *id == cluster.me)
        .map(|(_, ctx)| ctx)
        .unwrap_or_default()
}

/// The configuration the backend recorded with its applied index (None: a backend
/// from before membership changes, whose configuration is the WAL's).
fn applied_conf_state(store: &Store) -> Result<Option<oxcd_raft::ConfState>, StartError> {
    let key = oxcd_storage::schema::META_CONF_STATE;
    let rows = store.read_meta_prefix(key)?;
    match rows.into_iter().find(|(k, _)| k == key) {
        Some((_, v)) => Ok(Some(oxcd_raft::persist::decode_conf_state(&v)?)),
        None => Ok(None),
    }
}

/// The raft configuration of this member of `cluster`, as of a backend that applied
/// nothing (the caller sets what its backend holds: `conf_state`, `applied`). `joins`:
/// it joins a running cluster.
fn node_config(s: &Settings, cluster: &InitialCluster, joins: bool) -> NodeConfig {
    let ms = s.heartbeat.as_millis().max(1);
    NodeConfig {
        id: cluster.me,
        cluster_id: cluster.cluster_id,
        // A member joining a running cluster starts with no configuration and no log:
        // the leader sends both.
        voters: if joins { Vec::new() } else { cluster.ids() },
        members: cluster.encode(),
        bootstrap_contexts: if joins {
            Vec::new()
        } else {
            bootstrap_contexts(cluster)
        },
        conf_state: None,
        format: None,
        wal_dir: s.wal_dir(),
        heartbeat: s.heartbeat,
        election_ticks: (s.election_timeout.as_millis() / ms) as usize,
        pre_vote: s.pre_vote,
        unsafe_no_fsync: s.unsafe_no_fsync,
        applied: 0,
        max_wals: s.max_wals,
        catch_up_entries: s.snapshot_catchup_entries,
        fixed_election_timeout: false,
        incarnation: oxcd_raft::node::incarnation(),
        force_new_cluster: s.force_new_cluster.then(|| own_context(cluster)),
    }
}

/// Creates, at `s.wal_dir()`, the WAL of a new member of the cluster
/// `s.initial_cluster` describes, exactly as [`start`] creates it for a member without
/// one, and returns that cluster; nothing is started. `oxcdutl snapshot restore` pairs
/// it with a restored backend: on its first start the member applies the bootstrap conf
/// changes over the restored data, so its member list is the new cluster's.
pub fn create_member_wal(s: &Settings) -> Result<InitialCluster, StartError> {
    let cluster = InitialCluster::bootstrap(s)?;
    node::create_wal(&node_config(s, &cluster, false))?;
    Ok(cluster)
}

/// Starts a member with `settings`, dialing peers with `dialer`; `faults` cuts peer
/// links (partition tests only). `joining`: the running cluster a member without data
/// joins (`--initial-cluster-state existing`), as its peers described it.
pub fn start(
    s: &Settings,
    dialer: PeerDialer,
    faults: Option<PeerFaults>,
    joining: Option<InitialCluster>,
) -> Result<Started, StartError> {
    // Before anything is created: a bad --auth-token leaves no data dir behind.
    let (tokens, _) = TokenProvider::from_flag(&s.auth_token, s.auth_token_ttl)?;
    let lock = DirLock::acquire(&s.data_dir.join("member"))?;
    // An etcd member's data dir (the binary swap): continue as that member.
    adopt_if_etcds(&MemberDirs {
        wal: s.wal_dir(),
        snap: s.snap_dir(),
    })?;
    let backend = Arc::new(Backend::open(&s.backend_path())?);
    let store = Arc::new(Store::open(backend)?);
    let joins = joining.is_some();
    let cluster = cluster_of(s, joining)?;
    if cluster.joins_etcd {
        LogVocabulary::from_start(Vocabulary::Etcd).record(store.backend())?;
    }
    let vocabulary = LiveVocabulary::new(LogVocabulary::of(&store)?);
    let ms = s.heartbeat.as_millis().max(1);
    let election_ticks = (s.election_timeout.as_millis() / ms) as u32;
    let leases = Arc::new(Lessor::load(
        &store,
        Lessor::min_ttl_for(s.heartbeat, election_ticks),
    )?);
    let auth = Arc::new(
        AuthStore::load(store.backend(), tokens, s.bcrypt_cost)?
            .with_password_cache(s.auth_password_cache_ttl),
    );
    let membership = Arc::new(Membership::of_member(
        cluster.me,
        membership::table::load(store.backend())?,
    ));
    if membership.state().removed.contains(&cluster.me) {
        return Err(StartError::Removed { id: cluster.me });
    }
    let cfg = NodeConfig {
        conf_state: applied_conf_state(&store)?,
        applied: store.consistent_index(),
        format: Some(vocabulary.get().format()),
        ..node_config(s, &cluster, joins)
    };
    let raft_slot = Arc::new(OnceLock::new());
    // Marked changed: a member restarted after membership changes follows the
    // replicated membership from its first message, not the bootstrap list.
    let mut peer_urls = membership.peer_urls();
    peer_urls.mark_changed();
    let health = Arc::new(PeerHealth::default());
    let removed = membership.clone();
    let metrics = Metrics::with_apply_timing(ApplyTiming::new(s.warning_apply_duration));
    let etcd_streams = Arc::new(crate::peer::etcd::streams::EtcdStreams::default());
    let reports = LinkReports {
        health: health.clone(),
        removed: Arc::new(move || removed.stop_as_removed()),
        traffic: metrics.peers.clone(),
        etcd_streams: etcd_streams.clone(),
    };
    // Every member has a transport, a one-member cluster too: it can grow.
    let transport = PeerTransport::start(
        cluster.me,
        cluster.cluster_id,
        &cluster.peers(),
        Some(peer_urls),
        store.clone(),
        raft_slot.clone(),
        faults,
        dialer.clone(),
        reports,
        vocabulary.clone(),
    );
    let lane = ApplyLane::new();
    let (queue, events) = node::event_channel();
    let (raft, raft_thread) = node::start_with_sink(cfg, transport, lane.sink(queue))?;
    let _ = raft_slot.set(raft.clone());
    let waiters = Arc::new(Waiters::new(cluster.me));
    let watch_hub = Arc::new(WatchHub::new(
        store.clone(),
        s.watch_progress_notify_interval,
    ));
    let state = Replicated {
        store,
        leases,
        auth,
        membership,
        watch_hub,
    };
    let (ended, apply_ended) = oneshot::channel();
    // The release `serve` chose for the dialer's version headers.
    let release = dialer.release();
    let apply_thread = ApplyLoop {
        parts: ApplyParts {
            state: state.clone(),
            raft: raft.clone(),
            waiters: waiters.clone(),
            snapshot_count: s.snapshot_count.max(1),
            snap_dir: s.snap_dir(),
            release,
            timing: metrics.apply.clone(),
            vocabulary: vocabulary.clone(),
        },
        events,
        lane,
    }
    .spawn(ended)
    .map_err(StartError::SpawnApply)?;
    let identity = Identity {
        name: s.name.clone(),
        member_id: cluster.me,
        cluster_id: cluster.cluster_id,
        peer_urls: s.peer_urls.clone(),
        client_urls: s.advertise_client_urls.clone(),
        members: cluster.members.clone(),
        release,
        feature_gates: s.feature_gates.clone(),
        vocabulary,
    };
    let limits = Limits {
        max_txn_ops: s.max_txn_ops,
        max_request_bytes: s.max_request_bytes,
        request_timeout: s.request_timeout(),
        quota: s.quota(),
        election_timeout: s.election_timeout,
        priority_requests: s.feature_gates.enabled("PriorityRequest"),
        max_inflight_range_bytes: match s.max_inflight_range_bytes {
            0 => crate::machine::range_budget::default_limit(),
            n => usize::try_from(n).unwrap_or(usize::MAX),
        },
    };
    let reconfig = Reconfig {
        strict: s.strict_reconfig_check,
        max_learners: s.max_learners,
        health,
        dialer,
    };
    let member = Arc::new(Member::new(
        identity, limits, state, raft, waiters, reconfig, metrics,
    ));
    Ok(Started {
        member,
        raft_thread,
        apply_thread,
        apply_ended,
        lock,
        etcd_streams,
    })
}
