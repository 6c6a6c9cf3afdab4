//! The accepting end of a direct link: the upgrade on the peer port, then the raft
//! thread reads a plain link itself ([`super::inlet`]), and a thread per TLS link reads
//! frames and steps them into raft.
//!
//! Invariants:
//! - A link is accepted only from a sender the gRPC peer stream would admit
//!   ([`PeerService::admit_headers`]); a refusal answers with its code in
//!   [`crate::peer::REFUSAL_KEY`], and nothing reads the connection.
//! - One link per sender: a new link from a member shuts the one before it (the sender
//!   dialed again because its side went down).
//! - When the member stops, every link is shut and its reader ends; a reader holds
//!   the service only weakly, so a link left open by a peer never keeps a stopped
//!   member's state alive.

use std::collections::HashMap;
use std::io::{BufReader, Cursor, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use hyper_util::rt::TokioIo;
use oxcd_transport::listen::{Conn, Plain};
use tokio::sync::watch;

use super::frame::{Frame, FrameReader};
use super::inlet::{LinkHooks, LinkInlet};
use super::{KEEPALIVE_INTERVAL, SILENCE_LIMIT, UPGRADE_PATH, UPGRADE_PROTOCOL};
use crate::peer::service::PeerService;
use crate::peer::traffic::PeerCounts;
use crate::peer::{REFUSAL_KEY, Refusal};

/// How much a link's reader asks the socket for at once.
const READ_BUFFER: usize = 64 << 10;

/// The links accepted, by sender.
#[derive(Default)]
struct Inbound {
    links: Mutex<InboundLinks>,
}

#[derive(Default)]
struct InboundLinks {
    by_sender: HashMap<u64, (u64, TcpStream)>,
    next_token: u64,
    stopped: bool,
}

impl Inbound {
    fn lock(&self) -> MutexGuard<'_, InboundLinks> {
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `socket` from `from`, shutting the link it replaces; None once the
    /// member stops.
    fn register(&self, from: u64, socket: &TcpStream) -> Option<u64> {
        let copy = socket.try_clone().ok()?;
        let mut links = self.lock();
        if links.stopped {
            return None;
        }
        links.next_token += 1;
        let token = links.next_token;
        if let Some((_, old)) = links.by_sender.insert(from, (token, copy)) {
            let _ = old.shutdown(Shutdown::Both);
        }
        Some(token)
    }

    fn unregister(&self, from: u64, token: u64) {
        let mut links = self.lock();
        if links.by_sender.get(&from).is_some_and(|(t, _)| *t == token) {
            links.by_sender.remove(&from);
        }
    }

    fn shut_all(&self) {
        let mut links = self.lock();
        links.stopped = true;
        for (_, (_, socket)) in links.by_sender.drain() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// The route accepting direct links for `service`, shutting them all once `stop`
/// turns true.
pub fn routes(service: Arc<PeerService>, mut stop: watch::Receiver<bool>) -> axum::Router {
    let inbound = Arc::new(Inbound::default());
    let on_stop = inbound.clone();
    tokio::spawn(async move {
        let _ = stop.wait_for(|s| *s).await;
        on_stop.shut_all();
    });
    axum::Router::new()
        .route(UPGRADE_PATH, axum::routing::get(accept))
        .with_state((Arc::downgrade(&service), inbound))
}

type Shared = (Weak<PeerService>, Arc<Inbound>);

async fn accept(State((service, inbound)): State<Shared>, mut req: Request) -> Response {
    let asks_for_link = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case(UPGRADE_PROTOCOL));
    if !asks_for_link {
        return (
            StatusCode::BAD_REQUEST,
            "expected an upgrade to a raft link",
        )
            .into_response();
    }
    let Some(peer_service) = service.upgrade() else {
        return refused(Refusal::Etcd(oxcd_api::errors::EtcdError::Stopped));
    };
    let from = match peer_service.admit_headers(req.headers()) {
        Ok(from) => from,
        Err(refusal) => return refused(refusal),
    };
    drop(peer_service);
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return (StatusCode::BAD_REQUEST, "the connection cannot be upgraded").into_response();
    };
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(from = %format!("{from:x}"), "a direct link's upgrade failed: {e}");
                return;
            }
        };
        let parts = match hyper_util::server::conn::auto::upgrade::downcast::<TokioIo<Conn>>(
            upgraded,
        ) {
            Ok(parts) => parts,
            Err(_) => {
                tracing::warn!(from = %format!("{from:x}"), "a direct link on a connection of an unknown kind: closed");
                return;
            }
        };
        let (tcp, tls) = match parts.io.into_inner() {
            Conn::Plain(Plain::Tcp(tcp)) => (tcp, None),
            Conn::Tls(tls) => match (*tls).into_inner() {
                (Plain::Tcp(tcp), session) => (tcp, Some(session)),
                (Plain::Unix(_), _) => {
                    tracing::warn!(from = %format!("{from:x}"), "a direct link over a unix socket is not offered: closed");
                    return;
                }
            },
            Conn::Plain(Plain::Unix(_)) => {
                tracing::warn!(from = %format!("{from:x}"), "a direct link over a unix socket is not offered: closed");
                return;
            }
        };
        let plain = tls.is_none();
        let socket = match tcp.into_std().and_then(|s| {
            // A plain link is read by the raft thread without blocking; a TLS link by a
            // thread of its own, blocking with a timeout.
            s.set_nonblocking(plain)?;
            s.set_read_timeout(Some(SILENCE_LIMIT))?;
            s.set_write_timeout(Some(SILENCE_LIMIT))?;
            super::sender::keep_alive(&s)?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(from = %format!("{from:x}"), "a direct link could not be taken over: {e}");
                return;
            }
        };
        let Some(token) = inbound.register(from, &socket) else {
            let _ = socket.shutdown(Shutdown::Both);
            return;
        };
        let leftover = parts.read_buf.to_vec();
        let tls = match tls {
            Some(session) => session,
            None => {
                hand_to_raft(&service, from, token, inbound, socket, leftover);
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name(format!("peer-read-{from:x}"))
            .spawn({
                let inbound = inbound.clone();
                move || {
                    read_tls(&service, from, leftover, tls, &socket);
                    inbound.unregister(from, token);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(from = %format!("{from:x}"), "no thread for a direct link: {e}");
            inbound.unregister(from, token);
        }
    });
    let mut answer = StatusCode::SWITCHING_PROTOCOLS.into_response();
    answer
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    answer
        .headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static(UPGRADE_PROTOCOL));
    answer
}

/// The answer to a link refused for `refusal`: its code and etcd's text.
fn refused(refusal: Refusal) -> Response {
    let status = refusal.status();
    let mut answer = (StatusCode::PRECONDITION_FAILED, status.message().to_owned()).into_response();
    answer
        .headers_mut()
        .insert(REFUSAL_KEY, HeaderValue::from_static(refusal.code()));
    answer
}

/// Hands the plain link from `from` to the raft thread, which reads it from now on
/// ([`super::inlet`]); the link is unregistered when the raft thread drops it.
fn hand_to_raft(
    service: &Weak<PeerService>,
    from: u64,
    token: u64,
    inbound: Arc<Inbound>,
    socket: TcpStream,
    leftover: Vec<u8>,
) {
    let registered = Registered {
        service: service.clone(),
        inbound,
        from,
        token,
    };
    let Some(peer_service) = service.upgrade() else {
        return;
    };
    let counts = peer_service.counts_of(from);
    match LinkInlet::new(from, socket, leftover, counts, registered) {
        Ok(inlet) => {
            if peer_service.add_inlet(Box::new(inlet)).is_err() {
                tracing::debug!(from = %format!("{from:x}"), "a direct link arrived as raft stopped: closed");
            }
        }
        Err(e) => {
            tracing::warn!(from = %format!("{from:x}"), "a direct link could not be made non-blocking: {e}");
        }
    }
}

/// A link in the registry, read by the raft thread; unregistered when dropped.
struct Registered {
    service: Weak<PeerService>,
    inbound: Arc<Inbound>,
    from: u64,
    token: u64,
}

impl LinkHooks for Registered {
    fn heard_from(&self, from: u64) -> bool {
        match self.service.upgrade() {
            Some(service) => {
                service.heard_from(from);
                true
            }
            None => false,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        // With the inlet, or without one (it could not be made, the member stops).
        self.inbound.unregister(self.from, self.token);
    }
}

/// Reads `from`'s frames from a TLS link (after `leftover`, decrypted with the
/// upgrade); see [`read_link`].
fn read_tls(
    service: &Weak<PeerService>,
    from: u64,
    leftover: Vec<u8>,
    session: rustls::ServerConnection,
    socket: &TcpStream,
) {
    let input = Cursor::new(leftover).chain(rustls::StreamOwned::new(session, socket));
    read_link(service, from, input, |input| {
        // Bounded by the socket's write timeout; a failure shows as the next read's.
        let stream = input.get_mut().1;
        let _ = stream.write_all(&[0]).and_then(|()| stream.flush());
    });
}

/// Reads `from`'s frames from `input` into raft until the link ends, the stream breaks,
/// the sender falls silent for [`SILENCE_LIMIT`] (the socket's read timeout) or the
/// member stops; calls `beacon` at most every [`KEEPALIVE_INTERVAL`] as frames come.
fn read_link<R: Read>(
    service: &Weak<PeerService>,
    from: u64,
    input: R,
    mut beacon: impl FnMut(&mut R),
) {
    let Some(counts) = service.upgrade().map(|s| s.counts_of(from)) else {
        return;
    };
    let mut frames = FrameReader::new(BufReader::with_capacity(READ_BUFFER, input));
    let mut last_beacon: Option<Instant> = None;
    loop {
        match frames.read_frame() {
            Ok(Some(frame)) => {
                if let Frame::Message(m, size) = frame {
                    PeerCounts::add(&counts.received_bytes, size as u64);
                    let Some(service) = service.upgrade() else {
                        return;
                    };
                    if service.take_message(m).is_err() {
                        return;
                    }
                }
                if last_beacon.is_none_or(|at| at.elapsed() >= KEEPALIVE_INTERVAL) {
                    beacon(frames.input_mut().get_mut());
                    last_beacon = Some(Instant::now());
                }
            }
            Ok(None) => {
                tracing::debug!(from = %format!("{from:x}"), "a direct link closed");
                return;
            }
            Err(e) => {
                tracing::debug!(from = %format!("{from:x}"), "a direct link ended: {e}");
                return;
            }
        }
    }
}
