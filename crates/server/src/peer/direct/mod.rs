//! Direct raft links between oxcd members: raft messages as length-prefixed frames on
//! a plain TCP connection of their own, written by the raft thread itself and read by
//! the raft thread at the other end too (a TLS link: by a thread of its own that steps
//! them into raft).
//!
//! Why: a put to a three-member cluster crosses the peer network twice on its critical
//! path (the leader's append, a follower's answer). Over a gRPC stream each crossing
//! was four hand-offs between threads and tasks (the sending task, the HTTP/2
//! connection's task, the receiving connection's task, the stream's handler) besides
//! the raft threads at both ends, each a sleep and a wake-up on a shared machine, and
//! HTTP/2 framing for every message. A direct link has none: the raft thread's `send`
//! writes into the socket, and the raft thread at the other end wakes on the socket
//! ([`oxcd_raft::node::inlets`]) and steps the message.
//!
//! The link is opened on the peer port by an HTTP/1.1 upgrade ([`UPGRADE_PATH`],
//! [`UPGRADE_PROTOCOL`]) carrying the headers of a gRPC peer stream (cluster id, sender,
//! versions), checked the same way ([`crate::peer::service::PeerService::admit_headers`]).
//! A refusal answers with the [`super::REFUSAL_KEY`] header, which the dialer reads as
//! a [`super::Refusal`]. A peer that does not know the path (an etcd member, an oxcd
//! from before direct links) answers something else, and the sender keeps the gRPC
//! stream for it ([`super::transport`]).
//!
//! Peers on `http://` and `https://` URLs get direct links; unix sockets keep the gRPC
//! stream. Over TLS (the peer TLS settings, no ALPN protocol) the sender encrypts each
//! batch into its session under the link's lock, so the raft thread still writes the
//! records itself; the reader decrypts with the session the listener's handshake made.
//!
//! Invariants:
//! - Frames are whole on the wire: a batch is queued or dropped as a unit, never cut.
//! - Messages to one peer keep their order: while bytes wait for the writer thread,
//!   later ones queue behind them.
//! - The raft thread never blocks on the network: it writes with `MSG_DONTWAIT` and
//!   leaves what the socket did not take to the link's writer thread.
//! - The connection carries messages one way, from the dialer to the member that
//!   accepted it (each member dials each peer it sends to). The only bytes the other
//!   way are the reader's liveness beacons.
//!
//! Liveness, as the HTTP/2 pings of a gRPC stream gave it: the sender writes a
//! keepalive frame every [`KEEPALIVE_INTERVAL`] and the reader answers at most that
//! often with one beacon byte. A reader that hears nothing for [`SILENCE_LIMIT`], or a
//! sender that gets no beacon for as long, drops the link, and the sender dials again:
//! a connection that stalls without closing (a silent drop in the network, a frozen
//! proxy) is replaced within seconds instead of holding the peer's traffic.

pub mod frame;
pub mod handshake;
pub mod inlet;
pub mod receiver;
pub mod sender;

pub use sender::DirectLink;

/// How often a sender writes a keepalive and a reader a beacon.
pub const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
/// How long either end of a link waits to hear from the other before dropping it
/// (etcd's peer connections time out after 5 s).
pub const SILENCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(4);

/// The path a direct link is asked for on the peer port.
pub const UPGRADE_PATH: &str = "/oxcd/raft-link";
/// The protocol named in the upgrade request and the answer.
pub const UPGRADE_PROTOCOL: &str = "oxcd-raft-link/1";
