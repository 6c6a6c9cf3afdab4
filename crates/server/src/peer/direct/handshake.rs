//! Opening a direct link: the dialer's side of the HTTP/1.1 upgrade (the request, then
//! the answer's head, read to its blank line) over a connection made by the member's
//! [`PeerDialer`] (plain, or TLS with the peer TLS settings and no ALPN protocol), then
//! the connection taken out of the async runtime for the raft thread to write.
//!
//! The accepting member answers `101 Switching Protocols` and writes nothing more until
//! frames arrive, so nothing can follow the head.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

use oxcd_transport::dial::ClientConn;
use oxcd_transport::listen::Plain;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{UPGRADE_PATH, UPGRADE_PROTOCOL};
use crate::peer::dialer::{DialError, PeerDialer};
use crate::peer::{REFUSAL_KEY, Refusal};

/// The longest answer head a peer may send.
const MAX_HEAD: usize = 16 << 10;

/// Why a direct link could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The URL is not an `http://` or `https://` one (unix sockets keep the gRPC stream).
    #[error("direct links are made over TCP only: {0}")]
    NotTcp(String),
    /// The peer could not be dialed.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// Writing the request or reading the answer failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The peer did not answer within the time allowed.
    #[error("the peer did not answer the upgrade in time")]
    TimedOut,
    /// The peer answered, but not with an upgrade and not with a refusal: it has no
    /// direct links (an etcd member, an older oxcd).
    #[error("the peer does not offer direct links (answered {0})")]
    NotOffered(u16),
    /// The peer refused us, as a gRPC peer stream would have been refused.
    #[error("the peer refused the link: {0:?}")]
    Refused(Refusal),
    /// The answer is not HTTP.
    #[error("the peer's answer is not HTTP")]
    Garbled,
}

/// Whether direct links are made to peers at `url` (TCP, plain or TLS).
pub fn over_tcp(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// An opened link: its TCP connection (blocking) and, over TLS, the session.
pub struct Opened {
    /// The connection.
    pub socket: TcpStream,
    /// The TLS session on it, for a `https://` peer.
    pub tls: Option<rustls::ClientConnection>,
}

/// Opens a direct link to the peer at `url` with `dialer`, with `headers` (the cluster
/// and member ids and the version headers) on the request, within `timeout`.
pub async fn open(
    dialer: &PeerDialer,
    url: &str,
    headers: &[(&str, String)],
    timeout: Duration,
) -> Result<Opened, HandshakeError> {
    if !over_tcp(url) {
        return Err(HandshakeError::NotTcp(url.to_owned()));
    }
    let (mut conn, uri) = dialer.connection(url, timeout).await?;
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("localhost");
    let mut request = format!(
        "GET {UPGRADE_PATH} HTTP/1.1\r\nhost: {authority}\r\nconnection: upgrade\r\nupgrade: {UPGRADE_PROTOCOL}\r\n"
    );
    for (key, value) in headers {
        request.push_str(key);
        request.push_str(": ");
        request.push_str(value);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let exchange = async {
        conn.write_all(request.as_bytes()).await?;
        conn.flush().await?;
        read_head(&mut conn).await
    };
    let head = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| HandshakeError::TimedOut)??;
    answer(&head)?;
    let (tcp, tls) = match conn {
        ClientConn::Plain(Plain::Tcp(tcp)) => (tcp, None),
        ClientConn::Tls(tls) => match (*tls).into_inner() {
            (Plain::Tcp(tcp), session) => (tcp, Some(session)),
            (Plain::Unix(_), _) => return Err(HandshakeError::NotTcp(url.to_owned())),
        },
        ClientConn::Plain(Plain::Unix(_)) => return Err(HandshakeError::NotTcp(url.to_owned())),
    };
    let socket = tcp.into_std()?;
    socket.set_nonblocking(false)?;
    Ok(Opened { socket, tls })
}

/// Reads the answer's head, up to and including its blank line.
async fn read_head(conn: &mut ClientConn) -> Result<Vec<u8>, HandshakeError> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        head.extend_from_slice(&chunk[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(HandshakeError::Garbled);
        }
    }
}

/// What an answer's head says: Ok for an upgrade to our protocol.
fn answer(head: &[u8]) -> Result<(), HandshakeError> {
    let text = std::str::from_utf8(head).map_err(|_| HandshakeError::Garbled)?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or(HandshakeError::Garbled)?;
    let mut parts = status_line.split(' ');
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(HandshakeError::Garbled);
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or(HandshakeError::Garbled)?;
    let header = |name: &str| {
        text.split("\r\n").skip(1).find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    };
    if status == 101 && header("upgrade").is_some_and(|p| p.eq_ignore_ascii_case(UPGRADE_PROTOCOL))
    {
        return Ok(());
    }
    if let Some(refusal) = header(REFUSAL_KEY).and_then(Refusal::from_code) {
        return Err(HandshakeError::Refused(refusal));
    }
    Err(HandshakeError::NotOffered(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_to_our_protocol_is_taken() {
        let head = format!(
            "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: {UPGRADE_PROTOCOL}\r\n\r\n"
        );
        assert!(answer(head.as_bytes()).is_ok());
    }

    #[test]
    fn a_not_found_means_no_direct_links() {
        let head = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert!(matches!(answer(head), Err(HandshakeError::NotOffered(404))));
    }

    #[test]
    fn a_refusal_is_read_by_its_code() {
        let head =
            format!("HTTP/1.1 412 Precondition Failed\r\n{REFUSAL_KEY}: MemberRemoved\r\n\r\n");
        assert!(matches!(
            answer(head.as_bytes()),
            Err(HandshakeError::Refused(Refusal::MemberRemoved))
        ));
    }

    #[test]
    fn links_are_made_over_tcp_only() {
        assert!(over_tcp("http://127.0.0.1:2380"));
        assert!(over_tcp("https://127.0.0.1:2380"));
        assert!(!over_tcp("unix://a"));
        assert!(!over_tcp("unixs://a"));
    }
}
