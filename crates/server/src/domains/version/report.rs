//! What a member says about versions: the `/version` body (client and peer ports) and
//! Status's version fields, each as the release it acts as prints them.

use oxcd_api::etcdserverpb::DowngradeInfo;
use oxcd_go::semver::Version;
use oxcd_mvcc::Store;

use super::cluster::{self, ClusterVersions};
use super::release::Release;
use super::storage;

/// The versions a member reports, read together.
#[derive(Debug, Clone)]
pub struct Report {
    /// The release it acts as.
    pub release: Release,
    /// What the cluster recorded.
    pub cluster: ClusterVersions,
    /// Its storage version (None: not known yet).
    pub storage: Option<Version>,
}

impl Report {
    /// Reads the cluster's and the storage's versions from `store`.
    pub fn read(store: &Store, release: Release) -> Report {
        Report {
            release,
            cluster: cluster::read(store).unwrap_or_default(),
            storage: storage::detect(store),
        }
    }

    /// etcd's `/version` body: `{"etcdserver":…,"etcdcluster":…}` and, from 3.6,
    /// `"storage":…`; `not_decided` and `unknown` while a version is not known.
    pub fn version_json(&self) -> String {
        let json = oxcd_go::json::json_string;
        let cluster = self
            .cluster
            .cluster
            .as_ref()
            .map_or_else(|| "not_decided".to_string(), Version::to_string);
        let mut body = format!(
            "{{\"etcdserver\":{},\"etcdcluster\":{}",
            json(&self.release.server_version().to_string()),
            json(&cluster)
        );
        if self.release.has_3_6() {
            let storage = self
                .storage
                .as_ref()
                .map_or_else(|| "unknown".to_string(), Version::to_string);
            body.push_str(&format!(",\"storage\":{}", json(&storage)));
        }
        body.push('}');
        body
    }

    /// Status's `storageVersion` (3.6; empty when unknown or for 3.5).
    pub fn storage_version(&self) -> String {
        match (&self.storage, self.release.has_3_6()) {
            (Some(v), true) => v.to_string(),
            _ => String::new(),
        }
    }

    /// Status's `downgradeInfo` (3.6: always set; 3.5: absent).
    pub fn downgrade_info(&self) -> Option<DowngradeInfo> {
        self.release.has_3_6().then(|| DowngradeInfo {
            enabled: self.cluster.downgrade.enabled,
            target_version: self.cluster.downgrade.target_version.clone(),
        })
    }
}

/// `GET /version`, as etcd serves it on its client and peer ports. The route holds
/// the store weakly: a server still draining connections after the member stopped
/// must not keep the backend open.
pub fn routes(store: std::sync::Weak<Store>, release: Release) -> axum::Router {
    use axum::response::IntoResponse;
    axum::Router::new().route(
        "/version",
        axum::routing::get(move || {
            let answer = match store.upgrade() {
                Some(store) => (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    Report::read(&store, release).version_json(),
                )
                    .into_response(),
                None => axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response(),
            };
            async move { answer }
        }),
    )
}
