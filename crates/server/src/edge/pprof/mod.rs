//! `--enable-pprof`: `/debug/pprof/` on the client port's HTTP side, as etcd mounts Go's
//! `net/http/pprof` there. Served: the index, and `/debug/pprof/profile?seconds=N` (a
//! CPU profile sampled at 100 Hz for N seconds, 30 by default, in the pprof format
//! `go tool pprof` reads: [`profile`]). Go's other profiles (heap, goroutine, block,
//! mutex, ...) describe a Go runtime oxcd has not: they answer 404 saying so.
//!
//! One CPU profile runs at a time (the sampler is process-wide); a second request is
//! refused with 500, as Go's handler refuses it ("profiling already in use").

pub mod profile;

use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Sampling frequency, Go's default.
const HZ: i32 = 100;
/// The longest profile asked for (Go refuses a profile longer than the server's write
/// timeout; etcd's client server has none: an hour bounds a typo).
const MAX_SECONDS: u64 = 3600;

/// The pprof routes.
pub fn routes() -> Router {
    Router::new()
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof/profile", get(cpu))
        .route("/debug/pprof/{*name}", get(not_here))
}

async fn index() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        "<html><head><title>/debug/pprof/</title></head><body>\n\
         /debug/pprof/<br>\n<br>\nTypes of profiles available:\n\
         <table><thead><td>Count</td><td>Profile</td></thead>\n\
         <tr><td></td><td><a href='profile?debug=1'>profile</a></td></tr>\n\
         </table>\n<br>\n<p>profile: CPU profile. You can specify the duration in the \
         seconds GET parameter. After you get the profile file, use the go tool pprof \
         command to investigate the profile.</p>\n</body></html>\n",
    )
        .into_response()
}

async fn not_here(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!(
            "Unknown profile: {name} (oxcd serves the CPU profile only: /debug/pprof/profile)\n"
        ),
    )
        .into_response()
}

/// The `seconds` parameter of a query string, as Go's `r.FormValue("seconds")`.
fn seconds_param(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .find(|(k, _)| *k == "seconds")
        .map(|(_, v)| v)
}

/// A Go handler's error answer (`serveError`): the status, and the text.
fn go_error(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::HeaderName::from_static("x-go-pprof"), "1"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

async fn cpu(uri: axum::http::Uri) -> Response {
    let seconds = match seconds_param(uri.query()) {
        None | Some("") => 30,
        Some(s) => match s.parse::<u64>() {
            Ok(0) | Err(_) => 30,
            Ok(n) => n,
        },
    };
    if seconds > MAX_SECONDS {
        return go_error(
            StatusCode::BAD_REQUEST,
            "profile duration exceeds server's WriteTimeout",
        );
    }
    let guard = match pprof::ProfilerGuardBuilder::default().frequency(HZ).build() {
        Ok(g) => g,
        Err(e) => {
            return go_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("Could not enable CPU profiling: {e}"),
            );
        }
    };
    let started = std::time::SystemTime::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let report = tokio::task::spawn_blocking(move || guard.report().build()).await;
    let report = match report {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            return go_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("Could not build the CPU profile: {e}"),
            );
        }
        Err(e) => {
            return go_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
        }
    };
    let body = profile::encode(&report, HZ, started);
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"profile\"",
            ),
        ],
        body,
    )
        .into_response()
}
