//! Answers as Go's net/http writes them, for the HTTP endpoints that must answer as
//! etcd's do (404s, health errors, the gateway's refusals).

use axum::http::StatusCode;
use axum::response::IntoResponse;

/// An answer as Go's `http.Error` writes it: plain text, `nosniff`, the message and a
/// newline.
pub fn go_text(status: StatusCode, message: &str) -> axum::response::Response {
    (
        status,
        [
            (
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            ),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{message}\n"),
    )
        .into_response()
}
