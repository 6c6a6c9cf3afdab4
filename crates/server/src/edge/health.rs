//! The health endpoints as etcd 3.5.16 serves them: `/health` (JSON: alarms, then a
//! leader, then a read; `?exclude=<ALARM>` ignores an alarm, `?serializable=true` skips
//! the leader and reads locally), and `/livez`, `/readyz` (text: named checks, each also
//! at `/livez/<check>`, `?exclude=<check>` on the root path, `?verbose` lists them).
//!
//! Invariant: a check never waits longer than the request timeout; only GET is answered
//! (anything else: 405 with `Allow: GET`, as etcd).

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::AlarmType;
use oxcd_mvcc::{KeyRange, RangeOptions};

use crate::edge::go_http::go_text;
use crate::edge::http_handles::HttpHandles;
use crate::machine::alarms;

/// The checks of `/livez`.
const LIVEZ: [Check; 1] = [Check::SerializableRead];
/// The checks of `/readyz`, in the order they are listed.
const READYZ: [Check; 3] = [
    Check::DataCorruption,
    Check::SerializableRead,
    Check::LinearizableRead,
];

/// Why a health check failed (the text after `failed: ` and `RANGE ERROR:`).
#[derive(Debug, thiserror::Error)]
enum CheckError {
    /// The alarms could not be read, the read barrier failed or timed out.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// A CORRUPT alarm is raised.
    #[error("alarm activated: CORRUPT")]
    Corrupt,
    /// The read itself failed.
    #[error(transparent)]
    Range(#[from] oxcd_mvcc::MvccError),
    /// The read's blocking task failed.
    #[error(transparent)]
    ReadTask(#[from] crate::machine::reads::ReadFailed),
}

/// A named check of `/livez` and `/readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// No CORRUPT alarm is raised.
    DataCorruption,
    /// A local read succeeds.
    SerializableRead,
    /// A linearizable read succeeds.
    LinearizableRead,
}

impl Check {
    fn name(self) -> &'static str {
        match self {
            Check::DataCorruption => "data_corruption",
            Check::SerializableRead => "serializable_read",
            Check::LinearizableRead => "linearizable_read",
        }
    }

    async fn run(self, handles: &HttpHandles) -> Result<(), CheckError> {
        match self {
            Check::DataCorruption => {
                let raised = alarms::raised(handles.reads.store())?;
                if raised.iter().any(|a| a.alarm == AlarmType::Corrupt as i32) {
                    return Err(CheckError::Corrupt);
                }
                Ok(())
            }
            Check::SerializableRead => read(handles, true).await,
            Check::LinearizableRead => read(handles, false).await,
        }
    }
}

/// A read as etcd's health checks make it (one key, as root, from the store itself): a
/// linearizable one waits for the read barrier first, within the request timeout.
async fn read(handles: &HttpHandles, serializable: bool) -> Result<(), CheckError> {
    if !serializable {
        match tokio::time::timeout(handles.request_timeout, handles.reads.barrier()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(EtcdError::Timeout.into()),
        }
    }
    handles
        .reads
        .blocking(|store| {
            // etcd's check is a Range request, which its metrics count.
            store.counts().add_range();
            store
                .range(
                    KeyRange::new(b"", b""),
                    RangeOptions {
                        limit: 1,
                        ..Default::default()
                    },
                )
                .map(drop)
        })
        .await
        .map_err(CheckError::ReadTask)??;
    Ok(())
}

/// The health routes over `handles`.
pub fn routes(handles: Arc<HttpHandles>) -> Router {
    Router::new()
        .route("/health", any(health))
        .route("/livez", any(livez))
        .route("/livez/{check}", any(livez_one))
        .route("/readyz", any(readyz))
        .route("/readyz/{check}", any(readyz_one))
        .with_state(handles)
}

/// The values of `name` in a query string (empty ones left out).
fn query_values<'a>(query: &'a Option<String>, name: &str) -> Vec<&'a str> {
    query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k == name && !v.is_empty()).then_some(v)
        })
        .collect()
}

/// Whether `name` is in the query string at all.
fn query_has(query: &Option<String>, name: &str) -> bool {
    query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .any(|kv| kv.split_once('=').map_or(kv, |(k, _)| k) == name)
}

/// etcd's answer to a method other than GET.
fn not_get() -> Response {
    let mut resp = go_text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET"));
    resp
}

/// What `/health` finds: None when healthy, else the reason.
async fn unhealthy(handles: &HttpHandles, excluded: &[&str], serializable: bool) -> Option<String> {
    match alarms::raised(handles.reads.store()) {
        Ok(raised) => {
            for a in raised {
                let name = AlarmType::try_from(a.alarm)
                    .map(|t| t.as_str_name())
                    .unwrap_or("");
                if excluded.contains(&name) {
                    continue;
                }
                return Some(match AlarmType::try_from(a.alarm) {
                    Ok(AlarmType::Nospace) => "ALARM NOSPACE".into(),
                    Ok(AlarmType::Corrupt) => "ALARM CORRUPT".into(),
                    _ => "ALARM UNKNOWN".into(),
                });
            }
        }
        Err(e) => return Some(format!("RANGE ERROR:{e}")),
    }
    if !serializable && handles.role.leader() == 0 {
        return Some("RAFT NO LEADER".into());
    }
    read(handles, serializable)
        .await
        .err()
        .map(|e| format!("RANGE ERROR:{e}"))
}

async fn health(
    State(handles): State<Arc<HttpHandles>>,
    RawQuery(q): RawQuery,
    req: Request,
) -> Response {
    if req.method() != Method::GET {
        return not_get();
    }
    let excluded = query_values(&q, "exclude");
    let serializable = query_values(&q, "serializable").first() == Some(&"true");
    let reason = unhealthy(&handles, &excluded, serializable).await;
    handles.metrics.health_checked(reason.is_none());
    let body = serde_json::json!({
        "health": reason.is_none().to_string(),
        "reason": reason.clone().unwrap_or_default(),
    })
    .to_string();
    if reason.is_some() {
        return go_text(StatusCode::SERVICE_UNAVAILABLE, &body);
    }
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Runs `checks` (those of `kind` not excluded) and answers as etcd's `/livez` and
/// `/readyz` do.
async fn run_checks(
    handles: &HttpHandles,
    kind: &str,
    checks: &[Check],
    query: &Option<String>,
    method: &Method,
) -> Response {
    if method != Method::GET {
        return not_get();
    }
    let mut listed = String::new();
    let mut failed = false;
    for check in checks {
        let ok = match check.run(handles).await {
            Ok(()) => {
                listed.push_str(&format!("[+]{} ok\n", check.name()));
                true
            }
            Err(e) => {
                listed.push_str(&format!("[-]{} failed: {e}\n", check.name()));
                failed = true;
                false
            }
        };
        handles.metrics.named_check(kind, check.name(), ok);
    }
    if failed {
        return go_text(StatusCode::SERVICE_UNAVAILABLE, &listed);
    }
    let mut body = String::new();
    if query_has(query, "verbose") {
        body.push_str(&listed);
    }
    body.push_str("ok\n");
    go_text(StatusCode::OK, body.trim_end_matches('\n'))
}

/// The checks of `all` left after the query's `exclude`s.
fn not_excluded(all: &[Check], query: &Option<String>) -> Vec<Check> {
    let excluded: BTreeSet<&str> = query_values(query, "exclude").into_iter().collect();
    all.iter()
        .copied()
        .filter(|c| !excluded.contains(c.name()))
        .collect()
}

async fn livez(
    State(handles): State<Arc<HttpHandles>>,
    RawQuery(q): RawQuery,
    req: Request,
) -> Response {
    let checks = not_excluded(&LIVEZ, &q);
    run_checks(&handles, "livez", &checks, &q, req.method()).await
}

async fn readyz(
    State(handles): State<Arc<HttpHandles>>,
    RawQuery(q): RawQuery,
    req: Request,
) -> Response {
    let checks = not_excluded(&READYZ, &q);
    run_checks(&handles, "readyz", &checks, &q, req.method()).await
}

/// One check by name, or Go's 404 when `all` has none of that name.
async fn one(
    handles: &HttpHandles,
    kind: &str,
    all: &[Check],
    name: &str,
    q: &Option<String>,
    method: &Method,
) -> Response {
    match all.iter().find(|c| c.name() == name) {
        Some(c) => run_checks(handles, kind, &[*c], q, method).await,
        None => go_text(StatusCode::NOT_FOUND, "404 page not found"),
    }
}

async fn livez_one(
    State(handles): State<Arc<HttpHandles>>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
    req: Request,
) -> Response {
    one(&handles, "livez", &LIVEZ, &check, &q, req.method()).await
}

async fn readyz_one(
    State(handles): State<Arc<HttpHandles>>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
    req: Request,
) -> Response {
    one(&handles, "readyz", &READYZ, &check, &q, req.method()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_read_as_gos() {
        let q = Some("exclude=NOSPACE&exclude=&serializable=true&verbose".to_string());
        assert_eq!(query_values(&q, "exclude"), vec!["NOSPACE"]);
        assert_eq!(query_values(&q, "serializable"), vec!["true"]);
        assert!(query_has(&q, "verbose"));
        assert!(!query_has(&None, "verbose"));
        let left = not_excluded(&READYZ, &Some("exclude=linearizable_read".into()));
        assert_eq!(left, vec![Check::DataCorruption, Check::SerializableRead]);
    }
}
