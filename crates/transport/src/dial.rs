//! Dialing a server for a tonic channel: TCP or a unix socket, plain or TLS, from a
//! chosen local address. A [`Dialer`] is a tower service from the channel's URI to a
//! connection; `https` URIs (or any URI, for a dialer made for TLS) get a TLS handshake
//! with the configuration current at that moment, so a rotated client certificate is
//! used from the next connection on. Channels' connections coalesce their writes
//! ([`crate::coalesce`]): many requests in flight on one connection leave together.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::net::{TcpSocket, TcpStream, UnixStream};

use crate::coalesce::CoalescedWrites;
use crate::listen::{Plain, delegate_io};
use crate::tls::ClientTls;

/// A dialed connection.
#[derive(Debug)]
pub enum ClientConn {
    /// Plain text.
    Plain(Plain),
    /// TLS.
    Tls(Box<tokio_rustls::client::TlsStream<Plain>>),
}

delegate_io!(ClientConn, ClientConn::Plain, ClientConn::Tls);

/// How to reach servers.
#[derive(Clone, Debug, Default)]
pub struct Dialer {
    tls: Option<Arc<ClientTls>>,
    source_ip: Option<IpAddr>,
    unix_path: Option<PathBuf>,
    always_tls: bool,
    http1: bool,
}

impl Dialer {
    /// A dialer using `tls` for `https` URIs (none: such URIs fail to dial).
    pub fn new(tls: Option<Arc<ClientTls>>) -> Dialer {
        Dialer {
            tls,
            ..Dialer::default()
        }
    }

    /// Connections leave from `ip` (any port).
    pub fn with_source_ip(mut self, ip: Option<IpAddr>) -> Dialer {
        self.source_ip = ip;
        self
    }

    /// Every connection goes to the unix socket at `path` (the URI only names the
    /// server for TLS).
    pub fn with_unix_socket(mut self, path: PathBuf) -> Dialer {
        self.unix_path = Some(path);
        self
    }

    /// Every connection uses TLS, whatever the URI's scheme. Channels should be made
    /// for `http://` URIs with this set: tonic built with its own TLS support refuses an
    /// `https://` URI it has no TLS configuration for, even with a custom connector.
    pub fn with_tls(mut self, on: bool) -> Dialer {
        self.always_tls = on;
        self
    }

    /// TLS connections offer no application protocol, which makes them HTTP/1.1: an etcd
    /// member's peer port (etcd 3.5 `client/pkg/transport/listener.go`) offers only `h2`,
    /// refuses a client offering `http/1.1` only, and routes HTTP/2 to its gRPC server;
    /// its peer protocol is HTTP/1.1.
    pub fn with_http1(mut self) -> Dialer {
        self.http1 = true;
        self
    }

    /// Opens a connection to the server `uri` names.
    pub async fn connect(&self, uri: &http::Uri) -> io::Result<ClientConn> {
        let host = uri.host().unwrap_or("localhost").to_string();
        let tls = self.always_tls || uri.scheme_str() == Some("https");
        let plain = match &self.unix_path {
            Some(p) => Plain::Unix(UnixStream::connect(p).await?),
            None => {
                let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
                Plain::Tcp(self.tcp(&host, port).await?)
            }
        };
        if !tls {
            return Ok(ClientConn::Plain(plain));
        }
        let Some(client) = &self.tls else {
            return Err(io::Error::other(format!(
                "{uri}: TLS is asked for but no TLS configuration was given"
            )));
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(bare.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
        let mut config = client.config();
        if self.http1 {
            let mut http1 = (*config).clone();
            http1.alpn_protocols = Vec::new();
            config = Arc::new(http1);
        }
        let connector = tokio_rustls::TlsConnector::from(config);
        let s = connector.connect(name, plain).await?;
        Ok(ClientConn::Tls(Box::new(s)))
    }

    async fn tcp(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"));
        for addr in
            tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port))
                .await?
        {
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            if let Some(ip) = self.source_ip {
                socket.bind((ip, 0).into())?;
            }
            match socket.connect(addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

impl tower_service::Service<http::Uri> for Dialer {
    type Response = TokioIo<CoalescedWrites<ClientConn>>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let d = self.clone();
        Box::pin(async move {
            d.connect(&uri)
                .await
                .map(|c| TokioIo::new(CoalescedWrites::new(c)))
        })
    }
}
