//! Endpoint strings as etcdctl takes them: `host:port`, `http://host:port`; `https://`
//! and `unixs://` ask for TLS, which is refused with a clear error until it is built.

use crate::Error;

/// Turns an etcdctl-style endpoint into the URI to dial.
pub fn endpoint_uri(ep: &str) -> Result<String, Error> {
    let ep = ep.trim();
    if ep.starts_with("https://") || ep.starts_with("unixs://") {
        return Err(Error::TlsUnsupported(ep.to_string()));
    }
    if ep.starts_with("unix://") {
        return Err(Error::BadEndpoint(
            ep.to_string(),
            "unix sockets are not supported".to_string(),
        ));
    }
    if ep.is_empty() {
        return Err(Error::BadEndpoint(ep.to_string(), "empty".to_string()));
    }
    Ok(if ep.starts_with("http://") {
        ep.to_string()
    } else {
        format!("http://{ep}")
    })
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
        assert!(matches!(
            endpoint_uri("https://h:1"),
            Err(Error::TlsUnsupported(_))
        ));
        assert!(endpoint_uri("").is_err());
    }
}
