//! Endpoint strings as etcdctl takes them: `host:port`, `http://host:port`,
//! `https://host:port`, `unix://path`, `unixs://path`. As etcd's Go client (3.4),
//! `http`/`unix` endpoints are always plain text, `https`/`unixs` always TLS (with the
//! given TLS settings, or the system's CAs), and a bare `host:port` uses TLS when TLS
//! settings are given.

use std::path::PathBuf;

use crate::Error;

/// Where and how to dial one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URI the channel is made for (`http://` or `https://`, naming the server).
    pub uri: String,
    /// `Some(true)`: TLS whatever the settings; `Some(false)`: plain whatever the
    /// settings; `None`: TLS if TLS settings are given.
    pub tls: Option<bool>,
    /// A unix socket to dial instead of TCP.
    pub unix: Option<PathBuf>,
}

/// Parses an etcdctl-style endpoint.
pub fn parse_endpoint(ep: &str) -> Result<Target, Error> {
    let ep = ep.trim();
    if ep.is_empty() {
        return Err(Error::BadEndpoint(ep.to_string(), "empty".to_string()));
    }
    let (scheme, rest) = match ep.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, ep),
    };
    let (tls, unix) = match scheme {
        None => (None, false),
        Some("http") => (Some(false), false),
        Some("https") => (Some(true), false),
        Some("unix") => (Some(false), true),
        Some("unixs") => (Some(true), true),
        Some(other) => {
            return Err(Error::BadEndpoint(
                ep.to_string(),
                format!("unsupported scheme {other:?}"),
            ));
        }
    };
    if unix {
        if rest.is_empty() {
            return Err(Error::BadEndpoint(ep.to_string(), "no socket path".into()));
        }
        return Ok(Target {
            uri: "http://localhost".to_string(),
            tls,
            unix: Some(PathBuf::from(rest)),
        });
    }
    Ok(Target {
        uri: format!("http://{}", rest.trim_end_matches('/')),
        tls,
        unix: None,
    })
}

/// Turns an etcdctl-style endpoint into the URI to dial (plain text).
pub fn endpoint_uri(ep: &str) -> Result<String, Error> {
    parse_endpoint(ep).map(|t| t.uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_like_etcdctl() {
        assert_eq!(
            endpoint_uri("127.0.0.1:2379").ok().as_deref(),
            Some("http://127.0.0.1:2379")
        );
        assert_eq!(
            endpoint_uri("http://h:1").ok().as_deref(),
            Some("http://h:1")
        );
        let t = parse_endpoint("https://h:1").expect("https");
        assert_eq!((t.uri.as_str(), t.tls), ("http://h:1", Some(true)));
        assert_eq!(parse_endpoint("h:1").expect("bare").tls, None);
        let t = parse_endpoint("unixs://localhost:2379").expect("unixs");
        assert_eq!(t.unix, Some(PathBuf::from("localhost:2379")));
        assert_eq!(t.tls, Some(true));
        assert!(endpoint_uri("").is_err());
        assert!(endpoint_uri("ftp://h:1").is_err());
    }
}
