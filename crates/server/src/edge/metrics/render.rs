//! The scrape: every family `/metrics` exports, read from the member's parts when a
//! scrape comes (raft's status, the store, the backend, the WAL's and backend's latency
//! histograms, `/proc`) and from what [`super::Metrics`] counted, written as etcd's text
//! exposition.

use std::sync::atomic::Ordering;

use super::process;
use super::text::{Exposition, Family, Kind};
use crate::edge::http_handles::HttpHandles;

/// The scrape of what `handles` reach: every family, as etcd's text exposition.
pub fn render(handles: &HttpHandles) -> String {
    let mut e = Exposition::default();
    let st = handles.role.status();
    let leader = st.leader();
    let id = handles.role.me();
    let flag = |b: bool| f64::from(u8::from(b));
    let mut f = Family::new(
        "etcd_server_version",
        Kind::Gauge,
        "Which version is running. 1 for 'server_version' label with current version.",
    );
    f.sample(
        &[(
            "server_version",
            &handles.release.server_version().to_string(),
        )],
        1.0,
    );
    e.add(f);
    let mut f = Family::new(
        "etcd_cluster_version",
        Kind::Gauge,
        "Which version is running. 1 for 'cluster_version' label with current cluster version",
    );
    // Labelled major.minor; a version replaced stays at 0 (etcd's SetVersion).
    let cluster = crate::domains::version::cluster::read(handles.reads.store())
        .ok()
        .and_then(|c| c.cluster)
        .map(|v| v.major_minor());
    for (version, current) in handles.metrics.cluster_versions(cluster) {
        f.sample(
            &[("cluster_version", &version)],
            if current { 1.0 } else { 0.0 },
        );
    }
    e.add(f);
    // oxcd's own: which vocabulary the raft log is in (etcd's while the cluster version
    // lets etcd 3.5 members in; see machine/vocabulary.rs).
    let mut f = Family::new(
        "oxcd_log_vocabulary",
        Kind::Gauge,
        "Which vocabulary the raft log is written in. 1 for the current one: 'etcd' (etcd 3.5's entries; etcd members may join) or 'oxcd' (oxcd's extensions on).",
    );
    let now = handles.writes.vocabulary();
    for v in [
        crate::machine::vocabulary::Vocabulary::Oxcd,
        crate::machine::vocabulary::Vocabulary::Etcd,
    ] {
        f.sample(&[("vocabulary", v.name())], flag(v == now));
    }
    e.add(f);
    let mut f = Family::new(
        "etcd_server_id",
        Kind::Gauge,
        "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.",
    );
    f.sample(&[("server_id", &format!("{id:x}"))], 1.0);
    e.add(f);
    e.single(
        "etcd_server_has_leader",
        Kind::Gauge,
        "Whether or not a leader exists. 1 is existence, 0 is not.",
        flag(leader != 0),
    );
    e.single(
        "etcd_server_is_leader",
        Kind::Gauge,
        "Whether or not this member is a leader. 1 if is, 0 otherwise.",
        flag(leader == id),
    );
    e.single(
        "etcd_server_is_learner",
        Kind::Gauge,
        "Whether or not this member is a learner. 1 if is, 0 otherwise.",
        flag(handles.membership.is_learner()),
    );
    e.single(
        "etcd_server_leader_changes_seen_total",
        Kind::Counter,
        "The number of leader changes seen.",
        st.leader_changes() as f64,
    );
    e.single(
        "etcd_server_proposals_committed_total",
        Kind::Gauge,
        "The total number of consensus proposals committed.",
        st.commit() as f64,
    );
    e.single(
        "etcd_server_proposals_applied_total",
        Kind::Gauge,
        "The total number of consensus proposals applied.",
        handles.reads.applied_index() as f64,
    );
    e.single(
        "etcd_server_proposals_pending",
        Kind::Gauge,
        "The current number of pending proposals to commit.",
        handles.writes.pending() as f64,
    );
    e.single(
        "etcd_server_proposals_failed_total",
        Kind::Counter,
        "The total number of failed proposals seen.",
        handles.metrics.proposals_failed.load(Ordering::Relaxed) as f64,
    );
    e.single(
        "etcd_server_quota_backend_bytes",
        Kind::Gauge,
        "Current backend storage quota size in bytes.",
        handles.quota.gauge() as f64,
    );
    let backend = handles.reads.store().backend();
    let size = backend.size() as f64;
    e.single(
        "etcd_mvcc_db_total_size_in_bytes",
        Kind::Gauge,
        "Total size of the underlying database physically allocated in bytes.",
        size,
    );
    e.single(
        "etcd_mvcc_db_total_size_in_use_in_bytes",
        Kind::Gauge,
        "Total size of the underlying database logically in use in bytes.",
        size,
    );
    e.single(
        "etcd_debugging_mvcc_current_revision",
        Kind::Gauge,
        "The current revision of store.",
        handles.reads.store().current_rev() as f64,
    );
    e.single(
        "etcd_debugging_mvcc_compact_revision",
        Kind::Gauge,
        "The revision of the last compaction in store.",
        handles.reads.store().compact_rev() as f64,
    );
    mvcc_debugging_families(&mut e, handles);
    let counts = handles.reads.store().counts();
    for (name, help, value) in [
        (
            "etcd_mvcc_range_total",
            "Total number of ranges seen by this member.",
            counts.ranges(),
        ),
        (
            "etcd_debugging_mvcc_range_total",
            "Total number of ranges seen by this member.",
            counts.ranges(),
        ),
        (
            "etcd_mvcc_put_total",
            "Total number of puts seen by this member.",
            counts.puts(),
        ),
        (
            "etcd_mvcc_delete_total",
            "Total number of deletes seen by this member.",
            counts.deletes(),
        ),
        (
            "etcd_mvcc_txn_total",
            "Total number of txns seen by this member.",
            counts.txns(),
        ),
    ] {
        // etcd 3.6 no longer exports the debugging copy of the range count.
        if name == "etcd_debugging_mvcc_range_total" && handles.release.has_3_6() {
            continue;
        }
        e.single(name, Kind::Counter, help, value as f64);
    }
    server_timings(&mut e, handles);
    if handles.release.has_3_6() {
        v3_6_families(&mut e, handles, id);
    }
    if handles.release.has_3_6() {
        let mut f = Family::new(
            "etcd_server_feature_enabled",
            Kind::Gauge,
            "Whether or not a feature is enabled. 1 is enabled, 0 is not.",
        );
        for (gate, on) in handles.feature_gates.all() {
            f.sample(
                &[("name", gate.name), ("stage", gate.stage.label())],
                if on { 1.0 } else { 0.0 },
            );
        }
        e.add(f);
    }
    let leases = handles.leases.counts();
    let (granted, revoked, renewed, expired) = leases.totals();
    for (name, help, value) in [
        (
            "etcd_debugging_lease_granted_total",
            "The total number of granted leases.",
            granted,
        ),
        (
            "etcd_debugging_lease_revoked_total",
            "The total number of revoked leases.",
            revoked,
        ),
        (
            "etcd_debugging_lease_renewed_total",
            "The number of renewed leases seen by the leader.",
            renewed,
        ),
        (
            "etcd_debugging_server_lease_expired_total",
            "The total number of expired leases.",
            expired,
        ),
    ] {
        e.single(name, Kind::Counter, help, value as f64);
    }
    let mut f = Family::new(
        "etcd_debugging_lease_ttl_total",
        Kind::Histogram,
        "Bucketed histogram of lease TTLs.",
    );
    f.histogram(&[], &leases.ttls());
    e.add(f);
    let mut f = Family::new(
        "etcd_disk_wal_fsync_duration_seconds",
        Kind::Histogram,
        "The latency distributions of fsync called by WAL.",
    );
    f.histogram(&[], &st.wal.fsyncs.snapshot());
    e.add(f);
    e.single(
        "etcd_disk_wal_write_bytes_total",
        Kind::Gauge,
        "Total number of bytes written in WAL.",
        st.wal.written.load(Ordering::Relaxed) as f64,
    );
    let mut f = Family::new(
        "etcd_disk_backend_commit_duration_seconds",
        Kind::Histogram,
        "The latency distributions of commit called by backend.",
    );
    f.histogram(&[], &backend.commit_timing().snapshot());
    e.add(f);
    e.single(
        "etcd_disk_defrag_inflight",
        Kind::Gauge,
        "Whether or not defrag is active on the member. 1 means active, 0 means not.",
        f64::from(u8::from(
            handles.metrics.defrags_running.load(Ordering::Relaxed) > 0,
        )),
    );
    let mut f = Family::new(
        "etcd_disk_backend_defrag_duration_seconds",
        Kind::Histogram,
        "The latency distribution of backend defragmentation.",
    );
    f.histogram(&[], &handles.metrics.defrag_timing.0.snapshot());
    e.add(f);
    handles.metrics.add_health(&mut e);
    handles.metrics.grpc.add(&mut e);
    handles.metrics.peers.add(&mut e);
    handles.metrics.client_bytes.add(&mut e);
    process::add(&mut e);
    e.finish()
}

/// The families etcd 3.6 added over 3.5 that oxcd fills: the known peers (every member,
/// this one included, at 1; every removed id at 0: `membership/cluster.go`
/// `buildMembershipMetric`) and the raised alarms (`apply/apply.go`, `Alarm`).
fn v3_6_families(e: &mut Exposition, handles: &HttpHandles, me: u64) {
    let me = format!("{me:x}");
    let mut f = Family::new(
        "etcd_network_known_peers",
        Kind::Gauge,
        "The current number of known peers.",
    );
    {
        let state = handles.membership.state();
        for id in state.members.keys() {
            f.sample(&[("Local", &me), ("Remote", &format!("{id:x}"))], 1.0);
        }
        for id in &state.removed {
            f.sample(&[("Local", &me), ("Remote", &format!("{id:x}"))], 0.0);
        }
    }
    e.add(f);
    let raised = crate::machine::alarms::raised(handles.reads.store()).unwrap_or_default();
    let alarms = handles.metrics.alarms(
        raised
            .iter()
            .map(|a| {
                (
                    a.alarm().as_str_name().to_string(),
                    format!("{:x}", a.member_id),
                )
            })
            .collect(),
    );
    if !alarms.is_empty() {
        let mut f = Family::new(
            "etcd_debugging_server_alarms",
            Kind::Gauge,
            "Alarms for every member in cluster. 1 for 'server_id' label with current ID. 2 for 'alarm_type' label with type of this alarm",
        );
        for ((alarm, member), now) in &alarms {
            f.sample(
                &[("alarm_type", alarm), ("server_id", member)],
                if *now { 1.0 } else { 0.0 },
            );
        }
        e.add(f);
    }
}

/// The apply timings etcd 3.5 and 3.6 export, and 3.6's Range timing.
fn server_timings(e: &mut Exposition, handles: &HttpHandles) {
    let apply = &handles.metrics.apply;
    let mut f = Family::new(
        "etcd_server_apply_duration_seconds",
        Kind::Histogram,
        "The latency distributions of v2 apply called by backend.",
    );
    let applied = apply.snapshot();
    for (op, success, h) in &applied {
        let success = if *success { "true" } else { "false" };
        f.histogram(&[("op", op), ("success", success), ("version", "v3")], h);
    }
    // As a Go histogram vector, no family before its first sample.
    if !applied.is_empty() {
        e.add(f);
    }
    e.single(
        "etcd_server_slow_apply_total",
        Kind::Counter,
        "The total number of slow apply requests (likely overloaded from slow disk).",
        apply.slow() as f64,
    );
    if handles.release.has_3_6() {
        let mut f = Family::new(
            "etcd_server_range_duration_seconds",
            Kind::Histogram,
            "The latency distributions of txn.Range",
        );
        let ranges = handles.metrics.range.snapshot();
        for (success, h) in &ranges {
            f.histogram(&[("success", if *success { "true" } else { "false" })], h);
        }
        if !ranges.is_empty() {
            e.add(f);
        }
    }
}

/// `h` (seconds) as a histogram in milliseconds.
fn in_ms(h: oxcd_storage::timing::HistogramSnapshot) -> oxcd_storage::timing::HistogramSnapshot {
    oxcd_storage::timing::HistogramSnapshot {
        buckets: h.buckets.iter().map(|(b, c)| (b * 1000.0, *c)).collect(),
        count: h.count,
        sum: h.sum * 1000.0,
    }
}

/// etcd's `etcd_debugging_mvcc_*` families beside the revisions and the range count
/// (v3.5.16 server/mvcc/metrics.go; the same in 3.6.14).
fn mvcc_debugging_families(e: &mut Exposition, handles: &HttpHandles) {
    let store = handles.reads.store();
    let watch = &handles.watch_hub.counts;
    for (name, kind, help, value) in [
        (
            "etcd_debugging_mvcc_keys_total",
            Kind::Gauge,
            "Total number of keys.",
            store.live_keys() as f64,
        ),
        (
            "etcd_debugging_mvcc_watch_stream_total",
            Kind::Gauge,
            "Total number of watch streams.",
            watch.streams() as f64,
        ),
        (
            "etcd_debugging_mvcc_watcher_total",
            Kind::Gauge,
            "Total number of watchers.",
            watch.watchers() as f64,
        ),
        (
            "etcd_debugging_mvcc_slow_watcher_total",
            Kind::Gauge,
            "Total number of unsynced slow watchers.",
            watch.slow() as f64,
        ),
        (
            "etcd_debugging_mvcc_events_total",
            Kind::Counter,
            "Total number of events sent by this member.",
            watch.events() as f64,
        ),
        (
            "etcd_debugging_mvcc_pending_events_total",
            Kind::Gauge,
            "Total number of pending events to be sent.",
            0.0,
        ),
        (
            "etcd_debugging_mvcc_db_compaction_last",
            Kind::Gauge,
            "The unix time of the last db compaction. Resets to 0 on start.",
            store.compactions().last() as f64,
        ),
        (
            "etcd_debugging_mvcc_db_compaction_keys_total",
            Kind::Counter,
            "Total number of db keys compacted.",
            store.compactions().rows() as f64,
        ),
        (
            "etcd_debugging_mvcc_total_put_size_in_bytes",
            Kind::Gauge,
            "The total size of put kv pairs seen by this member.",
            store.counts().put_bytes() as f64,
        ),
    ] {
        e.single(name, kind, help, value);
    }
    let compactions = store.compactions();
    for (name, help, h) in [
        (
            "etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds",
            "Bucketed histogram of index compaction pause duration.",
            compactions.index_pause(),
        ),
        (
            "etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds",
            "Bucketed histogram of db compaction pause duration.",
            compactions.db_pause(),
        ),
        (
            "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
            "Bucketed histogram of db compaction total duration.",
            compactions.total(),
        ),
    ] {
        let mut f = Family::new(name, Kind::Histogram, help);
        f.histogram(&[], &in_ms(h));
        e.add(f);
    }
}
