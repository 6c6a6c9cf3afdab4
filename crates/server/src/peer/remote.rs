//! Before a member without data starts: ask the peers named in `--initial-cluster` what
//! they know, so that a member whose data dir was lost cannot bootstrap again.
//!
//! A member that has served (published its attributes) and comes back with an empty
//! data dir would rejoin with an empty log and no memory of its votes: together with a
//! lagging peer it could elect a leader missing acknowledged writes. etcd refuses this
//! for `--initial-cluster-state new` ("member ... has already been bootstrapped"); oxcd
//! refuses it for `existing` too, and says what to do. Unreachable peers are normal on a
//! first bootstrap (members start together) and are not an error for `new`.
//!
//! A member joining a running cluster (`existing`) learns from its peers the cluster id
//! and the id `member add` gave it, and checks that it can run at the cluster's version,
//! as etcd does.

use std::time::Duration;

use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_api::oxcdpb::{PeerMembersRequest, PeerMembersResponse};

use oxcd_api::oxcdpb::MemberInfo;

use super::PeerDialer;
use super::dialer::DialError;
use crate::domains::membership::bootstrap::InitialCluster;
use crate::domains::membership::ids;
use oxcd_config::settings::Settings;

/// How long each peer has to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(1);

/// Why a member must not start, or could not learn the cluster it joins.
#[derive(Debug, thiserror::Error)]
pub enum FreshMemberError {
    /// `--initial-cluster-state existing`, and no peer answered.
    #[error(
        "cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs ({})",
        list(.0)
    )]
    NoClusterInfo(Vec<Unanswered>),
    /// No answering peer lists this member as `--initial-cluster` describes it.
    #[error(transparent)]
    Join(#[from] JoinError),
    /// The running cluster's version is outside what this member's release can join
    /// ([`crate::domains::version::join`]; etcd's text).
    #[error("incompatible with current running cluster")]
    IncompatibleCluster,
    /// The member served before and has lost its data.
    #[error(
        "member {id:x} has already been bootstrapped; its data dir {} holds no data, so it \
         lost what it acknowledged and must not rejoin as itself (it could help elect a \
         leader missing acknowledged writes). Restore its data dir, or remove the member \
         and add it again with a new one",
        data_dir.display()
    )]
    AlreadyBootstrapped {
        /// The member's id.
        id: u64,
        /// Its (empty) data dir.
        data_dir: std::path::PathBuf,
    },
}

/// A peer URL that did not answer, and why.
#[derive(Debug, thiserror::Error)]
#[error("{name} {url}: {error}")]
pub struct Unanswered {
    /// The peer's name in `--initial-cluster`.
    pub name: String,
    /// The URL asked.
    pub url: String,
    /// Why it did not answer.
    pub error: AskError,
}

/// Why a peer gave no answer to what we asked it (its members, its hash).
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// It could not be dialed.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// It refused the request.
    #[error("{}", .0.message())]
    Refused(Box<tonic::Status>),
    /// It did not answer in time.
    #[error("timed out")]
    TimedOut,
    /// An etcd member's peer port could not be asked.
    #[error(transparent)]
    EtcdRequest(Box<super::etcd::client::PeerHttpError>),
    /// An etcd member's member list did not read.
    #[error("unreadable member list: {0}")]
    EtcdMembers(#[from] serde_json::Error),
    /// An etcd member's answer carried no cluster id.
    #[error("no cluster id in the member list's answer")]
    EtcdNoClusterId,
}

/// Why no answering peer gave a cluster to join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The first answer's refusal (etcd's `ValidateClusterAndAssignIDs`).
    #[error("error validating peerURLs {members}: {error}")]
    Validate {
        /// The answering peer's members, as etcd prints them.
        members: String,
        /// Why they do not match `--initial-cluster`.
        error: AssignError,
    },
    /// No peer answered.
    #[error("no peer answered")]
    NoAnswer,
}

/// Why `--initial-cluster` does not name the running cluster's members (etcd's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    /// Not as many members as the running cluster has.
    #[error("member count is unequal")]
    CountUnequal,
    /// A member's peer URLs (sorted) differ from the running one's.
    #[error("unmatched member while checking PeerURLs ({local:?}, {remote:?})")]
    Unmatched {
        /// The URLs `--initial-cluster` gives.
        local: Vec<String>,
        /// The running member's.
        remote: Vec<String>,
    },
    /// This member's name is not in `--initial-cluster`.
    #[error("couldn't find local name {0:?} in the initial cluster configuration")]
    NameNotFound(String),
}

fn list(unanswered: &[Unanswered]) -> String {
    let list: Vec<String> = unanswered.iter().map(Unanswered::to_string).collect();
    list.join("; ")
}

/// A peer's answer: its cluster and members, and whether the cluster's log is in etcd's
/// vocabulary (the peer spoke etcd's protocol, or an oxcd member said so).
struct Answer {
    members: PeerMembersResponse,
    etcd: bool,
}

/// Asks the peer at `url` what it knows: in oxcd's protocol, else (an etcd member's
/// peer port routes HTTP/2 to its gRPC server, which has no oxcd service) in etcd's.
async fn ask(dialer: &PeerDialer, url: &str) -> Result<Answer, AskError> {
    let call = async {
        let channel = dialer.connect(url, ASK_TIMEOUT).await?;
        PeerClient::new(channel)
            .members(PeerMembersRequest {})
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AskError::Refused(Box::new(s)))
    };
    let oxcd = tokio::time::timeout(ASK_TIMEOUT, call)
        .await
        .map_err(|_| AskError::TimedOut)
        .and_then(|r| r);
    match oxcd {
        Ok(members) => Ok(Answer {
            etcd: members.etcd_vocabulary,
            members,
        }),
        Err(AskError::Refused(status)) if status.code() == tonic::Code::Unimplemented => {
            ask_etcd(dialer, url).await.map(|members| Answer {
                members,
                etcd: true,
            })
        }
        // Over TLS an etcd member's gRPC server expects a second TLS handshake inside the
        // first (etcd 3.5 `embed/etcd.go` `servePeers`): no oxcd call gets through, so
        // its HTTP/1.1 protocol is tried; when that fails too, the first error stands.
        Err(e) if url.starts_with("https://") => match ask_etcd(dialer, url).await {
            Ok(members) => Ok(Answer {
                members,
                etcd: true,
            }),
            Err(_) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// etcd's `GET /members`, as a joining etcd member reads it
/// (`cluster_util.go` `getClusterFromRemotePeers`): the cluster id from its header, the
/// members from its JSON; a member with client URLs has started.
async fn ask_etcd(dialer: &PeerDialer, url: &str) -> Result<PeerMembersResponse, AskError> {
    use super::etcd::{client, headers, members};
    let answer = client::get(dialer, url, "/members", ASK_TIMEOUT)
        .await
        .map_err(|e| AskError::EtcdRequest(Box::new(e)))?;
    let cluster_id = answer
        .headers
        .get(headers::CLUSTER_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(headers::parse_id)
        .ok_or(AskError::EtcdNoClusterId)?;
    let list = members::parse_list(&answer.body)?;
    let published = list
        .iter()
        .filter(|m| m.client_urls.as_ref().is_some_and(|u| !u.is_empty()))
        .map(|m| m.id)
        .collect();
    let members = list
        .into_iter()
        .map(super::etcd::members::EtcdMember::into_info)
        .collect();
    Ok(PeerMembersResponse {
        cluster_id,
        members,
        published,
        etcd_vocabulary: true,
    })
}

/// Checks a member that has no WAL yet against its peers; Err says why it must not start.
/// Ok(Some) is the running cluster a member started with `--initial-cluster-state
/// existing` joins, with the id `member add` gave it; Ok(None): a new cluster.
pub async fn check_fresh_member(
    s: &Settings,
    dialer: &PeerDialer,
) -> Result<Option<InitialCluster>, FreshMemberError> {
    let Some((_, my_urls)) = s.initial_cluster.iter().find(|(n, _)| *n == s.name) else {
        // Reported by the bootstrap with etcd's message.
        return Ok(None);
    };
    let (mut answers, failures) = ask_all(s, dialer).await;
    let me = if s.initial_cluster_existing {
        if answers.is_empty() {
            return Err(FreshMemberError::NoClusterInfo(failures));
        }
        // `member add` answers once its member has applied the change; a peer that has
        // not yet may not list us: ask again for a moment before giving up.
        let mut joined = join(s, &answers);
        for _ in 0..JOIN_RETRIES {
            if joined.is_ok() {
                break;
            }
            tokio::time::sleep(JOIN_RETRY_PAUSE).await;
            let (again, _) = ask_all(s, dialer).await;
            if !again.is_empty() {
                answers = again;
                joined = join(s, &answers);
            }
        }
        let joined = joined?;
        // etcd's isCompatibleWithCluster (bootstrapExistingClusterNoWAL).
        if !crate::domains::version::join::compatible_with_cluster(
            &joined.members,
            joined.me,
            dialer,
            s.request_timeout(),
        )
        .await
        {
            return Err(FreshMemberError::IncompatibleCluster);
        }
        Some(joined)
    } else {
        None
    };
    let my_id = me.as_ref().map_or_else(
        || ids::member_id(my_urls, &s.initial_cluster_token),
        |c| c.me,
    );
    if answers.iter().any(|a| a.members.published.contains(&my_id)) {
        return Err(FreshMemberError::AlreadyBootstrapped {
            id: my_id,
            data_dir: s.data_dir.clone(),
        });
    }
    Ok(me)
}

/// How often, and how far apart, a joining member asks again when no peer lists it yet.
const JOIN_RETRIES: usize = 10;
const JOIN_RETRY_PAUSE: Duration = Duration::from_millis(300);

/// Every peer's answer (the first URL of each that answers), and why the others did not.
async fn ask_all(s: &Settings, dialer: &PeerDialer) -> (Vec<Answer>, Vec<Unanswered>) {
    let mut answers = Vec::new();
    let mut failures = Vec::new();
    for (name, urls) in s.initial_cluster.iter().filter(|(n, _)| *n != s.name) {
        for url in urls {
            match ask(dialer, url).await {
                Ok(a) => {
                    answers.push(a);
                    break;
                }
                Err(error) => failures.push(Unanswered {
                    name: name.clone(),
                    url: url.clone(),
                    error,
                }),
            }
        }
    }
    (answers, failures)
}

/// The cluster to join, from the first answer that lists this member as
/// `--initial-cluster` describes it; else the first answer's refusal.
fn join(s: &Settings, answers: &[Answer]) -> Result<InitialCluster, JoinError> {
    let mut first_err = None;
    for answer in answers {
        let remote = &answer.members;
        match assign_ids(&s.initial_cluster, &remote.members, &s.name) {
            Ok(me) => {
                return Ok(InitialCluster {
                    me,
                    cluster_id: remote.cluster_id,
                    members: remote.members.clone(),
                    joins_etcd: answer.etcd,
                });
            }
            Err(error) => {
                first_err.get_or_insert_with(|| JoinError::Validate {
                    members: describe(&remote.members),
                    error,
                });
            }
        }
    }
    Err(first_err.unwrap_or(JoinError::NoAnswer))
}

/// The running cluster's members as etcd prints them in this error.
fn describe(members: &[MemberInfo]) -> String {
    let list: Vec<String> = members
        .iter()
        .map(|m| format!("{}={}", m.name, m.peer_urls.join(",")))
        .collect();
    list.join(",")
}

/// etcd's `ValidateClusterAndAssignIDs`: `--initial-cluster` must name exactly the
/// running cluster's members by their peer URLs; returns the id the cluster gave the
/// member called `name`.
fn assign_ids(
    local: &[(String, Vec<String>)],
    remote: &[MemberInfo],
    name: &str,
) -> Result<u64, AssignError> {
    if local.len() != remote.len() {
        return Err(AssignError::CountUnequal);
    }
    let sorted = |urls: &[String]| {
        let mut v = urls.to_vec();
        v.sort();
        v
    };
    let mut l: Vec<(&str, Vec<String>)> =
        local.iter().map(|(n, u)| (n.as_str(), sorted(u))).collect();
    let mut r: Vec<(u64, Vec<String>)> = remote
        .iter()
        .map(|m| (m.id, sorted(&m.peer_urls)))
        .collect();
    l.sort_by(|a, b| a.1.cmp(&b.1));
    r.sort_by(|a, b| a.1.cmp(&b.1));
    let mut mine = None;
    for ((n, lu), (id, ru)) in l.iter().zip(&r) {
        if lu != ru {
            return Err(AssignError::Unmatched {
                local: lu.clone(),
                remote: ru.clone(),
            });
        }
        if *n == name {
            mine = Some(*id);
        }
    }
    mine.ok_or_else(|| AssignError::NameNotFound(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, url: &str) -> MemberInfo {
        MemberInfo {
            id,
            peer_urls: vec![url.to_string()],
            ..Default::default()
        }
    }

    #[test]
    fn a_joining_member_takes_the_id_the_cluster_gave_its_peer_urls() {
        let local = vec![
            ("a".to_string(), vec!["http://h:1".to_string()]),
            ("new".to_string(), vec!["http://h:3".to_string()]),
        ];
        let remote = [member(7, "http://h:3"), member(5, "http://h:1")];
        assert_eq!(assign_ids(&local, &remote, "new"), Ok(7));
        assert_eq!(
            assign_ids(&local, &remote[..1], "new"),
            Err(AssignError::CountUnequal)
        );
        let moved = [member(7, "http://h:4"), member(5, "http://h:1")];
        assert!(matches!(
            assign_ids(&local, &moved, "new"),
            Err(AssignError::Unmatched { .. })
        ));
    }
}
