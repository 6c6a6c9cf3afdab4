//! Before a member without data starts: ask the peers named in `--initial-cluster` what
//! they know, so that a member whose data dir was lost cannot bootstrap again.
//!
//! A member that has served (published its attributes) and comes back with an empty
//! data dir would rejoin with an empty log and no memory of its votes: together with a
//! lagging peer it could elect a leader missing acknowledged writes. etcd refuses this
//! for `--initial-cluster-state new` ("member ... has already been bootstrapped"); oxcd
//! refuses it for `existing` too, and says what to do. Unreachable peers are normal on a
//! first bootstrap (members start together) and are not an error for `new`.

use std::time::Duration;

use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_api::oxcdpb::{PeerMembersRequest, PeerMembersResponse};

use super::PeerDialer;
use crate::ids;
use crate::settings::Settings;

/// How long each peer has to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(1);

async fn ask(dialer: &PeerDialer, url: &str) -> Result<PeerMembersResponse, String> {
    let call = async {
        let channel = dialer.connect(url, ASK_TIMEOUT).await?;
        PeerClient::new(channel)
            .members(PeerMembersRequest {})
            .await
            .map(|r| r.into_inner())
            .map_err(|s| s.message().to_string())
    };
    tokio::time::timeout(ASK_TIMEOUT, call)
        .await
        .map_err(|_| "timed out".to_string())?
}

/// Checks a member that has no WAL yet against its peers; Err says why it must not start.
pub async fn check_fresh_member(s: &Settings, dialer: &PeerDialer) -> Result<(), String> {
    let Some((_, my_urls)) = s.initial_cluster.iter().find(|(n, _)| *n == s.name) else {
        // Reported by the bootstrap with etcd's message.
        return Ok(());
    };
    let me = ids::member_id(my_urls, &s.initial_cluster_token);
    let mut answers = Vec::new();
    let mut failures = Vec::new();
    for (name, urls) in s.initial_cluster.iter().filter(|(n, _)| *n != s.name) {
        for url in urls {
            match ask(dialer, url).await {
                Ok(a) => {
                    answers.push(a);
                    break;
                }
                Err(e) => failures.push(format!("{name} {url}: {e}")),
            }
        }
    }
    if answers.iter().any(|a| a.published.contains(&me)) {
        return Err(format!(
            "member {me:x} has already been bootstrapped; its data dir {} holds no data, so it \
             lost what it acknowledged and must not rejoin as itself (it could help elect a \
             leader missing acknowledged writes). Restore its data dir, or remove the member \
             and add it again with a new one",
            s.data_dir.display()
        ));
    }
    if !s.initial_cluster_existing {
        return Ok(());
    }
    let Some(remote) = answers.first() else {
        return Err(format!(
            "cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs ({})",
            failures.join("; ")
        ));
    };
    if !remote.members.iter().any(|m| m.id == me) {
        return Err(format!(
            "error validating peerURLs: member {:?} with peer URLs {my_urls:?} is not in the cluster (members are added with `member add`, which oxcd does not support yet)",
            s.name
        ));
    }
    let mine = ids::cluster_id(
        &s.initial_cluster
            .iter()
            .map(|(_, urls)| ids::member_id(urls, &s.initial_cluster_token))
            .collect::<Vec<_>>(),
    );
    if remote.cluster_id != mine {
        return Err(format!(
            "the cluster at the peer URLs has id {:x} but --initial-cluster and --initial-cluster-token describe {mine:x}",
            remote.cluster_id
        ));
    }
    // Listed but never served: it joins as the bootstrap list describes it.
    Ok(())
}
