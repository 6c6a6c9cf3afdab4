//! A plain direct link as the raft thread reads it ([`oxcd_raft::node::Inlet`]): the
//! bytes the socket holds are taken without blocking, cut into frames, and the
//! messages stepped by the raft thread in the same turn, with no reader thread between.
//!
//! Invariants:
//! - Frames are taken whole: a partial frame waits in the buffer for the rest; a length
//!   over [`MAX_FRAME`] or a message that does not decode ends the link (it never
//!   skips ahead).
//! - One `recv` per readable link per turn when the link is quiet: a read that does not
//!   fill the room it was offered took everything queued, and the link is left until the
//!   next wait reports it readable again (level-triggered), not asked again for EAGAIN.
//! - Liveness as the reader thread kept it: a beacon byte back to the sender at most
//!   every [`KEEPALIVE_INTERVAL`] while frames come, and the link is dropped after
//!   [`SILENCE_LIMIT`] without a byte.
//! - Dropping the inlet shuts the socket and drops its [`LinkHooks`] (the registry of
//!   links forgets it), as the reader thread did when it ended.
//! - A link the raft thread did not read for a while (a long fsync, an install) is
//!   not taken for silent while bytes wait in its socket. While the raft thread does
//!   not turn, no beacon goes back: after [`SILENCE_LIMIT`] of that the sender drops
//!   the link and dials again, where a reader thread of its own kept it up.

use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use oxcd_raft::Message;
use oxcd_raft::node::Inlet;
use oxcd_raft::persist::decode_message;
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};

use super::frame::MAX_FRAME;
use super::{KEEPALIVE_INTERVAL, SILENCE_LIMIT};
use crate::peer::traffic::PeerCounts;

/// Room asked of the buffer before each read.
const READ_ROOM: usize = 64 << 10;
/// A buffer larger than this, once empty, is let go (a large append passed).
const KEEP_CAPACITY: usize = 1 << 20;

/// Inlets of this process not yet dropped (every member in it).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many plain links the raft threads of this process read now: what is left of a
/// stopped member's links shows here (a reader thread of a TLS link shows by its name).
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// What the member does as the link is read; dropped with the inlet (where the
/// member forgets the link).
pub trait LinkHooks: Send + 'static {
    /// Messages from `from` arrived. False: the member is stopping; the link ends.
    fn heard_from(&self, from: u64) -> bool;
}

/// A plain link from `from`, read by the raft thread.
pub struct LinkInlet<H: LinkHooks> {
    from: u64,
    socket: TcpStream,
    counts: Arc<PeerCounts>,
    /// Bytes read and not yet taken as frames.
    buf: Vec<u8>,
    last_heard: Instant,
    last_beacon: Option<Instant>,
    hooks: H,
}

impl<H: LinkHooks> LinkInlet<H> {
    /// Reads `socket` (made non-blocking here) from `from`, after `leftover` (bytes read
    /// with the upgrade).
    pub fn new(
        from: u64,
        socket: TcpStream,
        leftover: Vec<u8>,
        counts: Arc<PeerCounts>,
        hooks: H,
    ) -> std::io::Result<LinkInlet<H>> {
        socket.set_nonblocking(true)?;
        LIVE.fetch_add(1, Ordering::Relaxed);
        Ok(LinkInlet {
            from,
            socket,
            counts,
            buf: leftover,
            last_heard: Instant::now(),
            last_beacon: None,
            hooks,
        })
    }

    /// Takes the whole frames in the buffer; false: the stream is broken.
    fn take_frames(&mut self, out: &mut Vec<Message>) -> bool {
        let mut at = 0;
        let mut taken = 0usize;
        let mut ok = true;
        while self.buf.len() - at >= 4 {
            let mut len = [0u8; 4];
            len.copy_from_slice(&self.buf[at..at + 4]);
            let len = u32::from_be_bytes(len) as usize;
            if len > MAX_FRAME {
                tracing::debug!(from = %format!("{:x}", self.from), "a direct link sent a frame of {len} bytes: dropped");
                ok = false;
                break;
            }
            if self.buf.len() - at - 4 < len {
                // The rest of the frame is still on its way.
                self.buf.reserve(len + 4 - (self.buf.len() - at));
                break;
            }
            if len > 0 {
                match decode_message(&self.buf[at + 4..at + 4 + len]) {
                    Ok(m) => {
                        out.push(m);
                        taken += 1;
                    }
                    Err(e) => {
                        tracing::debug!(from = %format!("{:x}", self.from), "a direct link's message did not decode: {e}");
                        ok = false;
                        break;
                    }
                }
                PeerCounts::add(&self.counts.received_bytes, (len + 4) as u64);
            }
            at += 4 + len;
        }
        self.buf.drain(..at);
        if self.buf.is_empty() && self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
        }
        if taken > 0 && !self.hooks.heard_from(self.from) {
            ok = false;
        }
        ok
    }

    /// A beacon byte back, at most every [`KEEPALIVE_INTERVAL`] (best effort: a sender
    /// that stopped reading beacons drops the link).
    fn beacon(&mut self, now: Instant) {
        if self
            .last_beacon
            .is_none_or(|at| now.saturating_duration_since(at) >= KEEPALIVE_INTERVAL)
        {
            let _ = rustix::net::send(
                &self.socket,
                &[0],
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            );
            self.last_beacon = Some(now);
        }
    }
}

impl<H: LinkHooks> Inlet for LinkInlet<H> {
    fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    fn read(&mut self, budget: usize, out: &mut Vec<Message>) -> bool {
        let mut read = 0;
        let mut open = true;
        while read < budget {
            if self.buf.capacity() - self.buf.len() < READ_ROOM / 4 {
                self.buf.reserve(READ_ROOM);
            }
            let room = self.buf.capacity() - self.buf.len();
            match rustix::net::recv(
                &self.socket,
                rustix::buffer::spare_capacity(&mut self.buf),
                RecvFlags::DONTWAIT,
            ) {
                Ok((0, _)) => {
                    tracing::debug!(from = %format!("{:x}", self.from), "a direct link closed");
                    open = false;
                    break;
                }
                Ok((n, _)) => {
                    read += n;
                    // A read that did not fill the room took everything queued: asking
                    // again would only hear EAGAIN. What arrives later is reported by
                    // the next wait (the epoll is level-triggered).
                    if n < room {
                        break;
                    }
                }
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => {}
                Err(e) => {
                    tracing::debug!(from = %format!("{:x}", self.from), "a direct link ended: {e}");
                    open = false;
                    break;
                }
            }
        }
        if read > 0 {
            let now = Instant::now();
            self.last_heard = now;
            self.beacon(now);
        }
        // Whole frames before a close still count, as the reader thread stepped them.
        self.take_frames(out) && open
    }

    fn alive(&mut self, now: Instant) -> bool {
        let silent = now.saturating_duration_since(self.last_heard);
        if silent < SILENCE_LIMIT {
            return true;
        }
        // Bytes waiting unread are not silence: the raft thread was busy elsewhere.
        let mut byte = [0u8; 1];
        if let Ok((1, _)) = rustix::net::recv(
            &self.socket,
            &mut byte[..],
            RecvFlags::DONTWAIT | RecvFlags::PEEK,
        ) {
            return true;
        }
        tracing::debug!(from = %format!("{:x}", self.from), "a direct link fell silent: dropped");
        false
    }
}

impl<H: LinkHooks> Drop for LinkInlet<H> {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Mutex;
    use std::time::Duration;

    use oxcd_raft::MessageType;

    use crate::peer::direct::frame::{KEEPALIVE, append};

    /// What the test's hooks saw: the senders heard from, and whether they were dropped.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<(Vec<u64>, bool)>>);

    /// Hooks that write into a [`Seen`].
    struct Hooks(Seen);

    impl LinkHooks for Hooks {
        fn heard_from(&self, from: u64) -> bool {
            (self.0).0.lock().expect("seen").0.push(from);
            true
        }
    }

    impl Drop for Hooks {
        fn drop(&mut self) {
            (self.0).0.lock().expect("seen").1 = true;
        }
    }

    fn message(index: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 7;
        m.to = 1;
        m.index = index;
        m
    }

    /// A connected pair on loopback: (the sender's end, the inlet over the other).
    fn link(leftover: Vec<u8>, seen: &Seen) -> (TcpStream, LinkInlet<Hooks>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let sender = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (accepted, _) = listener.accept().expect("accept");
        let inlet = LinkInlet::new(7, accepted, leftover, Arc::default(), Hooks(seen.clone()))
            .expect("inlet");
        (sender, inlet)
    }

    /// Reads until `n` messages came (the bytes cross loopback asynchronously).
    fn read_until(inlet: &mut LinkInlet<Hooks>, n: usize) -> Vec<Message> {
        let mut out = Vec::new();
        for _ in 0..500 {
            assert!(inlet.read(READ_ROOM, &mut out), "the link ended");
            if out.len() >= n {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        out
    }

    #[test]
    fn frames_cut_anywhere_arrive_whole_and_in_order_with_a_beacon_back() {
        let seen = Seen::default();
        let mut first = Vec::new();
        append(&mut first, &message(1));
        // The upgrade read the first frame and part of the second.
        let mut rest = Vec::new();
        append(&mut rest, &message(2));
        rest.extend_from_slice(&KEEPALIVE);
        append(&mut rest, &message(3));
        let (head, tail) = rest.split_at(3);
        first.extend_from_slice(head);
        let (mut sender, mut inlet) = link(first, &seen);
        let mut out = Vec::new();
        assert!(inlet.read(READ_ROOM, &mut out));
        assert_eq!(out.iter().map(|m| m.index).collect::<Vec<_>>(), vec![1]);
        let (a, b) = tail.split_at(tail.len() - 2);
        sender.write_all(a).expect("write");
        let got = read_until(&mut inlet, 1);
        assert_eq!(got.iter().map(|m| m.index).collect::<Vec<_>>(), vec![2]);
        sender.write_all(b).expect("write");
        let got = read_until(&mut inlet, 1);
        assert_eq!(got.iter().map(|m| m.index).collect::<Vec<_>>(), vec![3]);
        assert_eq!(seen.0.lock().expect("seen").0, vec![7, 7, 7]);
        let mut beacon = [9u8; 1];
        sender.read_exact(&mut beacon).expect("a beacon");
        assert_eq!(beacon, [0]);
        drop(inlet);
        assert!(seen.0.lock().expect("seen").1, "ended on drop");
    }

    /// Whether the inlet ends within a second of reads (the bytes cross loopback
    /// asynchronously).
    fn ends(inlet: &mut LinkInlet<Hooks>) -> bool {
        let mut out = Vec::new();
        for _ in 0..500 {
            if !inlet.read(READ_ROOM, &mut out) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }

    #[test]
    fn a_close_a_bad_length_or_silence_ends_the_link() {
        let seen = Seen::default();
        let (sender, mut inlet) = link(Vec::new(), &seen);
        drop(sender);
        assert!(ends(&mut inlet), "a closed link ends");

        let (mut sender, mut inlet) = link(Vec::new(), &seen);
        sender
            .write_all(&((MAX_FRAME + 1) as u32).to_be_bytes())
            .expect("write");
        assert!(ends(&mut inlet), "a frame over the limit ends the link");

        let (mut sender, mut inlet) = link(Vec::new(), &seen);
        assert!(inlet.alive(Instant::now()));
        assert!(!inlet.alive(Instant::now() + SILENCE_LIMIT));
        // Bytes waiting unread are not silence.
        sender.write_all(&KEEPALIVE).expect("write");
        let mut waiting = false;
        for _ in 0..500 {
            if inlet.alive(Instant::now() + SILENCE_LIMIT) {
                waiting = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(waiting, "a keepalive waiting in the socket keeps the link");
    }
}
