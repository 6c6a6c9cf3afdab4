//! The member's sockets as axum serves them: every listen URL bound (plain or TLS,
//! with the system's largest accept backlog, see `oxcd_transport::listen`), client
//! connections counted ([`crate::edge::metrics::client_bytes`]), passed through the
//! `:authority` fix (`oxcd_transport::go_authority`) and, with
//! `--client-cert-auth`, labelled with their certificate's common name ([`ClientAddr`]).

use std::path::PathBuf;
use std::sync::Arc;

use oxcd_transport::coalesce::CoalescedWrites;
use oxcd_transport::listen::{self, Addr, Conn, ConnCheck, Listener};
use oxcd_transport::tls::ServerTls;

use crate::edge::metrics::client_bytes::{ClientBytes, Counting};
use oxcd_transport::go_authority::AuthorityFix;

/// Why a listen URL could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The TLS settings for the listen URLs were refused.
    #[error(transparent)]
    Tls(#[from] crate::start::security::SecurityError),
    /// The URL does not parse.
    #[error("{0}")]
    Url(String),
    /// The TCP address could not be bound (in use, not local).
    #[error("listen tcp {addr}: bind: {source}")]
    BindTcp {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The unix socket could not be bound.
    #[error("listen unix {}: bind: {source}", path.display())]
    BindUnix {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The same URL in `--listen-client-urls` and `--listen-client-http-urls` (etcd's
    /// text, with its flag names as it prints them).
    #[error(
        "cannot bind both --client-listen-urls and --client-listen-http-urls on the same url {0}"
    )]
    ClientAndHttpUrl(String),
    /// An `https`/`unixs` URL without TLS settings.
    #[error("{0}: TLS URL without TLS settings")]
    NoTls(String),
    /// The bound socket could not be served.
    #[error("{url}: {source}")]
    Serve {
        /// The URL.
        url: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Binds `url` for the `side` ("client", "peer", "metrics") endpoint; `tls` serves
/// `https`/`unixs` URLs (checked to be present at start).
pub fn bind(
    url: &str,
    side: &'static str,
    tls: Option<&Arc<ServerTls>>,
    check: Option<ConnCheck>,
) -> Result<Listener, ListenError> {
    let parsed = listen::parse_listen_url(url).map_err(ListenError::Url)?;
    let socket = listen::bind(&parsed.bind).map_err(|source| match &parsed.bind {
        listen::Bind::Tcp(a) => ListenError::BindTcp { addr: *a, source },
        listen::Bind::Unix(p) => ListenError::BindUnix {
            path: p.clone(),
            source,
        },
    })?;
    let listener = match (parsed.tls, tls) {
        (false, _) => Listener::plain(socket),
        (true, Some(tls)) => Listener::tls(socket, tls.clone(), check, side),
        (true, None) => return Err(ListenError::NoTls(url.to_string())),
    };
    listener.map_err(|source| ListenError::Serve {
        url: url.to_string(),
        source,
    })
}

/// A client listener: connections go through [`AuthorityFix`], their writes are
/// coalesced ([`CoalescedWrites`]).
pub struct ClientListener {
    /// The socket.
    pub listener: Listener,
    /// Whether a client certificate's CN names the caller (`--client-cert-auth`: the
    /// TLS layer has verified every client certificate against the trusted CA).
    pub cert_names_user: bool,
    /// Where the bytes of every connection are counted.
    pub bytes: Arc<ClientBytes>,
}

/// Where a client connection comes from, and the user its verified certificate names
/// (etcd's CN auth: the caller of requests that carry no token).
#[derive(Debug, Clone)]
pub struct ClientAddr {
    /// The remote address.
    pub addr: Addr,
    /// The leaf certificate's common name, when [`ClientListener::cert_names_user`].
    pub common_name: Option<Arc<str>>,
}

impl axum::serve::Listener for ClientListener {
    type Io = CoalescedWrites<AuthorityFix<Counting<Conn>>>;
    type Addr = ClientAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (c, addr) = self.listener.accept().await;
        let common_name = if self.cert_names_user {
            c.peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(|leaf| oxcd_transport::tls::common_name(leaf.as_ref()))
                .map(Arc::from)
        } else {
            None
        };
        let io = CoalescedWrites::new(AuthorityFix::new(Counting::new(c, self.bytes.clone())));
        (io, ClientAddr { addr, common_name })
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(ClientAddr {
            addr: self.listener.local_addr().clone(),
            common_name: None,
        })
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, ClientListener>>
    for ClientAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, ClientListener>) -> ClientAddr {
        stream.remote_addr().clone()
    }
}

/// A peer or metrics listener: connections as they are.
pub struct PlainListener(pub Listener);

impl axum::serve::Listener for PlainListener {
    type Io = Conn;
    type Addr = Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        self.0.accept().await
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.0.local_addr().clone())
    }
}
