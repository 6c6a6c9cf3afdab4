//! The gateway's HTTP answers: a message or an error as etcd 3.5's gateway sends them.
//!
//! An error is `{"code":<gRPC code>, "message":"<text>"}` with the HTTP status
//! grpc-gateway gives that code (InvalidArgument 400, ResourceExhausted 429, ...). A
//! message carries `Grpc-Metadata-Content-Type: application/grpc`, as etcd's (its gateway
//! forwards the header of the gRPC answer it got); an error does not. The CORS headers
//! are added to every HTTP answer by [`super::cors`].

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Serialize;
use tonic::{Code, Status};

use super::json;

/// The header etcd's gateway passes on from the gRPC answer.
const GRPC_CONTENT_TYPE: &str = "grpc-metadata-content-type";

/// The HTTP status grpc-gateway answers for a gRPC code.
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::REQUEST_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// An error's body as etcd's gateway writes it (google.rpc.Status, details left out
/// when empty, as they always are).
#[derive(Serialize)]
pub struct ErrorBody<'a> {
    code: i32,
    message: &'a str,
}

impl<'a> ErrorBody<'a> {
    /// The body for `code` and `message`.
    pub fn new(code: Code, message: &'a str) -> ErrorBody<'a> {
        ErrorBody {
            code: code as i32,
            message,
        }
    }
}

/// A JSON answer with `status`; `from_grpc` for what the call answered (a message or a
/// stream of them).
fn json_response(status: StatusCode, body: Body, from_grpc: bool) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if from_grpc {
        headers.insert(
            GRPC_CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
    }
    resp
}

/// A unary call's answer.
pub fn message<T: Serialize>(msg: &T) -> Response {
    match json::unary(msg) {
        Ok(body) => json_response(StatusCode::OK, Body::from(body), true),
        Err(e) => status(&Status::internal(e.to_string())),
    }
}

/// An error the call answered (gRPC status and all).
pub fn status(status: &Status) -> Response {
    error(status.code(), status.message())
}

/// An error with `code` and `message`.
pub fn error(code: Code, message: &str) -> Response {
    let body = json::unary(&ErrorBody::new(code, message)).unwrap_or_default();
    json_response(http_status(code), Body::from(body), false)
}

/// What etcd's gateway answers for a path under `/v3/` it does not serve.
pub fn not_found() -> Response {
    error(Code::NotFound, "Not Found")
}

/// What etcd's gateway answers for a path it serves asked with a method other than POST.
pub fn method_not_allowed() -> Response {
    error(Code::Unimplemented, "Method Not Allowed")
}

/// The head of a stream's answer (its lines follow as they come).
pub fn stream(body: Body) -> Response {
    json_response(StatusCode::OK, body, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_is_etcds() {
        let body = json::unary(&ErrorBody::new(
            Code::InvalidArgument,
            "etcdserver: key is not provided",
        ))
        .expect("encodes");
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"code":3, "message":"etcdserver: key is not provided"}"#
        );
        assert_eq!(
            http_status(Code::ResourceExhausted),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            http_status(Code::FailedPrecondition),
            StatusCode::BAD_REQUEST
        );
    }
}
