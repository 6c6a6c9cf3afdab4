//! The sending end of a direct link: the connection the raft thread writes frames on,
//! and the writer thread that takes over whatever the socket could not take at once.
//!
//! The raft thread's [`DirectLink::send`] writes with `MSG_DONTWAIT` when nothing waits
//! before it, which is nearly always: one system call per peer per raft turn, no
//! hand-off. A batch the socket takes only in part (a busy peer, a large append) goes
//! to the link's backlog, and the writer thread writes the backlog out, waiting for
//! room at most [`WRITE_TIMEOUT`] at a time (the socket is non-blocking for all). A write that fails or times out takes the link
//! down; its owner ([`crate::peer::transport`]) hears of it ([`DirectLink::wait_down`])
//! and dials again.
//!
//! Invariants:
//! - While the writer holds bytes or the backlog is not empty, the raft thread only
//!   appends to the backlog: bytes reach the socket in the order they were sent.
//! - The backlog never exceeds [`MAX_BACKLOG`] (the writer's chunk in flight, taken
//!   from it, is at most as much again); a batch that would pass it is dropped whole
//!   ([`Sent::Full`]), and raft is told the peer is unreachable, as a full queue of the
//!   gRPC stream did.
//! - A link taken down is never written again: each connection has its generation,
//!   and a writer whose generation has passed stops.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::SendFlags;

use crate::peer::traffic::PeerCounts;

/// Bytes waiting for the writer thread before further batches are dropped.
pub const MAX_BACKLOG: usize = 64 << 20;
/// How long one blocking write may wait for the peer to read (etcd's peer connections
/// time out writes after 5 s).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// What became of a batch of frames handed to a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Written, or queued behind earlier bytes.
    Taken,
    /// The link is down: nothing was sent.
    Down,
    /// The backlog is full: the batch was dropped.
    Full,
}

/// One peer's direct link, shared by the raft thread (which sends), the link's writer
/// thread and the task that dials it.
pub struct DirectLink {
    peer: u64,
    state: Mutex<LinkState>,
    writer_wake: Condvar,
    down: tokio::sync::Notify,
    counts: Arc<PeerCounts>,
}

#[derive(Default)]
struct LinkState {
    socket: Option<Arc<TcpStream>>,
    /// The TLS session over `socket`, for a `https://` peer: frames are encrypted into
    /// it under the lock, in the order they are sent, and the backlog holds what goes
    /// on the wire.
    tls: Option<Box<rustls::ClientConnection>>,
    backlog: Vec<u8>,
    /// The writer thread holds bytes taken from the backlog.
    writing: bool,
    generation: u64,
    closed: bool,
}

impl DirectLink {
    /// A link to `peer`, down until a connection is installed; its dropped batches are
    /// counted in `counts`.
    pub fn new(peer: u64, counts: Arc<PeerCounts>) -> Arc<DirectLink> {
        Arc::new(DirectLink {
            peer,
            state: Mutex::default(),
            writer_wake: Condvar::new(),
            down: tokio::sync::Notify::new(),
            counts,
        })
    }

    fn lock(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a connection is installed.
    pub fn is_up(&self) -> bool {
        self.lock().socket.is_some()
    }

    /// Sends a batch of whole frames (from the raft thread): written at once when the
    /// socket takes it, queued for the writer otherwise.
    pub fn send(&self, frames: &[u8]) -> Sent {
        let sent = self.write_or_queue(frames);
        if sent == Sent::Taken {
            PeerCounts::add(&self.counts.sent_bytes, frames.len() as u64);
        }
        sent
    }

    fn write_or_queue(&self, frames: &[u8]) -> Sent {
        let mut st = self.lock();
        let Some(socket) = st.socket.clone() else {
            return Sent::Down;
        };
        if !st.backlog.is_empty() && st.backlog.len() + frames.len() > MAX_BACKLOG {
            PeerCounts::add(&self.counts.sent_failures, 1);
            return Sent::Full;
        }
        let encrypted;
        let frames = match st.tls.as_mut() {
            None => frames,
            Some(session) => match encrypt(session, frames) {
                Ok(bytes) => {
                    encrypted = bytes;
                    &encrypted[..]
                }
                Err(e) => {
                    tracing::warn!(peer = %format!("{:x}", self.peer), "direct link: TLS failed: {e}");
                    self.take_down(&mut st);
                    return Sent::Down;
                }
            },
        };
        if st.backlog.is_empty() && !st.writing {
            let mut written = 0;
            while written < frames.len() {
                match rustix::net::send(
                    &*socket,
                    &frames[written..],
                    SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
                ) {
                    Ok(n) => written += n,
                    Err(Errno::INTR) => continue,
                    Err(Errno::AGAIN) => break,
                    Err(e) => {
                        tracing::debug!(peer = %format!("{:x}", self.peer), "direct link write failed: {e}");
                        self.take_down(&mut st);
                        return Sent::Down;
                    }
                }
            }
            if written == frames.len() {
                return Sent::Taken;
            }
            st.backlog.extend_from_slice(&frames[written..]);
        } else {
            st.backlog.extend_from_slice(frames);
        }
        drop(st);
        self.writer_wake.notify_one();
        Sent::Taken
    }

    /// Installs a connection opened by [`super::handshake::open`] (made non-blocking
    /// here), with its TLS session if any, and starts its writer thread; returns the
    /// connection's generation.
    pub fn install(
        self: &Arc<Self>,
        socket: TcpStream,
        tls: Option<rustls::ClientConnection>,
    ) -> io::Result<u64> {
        socket.set_nonblocking(true)?;
        keep_alive(&socket)?;
        let socket = Arc::new(socket);
        let generation = {
            let mut st = self.lock();
            if st.closed {
                let _ = socket.shutdown(Shutdown::Both);
                return Err(io::Error::other("the link was closed"));
            }
            self.take_down(&mut st);
            st.socket = Some(socket.clone());
            st.tls = tls.map(|mut session| {
                // The backlog bounds what waits; the session holds nothing between sends.
                session.set_buffer_limit(None);
                Box::new(session)
            });
            st.generation
        };
        let link = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("peer-link-{:x}", self.peer))
            .spawn(move || link.write_backlog(&socket, generation));
        if let Err(e) = spawned {
            let mut st = self.lock();
            self.take_down(&mut st);
            return Err(e);
        }
        Ok(generation)
    }

    /// Waits until the connection of `generation` is down.
    pub async fn wait_down(&self, generation: u64) {
        loop {
            let notified = self.down.notified();
            {
                let st = self.lock();
                if st.socket.is_none() || st.generation != generation {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Takes the connection of `generation` down (its peer closed it or fell silent),
    /// if it is still the link's.
    pub fn drop_connection(&self, generation: u64) {
        let mut st = self.lock();
        if st.generation == generation && st.socket.is_some() {
            tracing::debug!(peer = %format!("{:x}", self.peer), "a direct link dropped");
            self.take_down(&mut st);
        }
    }

    /// Takes the link down for good (the peer left, or the member stops).
    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        self.take_down(&mut st);
    }

    /// Drops the connection and whatever waits to be written on it.
    fn take_down(&self, st: &mut LinkState) {
        if let Some(socket) = st.socket.take() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        st.tls = None;
        if !st.backlog.is_empty() {
            PeerCounts::add(&self.counts.sent_failures, 1);
        }
        st.backlog = Vec::new();
        st.generation += 1;
        self.writer_wake.notify_all();
        self.down.notify_waiters();
    }

    /// The writer thread of connection `generation`: writes the backlog out until the
    /// connection is taken down or fails.
    fn write_backlog(&self, socket: &TcpStream, generation: u64) {
        loop {
            let bytes = {
                let mut st = self.lock();
                loop {
                    if st.generation != generation {
                        return;
                    }
                    if !st.backlog.is_empty() {
                        st.writing = true;
                        break std::mem::take(&mut st.backlog);
                    }
                    st = self.writer_wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let written = write_all(socket, &bytes);
            let mut st = self.lock();
            st.writing = false;
            if st.generation != generation {
                return;
            }
            if let Err(e) = written {
                tracing::warn!(peer = %format!("{:x}", self.peer), "direct link to the peer failed: {e}");
                self.take_down(&mut st);
                return;
            }
            if st.backlog.capacity() == 0 {
                // Give the allocation back to the next batch that queues.
                let mut spare = bytes;
                spare.clear();
                if spare.capacity() <= 1 << 20 {
                    st.backlog = spare;
                }
            }
        }
    }
}

/// `frames` encrypted by `session`: the TLS records to write, in order.
fn encrypt(session: &mut rustls::ClientConnection, frames: &[u8]) -> io::Result<Vec<u8>> {
    session.writer().write_all(frames)?;
    let mut records = Vec::with_capacity(frames.len() + 64);
    while session.wants_write() {
        session.write_tls(&mut records)?;
    }
    Ok(records)
}

/// Writes all of `bytes` to the non-blocking `socket`, waiting for room at most
/// [`WRITE_TIMEOUT`] at a time.
fn write_all(mut socket: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    let mut written = 0;
    while written < bytes.len() {
        match socket.write(&bytes[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let timeout = rustix::event::Timespec {
                    tv_sec: WRITE_TIMEOUT.as_secs() as _,
                    tv_nsec: 0,
                };
                let mut fds = [rustix::event::PollFd::new(
                    socket,
                    rustix::event::PollFlags::OUT,
                )];
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(0) => return Err(io::ErrorKind::TimedOut.into()),
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// TCP keepalives on a link, so a peer that vanished without closing (a host that lost
/// power, a silent drop in the network) is noticed by the kernel.
pub(crate) fn keep_alive(socket: &TcpStream) -> io::Result<()> {
    let params = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(1))
        .with_retries(3);
    socket2::SockRef::from(socket).set_tcp_keepalive(&params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::direct::frame::{self, Frame, FrameReader};
    use oxcd_raft::{Entry, Message, MessageType};
    use std::net::TcpListener;

    fn append(index: u64, bytes: usize) -> Vec<u8> {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 1;
        m.to = 2;
        m.index = index;
        let e = Entry {
            data: vec![index as u8; bytes].into(),
            ..Default::default()
        };
        m.entries = vec![e].into();
        let mut batch = Vec::new();
        frame::append(&mut batch, &m);
        batch
    }

    /// A peer that does not read: batches pile up in the socket, then in the backlog,
    /// then are dropped whole; what the peer reads at last is every batch taken, in
    /// order, and whole.
    #[test]
    fn a_slow_peer_gets_every_batch_taken_in_order_and_none_cut() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let dialed = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (accepted, _) = listener.accept().expect("accept");
        let link = DirectLink::new(2, Arc::default());
        link.install(dialed, None).expect("install");
        let mut taken = 0u64;
        let mut full = false;
        for index in 0..200u64 {
            match link.send(&append(index, 1 << 20)) {
                Sent::Taken if !full => taken += 1,
                Sent::Full => full = true,
                other => panic!("batch {index}: {other:?} after {taken} taken (full: {full})"),
            }
        }
        assert!(full, "64 MiB of backlog never filled");
        assert!(taken >= 64, "only {taken} batches taken");
        let mut reader = FrameReader::new(std::io::BufReader::new(accepted));
        for index in 0..taken {
            match reader.read_frame() {
                Ok(Some(Frame::Message(m, _))) => {
                    assert_eq!(m.index, index);
                    assert_eq!(m.entries[0].data.len(), 1 << 20);
                }
                other => panic!("frame {index}: {other:?}"),
            }
        }
        link.close();
        assert!(
            matches!(reader.read_frame(), Ok(None)),
            "nothing after the last batch taken"
        );
        assert_eq!(link.send(&append(0, 10)), Sent::Down);
    }
}
