//! Opening a direct link: the dialer's side of the HTTP/1.1 upgrade on a blocking TCP
//! connection (the request, then the answer's head, read to its blank line).
//!
//! The accepting member answers `101 Switching Protocols` and then never writes, so
//! nothing can follow the head: the connection is the dialer's to write frames on.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{UPGRADE_PATH, UPGRADE_PROTOCOL};
use crate::peer::{REFUSAL_KEY, Refusal};

/// The longest answer head a peer may send.
const MAX_HEAD: usize = 16 << 10;

/// Why a direct link could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The URL is not a plain `http://host:port` one.
    #[error("not a plain http peer URL: {0}")]
    NotPlainHttp(String),
    /// Connecting, writing the request or reading the answer failed.
    #[error(transparent)]
    Io(#[from] io::Error),
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

/// The host and port of a plain `http://` peer URL.
pub fn plain_authority(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    (!authority.is_empty()).then_some(authority)
}

/// Opens a direct link to the peer at `url`, connecting from `source` if given, with
/// `headers` (the cluster and member ids and the version headers) on the request. The
/// connection is returned blocking, with no timeouts set.
pub fn open(
    url: &str,
    source: Option<std::net::IpAddr>,
    headers: &[(&str, String)],
    timeout: Duration,
) -> Result<TcpStream, HandshakeError> {
    let authority =
        plain_authority(url).ok_or_else(|| HandshakeError::NotPlainHttp(url.to_owned()))?;
    let stream = connect(authority, source, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
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
    (&stream).write_all(request.as_bytes())?;
    let head = read_head(&stream)?;
    answer(&head)?;
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    Ok(stream)
}

fn connect(
    authority: &str,
    source: Option<std::net::IpAddr>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        "the peer's host resolves to nothing",
    );
    for addr in authority.to_socket_addrs()? {
        match connect_one(addr, source, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn connect_one(
    addr: SocketAddr,
    source: Option<std::net::IpAddr>,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let Some(ip) = source else {
        return TcpStream::connect_timeout(&addr, timeout);
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.bind(&SocketAddr::new(ip, 0).into())?;
    socket.connect_timeout(&addr.into(), timeout)?;
    Ok(socket.into())
}

/// Reads the answer's head, up to and including its blank line.
fn read_head(mut stream: &TcpStream) -> Result<Vec<u8>, HandshakeError> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let n = stream.read(&mut chunk)?;
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
    fn only_plain_http_urls_have_an_authority() {
        assert_eq!(
            plain_authority("http://127.0.0.1:2380"),
            Some("127.0.0.1:2380")
        );
        assert_eq!(plain_authority("http://h:1/x"), Some("h:1"));
        assert_eq!(plain_authority("https://127.0.0.1:2380"), None);
        assert_eq!(plain_authority("unix://a"), None);
    }
}
