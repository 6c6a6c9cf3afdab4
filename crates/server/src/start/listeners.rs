//! The member's sockets as axum serves them: every listen URL bound (plain or TLS,
//! with the system's largest accept backlog, see `oxcd_transport::listen`), client
//! connections counted ([`crate::edge::metrics::client_bytes`]), passed through the
//! `:authority` fix ([`crate::edge::authority`]) and, with
//! `--client-cert-auth`, labelled with their certificate's common name ([`ClientAddr`]).

use std::sync::Arc;

use oxcd_transport::coalesce::CoalescedWrites;
use oxcd_transport::listen::{self, Addr, Conn, ConnCheck, Listener};
use oxcd_transport::tls::ServerTls;

use crate::edge::authority::AuthorityFix;
use crate::edge::metrics::client_bytes::{ClientBytes, Counting};

/// Binds `url` for the `side` ("client", "peer", "metrics") endpoint; `tls` serves
/// `https`/`unixs` URLs (checked to be present at start).
pub fn bind(
    url: &str,
    side: &'static str,
    tls: Option<&Arc<ServerTls>>,
    check: Option<ConnCheck>,
) -> Result<Listener, String> {
    let parsed = listen::parse_listen_url(url)?;
    let socket = listen::bind(&parsed.bind).map_err(|e| match &parsed.bind {
        listen::Bind::Tcp(a) => format!("listen tcp {a}: bind: {e}"),
        listen::Bind::Unix(p) => format!("listen unix {}: bind: {e}", p.display()),
    })?;
    let listener = match (parsed.tls, tls) {
        (false, _) => Listener::plain(socket),
        (true, Some(tls)) => Listener::tls(socket, tls.clone(), check, side),
        (true, None) => return Err(format!("{url}: TLS URL without TLS settings")),
    };
    listener.map_err(|e| format!("{url}: {e}"))
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
