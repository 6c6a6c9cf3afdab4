//! Auth under faults (the seeds' scenario): the KV workload runs as `root` while users
//! `u0..u3` write and read keys under `ku<j>/` (role `r<j>` grants read and write there),
//! and an admin grants and revokes those roles again and again. Member kills land in
//! the middle of all of it.
//!
//! The users' operations join the workload's history, so the linearizability check
//! covers them; [`decisions`] then checks every permission decision against the order
//! of the auth changes, and [`finish`] checks that every acknowledged user write is in
//! the store at its revision and that every member's KV hash and state hash (auth tables
//! included) agree.
//!
//! Invariant: only the admin changes auth state, one change at a time, so the changes
//! form a sequence and the state after the first `n` of them is known.

pub mod decisions;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions, Permission};

use crate::history::{Op, Operation, Outcome};
use crate::rng::Rng;
use crate::workload::{execute, outcome_of};

pub use decisions::{Change, DecisionSummary};

/// Users (and roles): user `u<i>` starts with role `r<i>`.
pub const USERS: usize = 4;
/// The all-powerful user's password.
pub const ROOT_PASSWORD: &str = "rootpw";
/// Client ids of the users' clients start here (clear of the workload's, and of the
/// lease expiries it adds after them).
pub const FIRST_USER_CLIENT: usize = 10_000;
/// Every user's password.
const PASSWORD: &str = "pw";
/// How long a request may take before it counts as unanswered.
const OP_TIMEOUT: Duration = Duration::from_secs(2);

/// The prefix role `r<j>` grants.
pub fn prefix(j: usize) -> String {
    format!("ku{j}/")
}

/// The user a users' client acts as.
pub fn user_of(client: usize) -> Option<usize> {
    client.checked_sub(FIRST_USER_CLIENT).map(|c| c % USERS)
}

/// `opts` (the cluster's, TLS or not) logged in as `user`, refreshing an expired token
/// (a restarted member forgets its simple tokens) as etcd's Go client does.
pub fn login(opts: &Option<ConnectOptions>, user: &str, password: &str) -> ConnectOptions {
    opts.clone()
        .unwrap_or_default()
        .with_user(user, password)
        .with_auto_token_refresh(true)
}

/// Runs one setup request until it succeeds (or finds its work done), 20 tries at most.
macro_rules! step {
    ($what:expr, $call:expr) => {{
        let mut last = String::new();
        let mut done = false;
        for _ in 0..20 {
            match tokio::time::timeout(OP_TIMEOUT, $call).await {
                Ok(Ok(_)) => done = true,
                Ok(Err(e)) if e.to_string().contains("already") => done = true,
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "timeout".into(),
            }
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if !done {
            return Err(format!("auth setup: {}: {last}", $what));
        }
    }};
}

/// Makes root, the users and their roles, and turns auth on (before any fault).
pub async fn setup(url: &str, opts: &Option<ConnectOptions>) -> Result<(), String> {
    let mut c = Client::connect([url], opts.clone())
        .await
        .map_err(|e| format!("auth setup: {e}"))?;
    step!("root", c.user_add("root", ROOT_PASSWORD, None));
    step!("root role", c.role_add("root"));
    step!("root's role", c.user_grant_role("root", "root"));
    for i in 0..USERS {
        let (user, role) = (format!("u{i}"), format!("r{i}"));
        step!("user", c.user_add(user.as_str(), PASSWORD, None));
        step!("role", c.role_add(role.as_str()));
        let perm = Permission::read_write(prefix(i)).with_prefix();
        step!(
            "grant",
            c.role_grant_permission(role.as_str(), perm.clone())
        );
        step!(
            "user's role",
            c.user_grant_role(user.as_str(), role.as_str())
        );
    }
    step!("auth enable", c.auth_enable());
    Ok(())
}

/// The users' clients and the admin, running.
pub struct Running {
    users: Vec<tokio::task::JoinHandle<Vec<Operation>>>,
    admin: tokio::task::JoinHandle<Vec<Change>>,
}

/// Starts `clients` users' clients (client `c` acts as user `c % USERS` on member
/// `c % members`) and the admin; they run until `stop`.
pub fn start(
    urls: &[String],
    opts: &Option<ConnectOptions>,
    clients: usize,
    seed: u64,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Running {
    let users = (0..clients)
        .map(|c| {
            let user = c % USERS;
            tokio::spawn(user_loop(
                FIRST_USER_CLIENT + c,
                urls[c % urls.len()].clone(),
                login(opts, &format!("u{user}"), PASSWORD),
                Rng::new(seed.wrapping_mul(7919).wrapping_add(c as u64)),
                start,
                stop.clone(),
            ))
        })
        .collect();
    let admin = tokio::spawn(admin_loop(
        urls.to_vec(),
        login(opts, "root", ROOT_PASSWORD),
        Rng::new(seed ^ 0xad),
        start,
        stop,
    ));
    Running { users, admin }
}

impl Running {
    /// The users' operations and the admin's changes, once `stop` is set.
    pub async fn finish(self) -> (Vec<Operation>, Vec<Change>) {
        let mut ops = Vec::new();
        for u in self.users {
            if let Ok(o) = u.await {
                ops.extend(o);
            }
        }
        let changes = self.admin.await.unwrap_or_default();
        (ops, changes)
    }
}

async fn connect(url: &str, opts: &ConnectOptions) -> Option<Client> {
    tokio::time::timeout(OP_TIMEOUT, Client::connect([url], Some(opts.clone())))
        .await
        .ok()?
        .ok()
}

/// One user's client: puts (unique values) and linearizable gets on keys of every
/// role's prefix, so some are permitted and some are not as the grants change.
async fn user_loop(
    id: usize,
    url: String,
    opts: ConnectOptions,
    mut rng: Rng,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<Operation> {
    let now = || start.elapsed().as_nanos() as u64;
    let mut out = Vec::new();
    let mut client: Option<Client> = None;
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        if client.is_none() {
            client = connect(&url, &opts).await;
            if client.is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        }
        let Some(c) = client.as_mut() else { continue };
        let key = format!(
            "{}{}",
            prefix(rng.below(USERS as u64) as usize),
            rng.below(4)
        );
        seq += 1;
        let op = if rng.below(10) < 7 {
            Op::Put {
                key,
                value: format!("u{id}-{seq}"),
            }
        } else {
            Op::Get {
                key,
                serializable: false,
            }
        };
        let invoke = now();
        let res = tokio::time::timeout(OP_TIMEOUT, execute(c, &op)).await;
        let complete = now();
        let gave_up = res.is_err();
        let outcome = outcome_of(&op, res, &|_, e| decisions::refused(e));
        if gave_up || matches!(outcome, Outcome::Indeterminate(_)) {
            client = None;
        }
        if matches!(outcome, Outcome::Failed(_)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        out.push(Operation {
            id: 0,
            client: id,
            op,
            invoke,
            complete,
            outcome,
        });
    }
    out
}

/// Grants or revokes `role` for `user` (a role's name is `r<j>`); the answer's header
/// revision is when it applied.
async fn toggle(c: &mut Client, user: usize, role: usize, grant: bool) -> Result<i64, String> {
    let (u, r) = (format!("u{user}"), format!("r{role}"));
    let rev = if grant {
        c.user_grant_role(u, r)
            .await
            .map(|x| x.header().map(|h| h.revision()))
    } else {
        c.user_revoke_role(u, r)
            .await
            .map(|x| x.header().map(|h| h.revision()))
    };
    rev.map_err(|e| e.to_string())?
        .ok_or_else(|| "no header".to_string())
}

/// Whether `user` holds `role` now, and the revision the answer was read at.
async fn holds(c: &mut Client, user: usize, role: usize) -> Result<(bool, i64), String> {
    let r = c
        .user_get(format!("u{user}"))
        .await
        .map_err(|e| e.to_string())?;
    let rev = r.header().map(|h| h.revision()).unwrap_or(0);
    Ok((r.roles().iter().any(|x| *x == format!("r{role}")), rev))
}

/// The admin: every 100–400 ms flips one (user, role) grant. A change with no answer is
/// settled by asking, after a pause, whether it took effect: then it is known to have
/// applied somewhere between its call and that answer.
async fn admin_loop(
    urls: Vec<String>,
    opts: ConnectOptions,
    mut rng: Rng,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<Change> {
    let now = || start.elapsed().as_nanos() as u64;
    let mut granted = [[false; USERS]; USERS];
    for (i, row) in granted.iter_mut().enumerate() {
        row[i] = true;
    }
    let mut changes = Vec::new();
    let mut last_rev = 0;
    let mut next_url = 0;
    let mut client: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(rng.millis(100, 400)).await;
        let Some(c) = client.as_mut() else {
            next_url += 1;
            client = connect(&urls[next_url % urls.len()], &opts).await;
            continue;
        };
        let (user, role) = (
            rng.below(USERS as u64) as usize,
            rng.below(USERS as u64) as usize,
        );
        let grant = !granted[user][role];
        let invoke = now();
        let answer = tokio::time::timeout(OP_TIMEOUT, toggle(c, user, role, grant)).await;
        let complete = now();
        if let Ok(Ok(rev)) = answer {
            granted[user][role] = grant;
            last_rev = rev;
            changes.push(Change {
                user,
                role,
                granted: grant,
                rev_lo: rev,
                rev_hi: rev,
                t_lo: invoke,
                t_hi: complete,
            });
            continue;
        }
        // No answer (or a refusal that says the grant was not what the admin thought):
        // find out from a member that answers.
        let settled = loop {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            next_url += 1;
            let Some(mut c) = connect(&urls[next_url % urls.len()], &opts).await else {
                continue;
            };
            if let Ok(Ok(found)) = tokio::time::timeout(OP_TIMEOUT, holds(&mut c, user, role)).await
            {
                client = Some(c);
                break found;
            }
        };
        let (holds_now, read_rev) = settled;
        if holds_now != granted[user][role] {
            granted[user][role] = holds_now;
            changes.push(Change {
                user,
                role,
                granted: holds_now,
                rev_lo: last_rev,
                rev_hi: read_rev,
                t_lo: invoke,
                t_hi: now(),
            });
        }
        last_rev = read_rev;
    }
    changes
}

/// What [`finish`] found.
#[derive(Debug, Clone)]
pub struct Settled {
    /// Acknowledged user writes found at their revision.
    pub verified_writes: usize,
    /// The members' HashKV (all equal).
    pub hash_kv: u32,
    /// The members' state hash, auth tables included (all equal).
    pub state_hash: u32,
}

/// After recovery: every member's HashKV and state hash agree, and every acknowledged
/// user write holds its value at its revision.
pub async fn finish(
    urls: &[String],
    opts: &Option<ConnectOptions>,
    history: &[Operation],
) -> Result<Settled, String> {
    let root = login(opts, "root", ROOT_PASSWORD);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (hash_kv, state_hash) = loop {
        let mut hashes = Vec::new();
        for url in urls {
            let mut c = connect(url, &root).await.ok_or("a member is unreachable")?;
            let settle = async {
                c.get("settle", None).await?;
                let kv = c.hash_kv(0).await?.hash();
                let state = c.hash().await?.hash();
                Ok::<_, etcd_client::Error>((kv, state))
            };
            hashes.push(settle.await.map_err(|e| e.to_string())?);
        }
        if hashes.windows(2).all(|w| w[0] == w[1]) {
            break hashes[0];
        }
        if Instant::now() > deadline {
            return Err(format!("members' hashes (kv, state) differ: {hashes:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let writes: Vec<(String, String, i64)> = history
        .iter()
        .filter(|o| user_of(o.client).is_some())
        .filter_map(|o| match (&o.op, &o.outcome) {
            (Op::Put { key, value }, Outcome::Ok(r)) => Some((key.clone(), value.clone(), r.rev())),
            _ => None,
        })
        .collect();
    let mut c = connect(&urls[0], &root).await.ok_or("unreachable")?;
    for (key, value, rev) in &writes {
        let r = c
            .get(key.as_str(), Some(GetOptions::new().with_revision(*rev)))
            .await
            .map_err(|e| format!("reading {key} at {rev}: {e}"))?;
        let found = r
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision()));
        if found != Some((value.clone().into_bytes(), *rev)) {
            return Err(format!(
                "acknowledged write {key}={value} at revision {rev} is not in the store: found {found:?}"
            ));
        }
    }
    Ok(Settled {
        verified_writes: writes.len(),
        hash_kv,
        state_hash,
    })
}
