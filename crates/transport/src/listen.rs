//! Listen URLs and listeners.
//!
//! A listen URL is `http://ip:port` or `https://ip:port` (`localhost` is the IPv4
//! loopback, as etcd binds it), or `unix://path` / `unixs://path`, a unix socket at
//! the URL's host and path (etcd's `unix://localhost:2379` is a socket file named
//! `localhost:2379` in the working directory). The `s` schemes serve TLS.
//!
//! Sockets listen with the system's largest accept backlog (`net.core.somaxconn`), as
//! Go servers do, so that thousands of clients reconnecting at once are queued by the
//! kernel instead of having their SYNs dropped and retried a second later. On a TLS
//! listener the handshakes run in their own tasks: a slow or silent client never holds
//! up the accept loop, and a connection is handed out only once its handshake is done.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::tls::ServerTls;

/// Where a listen URL binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A unix socket path.
    Unix(PathBuf),
}

/// A parsed listen URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenUrl {
    /// The URL as given.
    pub url: String,
    /// Where it binds.
    pub bind: Bind,
    /// `https` or `unixs`.
    pub tls: bool,
}

/// Parses a listen URL (see the module doc).
pub fn parse_listen_url(url: &str) -> Result<ListenUrl, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("listen URL {url:?}: expected <scheme>://<host>:<port>"))?;
    let tls = match scheme {
        "http" | "unix" => false,
        "https" | "unixs" => true,
        other => {
            return Err(format!(
                "listen URL {url:?}: unsupported scheme {other:?} (use http, https, unix or unixs)"
            ));
        }
    };
    let bind = if scheme.starts_with("unix") {
        if rest.is_empty() {
            return Err(format!("listen URL {url:?}: no socket path"));
        }
        Bind::Unix(PathBuf::from(rest))
    } else {
        let hostport = rest.trim_end_matches('/');
        let hostport = match hostport.strip_prefix("localhost:") {
            Some(port) => format!("127.0.0.1:{port}"),
            None => hostport.to_string(),
        };
        Bind::Tcp(
            hostport
                .parse()
                .map_err(|_| format!("listen URL {url:?}: expected {scheme}://<ip>:<port>"))?,
        )
    };
    Ok(ListenUrl {
        url: url.to_string(),
        bind,
        tls,
    })
}

/// The accept backlog Go's `net.Listen` uses: `net.core.somaxconn`, at most 65535;
/// 4096 (the kernel's default since 5.4) when it cannot be read.
pub fn max_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|n| *n > 0)
        .map_or(4096, |n| n.min(65_535))
}

/// A bound socket, not yet serving.
#[derive(Debug)]
pub enum Socket {
    /// TCP.
    Tcp(TcpListener),
    /// A unix socket.
    Unix(UnixListener, PathBuf),
}

/// Binds `bind` with [`max_backlog`]. A unix socket file left by an earlier run is
/// removed first, as etcd does. Must run inside a tokio runtime.
pub fn bind(bind: &Bind) -> io::Result<Socket> {
    let backlog = max_backlog() as i32;
    match bind {
        Bind::Tcp(addr) => {
            let domain = socket2::Domain::for_address(*addr);
            let s = socket2::Socket::new(domain, socket2::Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            s.set_nonblocking(true)?;
            s.bind(&(*addr).into())?;
            s.listen(backlog)?;
            Ok(Socket::Tcp(TcpListener::from_std(s.into())?))
        }
        Bind::Unix(path) => {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
            s.set_nonblocking(true)?;
            s.bind(&socket2::SockAddr::unix(path)?)?;
            s.listen(backlog)?;
            let std_listener: std::os::unix::net::UnixListener = s.into();
            Ok(Socket::Unix(
                UnixListener::from_std(std_listener)?,
                path.clone(),
            ))
        }
    }
}

impl Socket {
    /// The address it is bound to.
    pub fn local_addr(&self) -> io::Result<Addr> {
        match self {
            Socket::Tcp(l) => l.local_addr().map(Addr::Tcp),
            Socket::Unix(_, p) => Ok(Addr::Unix(p.clone())),
        }
    }

    async fn accept(&self) -> io::Result<(Plain, Addr)> {
        match self {
            Socket::Tcp(l) => {
                let (s, a) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok((Plain::Tcp(s), Addr::Tcp(a)))
            }
            Socket::Unix(l, p) => {
                let (s, _) = l.accept().await?;
                Ok((Plain::Unix(s), Addr::Unix(p.clone())))
            }
        }
    }
}

/// A local or remote address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    /// TCP.
    Tcp(SocketAddr),
    /// A unix socket (its path).
    Unix(PathBuf),
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addr::Tcp(a) => write!(f, "{a}"),
            Addr::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// An accepted connection before TLS.
#[derive(Debug)]
pub enum Plain {
    /// TCP.
    Tcp(TcpStream),
    /// A unix socket.
    Unix(UnixStream),
}

/// An accepted connection, decrypted if its listener serves TLS.
#[derive(Debug)]
pub enum Conn {
    /// Plain text.
    Plain(Plain),
    /// TLS (boxed: its state is large).
    Tls(Box<tokio_rustls::server::TlsStream<Plain>>),
}

impl Conn {
    /// The peer's certificate chain, leaf first (TLS with a client certificate only).
    pub fn peer_certificates(&self) -> Option<&[rustls_pki_types::CertificateDer<'static>]> {
        match self {
            Conn::Tls(s) => s.get_ref().1.peer_certificates(),
            Conn::Plain(_) => None,
        }
    }
}

/// How long a client has to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const READY_QUEUE: usize = 1024;

/// A serving socket: plain connections as accepted, TLS ones once handshaken.
pub struct Listener {
    local: Addr,
    inner: Inner,
}

enum Inner {
    Plain(Socket),
    Tls {
        ready: mpsc::Receiver<(Conn, Addr)>,
        acceptor: tokio::task::JoinHandle<()>,
    },
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Inner::Tls { acceptor, .. } = &self.inner {
            acceptor.abort();
        }
    }
}

/// A check of a handshaken connection beyond what the TLS library verifies (etcd's
/// SAN check of peers' client certificates); Err says why it is refused.
pub type ConnCheck =
    Arc<dyn Fn(&Conn, &Addr) -> Result<(), crate::tls::HostMismatch> + Send + Sync>;

impl Listener {
    /// Serves `socket` in plain text.
    pub fn plain(socket: Socket) -> io::Result<Listener> {
        Ok(Listener {
            local: socket.local_addr()?,
            inner: Inner::Plain(socket),
        })
    }

    /// Serves `socket` over TLS with the configuration `tls` holds at each handshake;
    /// `check` may refuse a handshaken connection. Refusals are logged with the
    /// remote address, as etcd's "rejected connection on `side` endpoint" lines.
    pub fn tls(
        socket: Socket,
        tls: Arc<ServerTls>,
        check: Option<ConnCheck>,
        side: &'static str,
    ) -> io::Result<Listener> {
        let local = socket.local_addr()?;
        let (tx, ready) = mpsc::channel(READY_QUEUE);
        let acceptor = tokio::spawn(accept_tls(socket, tls, check, side, tx));
        Ok(Listener {
            local,
            inner: Inner::Tls { ready, acceptor },
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> &Addr {
        &self.local
    }

    /// The next connection. Accept errors (too many open files, a connection reset
    /// before it was taken) are logged and retried after a short pause, as Go's
    /// `http.Server` does.
    pub async fn accept(&mut self) -> (Conn, Addr) {
        match &mut self.inner {
            Inner::Plain(socket) => loop {
                match socket.accept().await {
                    Ok((s, a)) => return (Conn::Plain(s), a),
                    Err(e) => accept_pause(&e).await,
                }
            },
            Inner::Tls { ready, .. } => match ready.recv().await {
                Some(c) => c,
                // The accepting task only ends when the listener is dropped.
                None => std::future::pending().await,
            },
        }
    }
}

async fn accept_pause(e: &io::Error) {
    tracing::warn!("accept error: {e}; retrying in 50ms");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

async fn accept_tls(
    socket: Socket,
    tls: Arc<ServerTls>,
    check: Option<ConnCheck>,
    side: &'static str,
    ready: mpsc::Sender<(Conn, Addr)>,
) {
    loop {
        let (plain, addr) = match socket.accept().await {
            Ok(c) => c,
            Err(e) => {
                accept_pause(&e).await;
                continue;
            }
        };
        let config = tls.config();
        let ready = ready.clone();
        let check = check.clone();
        tokio::spawn(async move {
            match handshake(plain, config).await {
                Ok(conn) => {
                    if let Some(check) = &check
                        && let Err(why) = check(&conn, &addr)
                    {
                        tracing::warn!(remote_addr = %addr, error = %why, "rejected connection on {side} endpoint");
                        return;
                    }
                    let _ = ready.send((conn, addr)).await;
                }
                Err(why) => {
                    tracing::warn!(remote_addr = %addr, error = %why, "rejected connection on {side} endpoint")
                }
            }
        });
    }
}

/// What Go's TLS server answers a plain HTTP request with.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

async fn handshake(mut plain: Plain, config: Arc<rustls::ServerConfig>) -> Result<Conn, String> {
    // A TLS connection opens with a handshake record (0x16). Anything else is a
    // plain-text client: tell an HTTP one what is wrong, as Go does, and close.
    if let Plain::Tcp(s) = &plain {
        let mut first = [0u8; 1];
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, s.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] != 0x16 => {
                if first[0].is_ascii_uppercase() {
                    let _ = plain.write_all(PLAIN_HTTP_ANSWER).await;
                    let _ = plain.shutdown().await;
                }
                return Err(
                    "tls: first record does not look like a TLS handshake (a plain-text client on a TLS port)"
                        .into(),
                );
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("TLS handshake timed out".into()),
        }
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(plain)).await {
        Ok(Ok(s)) => Ok(Conn::Tls(Box::new(s))),
        Ok(Err(e)) => Err(format!("TLS handshake error: {e}")),
        Err(_) => Err("TLS handshake timed out".into()),
    }
}

macro_rules! delegate_io {
    ($ty:ty, $($variant:path),+) => {
        impl ::tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut ::tokio::io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                match self.get_mut() { $( $variant(s) => ::tokio::io::AsyncRead::poll_read(::std::pin::Pin::new(s), cx, buf), )+ }
            }
        }
        impl ::tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                match self.get_mut() { $( $variant(s) => ::tokio::io::AsyncWrite::poll_write(::std::pin::Pin::new(s), cx, buf), )+ }
            }
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                match self.get_mut() { $( $variant(s) => ::tokio::io::AsyncWrite::poll_write_vectored(::std::pin::Pin::new(s), cx, bufs), )+ }
            }
            fn is_write_vectored(&self) -> bool {
                match self { $( $variant(s) => ::tokio::io::AsyncWrite::is_write_vectored(s), )+ }
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                match self.get_mut() { $( $variant(s) => ::tokio::io::AsyncWrite::poll_flush(::std::pin::Pin::new(s), cx), )+ }
            }
            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                match self.get_mut() { $( $variant(s) => ::tokio::io::AsyncWrite::poll_shutdown(::std::pin::Pin::new(s), cx), )+ }
            }
        }
    };
}
pub(crate) use delegate_io;

delegate_io!(Plain, Plain::Tcp, Plain::Unix);
delegate_io!(Conn, Conn::Plain, Conn::Tls);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_urls_like_etcd() {
        let u = parse_listen_url("http://localhost:2379").expect("parse");
        assert_eq!(u.bind, Bind::Tcp("127.0.0.1:2379".parse().expect("addr")));
        assert!(!u.tls);
        let u = parse_listen_url("https://[::1]:2379").expect("parse");
        assert_eq!(u.bind, Bind::Tcp("[::1]:2379".parse().expect("addr")));
        assert!(u.tls);
        let u = parse_listen_url("unixs://localhost:2379").expect("parse");
        assert_eq!(u.bind, Bind::Unix(PathBuf::from("localhost:2379")));
        assert!(u.tls);
        let u = parse_listen_url("unix:///tmp/x.sock").expect("parse");
        assert_eq!(u.bind, Bind::Unix(PathBuf::from("/tmp/x.sock")));
        assert!(parse_listen_url("ftp://1.2.3.4:5").is_err());
        assert!(parse_listen_url("http://example.com:5").is_err());
    }

    #[test]
    fn backlog_is_the_systems() {
        let b = max_backlog();
        assert!((128..=65_535).contains(&b), "{b}");
    }
}
