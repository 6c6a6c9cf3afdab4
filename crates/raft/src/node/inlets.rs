//! Peer links the raft thread reads itself, and how it sleeps until a link or a command
//! has something for it.
//!
//! A message from a peer used to cross two threads: the link's reader woke, decoded
//! it and queued it for raft, and the raft thread woke to step it. For a single
//! client's put that is two of those on the critical path (the leader's append on the
//! follower, the follower's answer on the leader), each a sleep and a wake-up on a
//! machine the members share. An [`Inlet`] is a link handed to the raft thread
//! ([`super::RaftHandle::add_inlet`]): the thread waits in `epoll_wait` on the inlets'
//! sockets and on an eventfd that command senders write when the thread sleeps, reads
//! what arrived without blocking and steps it in the same turn.
//!
//! Invariants:
//! - A command is never left in the channel while the thread sleeps: the thread marks
//!   itself parked, looks at the channel, and only then waits; a sender queues its
//!   command, then wakes the thread if it is parked (both sides order their two steps
//!   with sequentially consistent atomics).
//! - An inlet is read when its socket is readable (and once when it arrives), at most
//!   [`READ_BUDGET`] bytes a turn, so one busy link cannot starve commands and ticks;
//!   the epoll is level-triggered, so what is left is reported again. Commands cannot
//!   starve the links either: with a command queued the epoll is still looked at,
//!   without waiting.
//! - `epoll_wait` counts its timeout in whole milliseconds, rounded up: the thread
//!   wakes up to 1 ms after the deadline it was given, never before.
//! - An inlet that ends ([`Inlet::read`] or [`Inlet::alive`] says so) is removed from
//!   the epoll and dropped in the same turn.

use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use raft::prelude::Message;
use rustix::event::{EventfdFlags, Timespec, epoll, eventfd};

use crate::RaftError;

/// Bytes one inlet may read in one turn.
pub const READ_BUDGET: usize = 256 << 10;

/// A peer link the raft thread reads.
pub trait Inlet: Send + 'static {
    /// The socket the thread waits on (non-blocking).
    fn fd(&self) -> BorrowedFd<'_>;
    /// Reads what arrived, up to about `budget` bytes, without blocking, and appends its
    /// messages to `out`. False: the link ended; it is dropped.
    fn read(&mut self, budget: usize, out: &mut Vec<Message>) -> bool;
    /// Called every tick. False: the link is dead (silent too long); it is dropped.
    fn alive(&mut self, now: Instant) -> bool;
}

/// Wakes the raft thread when it sleeps: shared by every [`super::RaftHandle`].
pub(super) struct Waker {
    eventfd: OwnedFd,
    parked: AtomicBool,
}

impl Waker {
    /// Wakes the thread if it sleeps (after the caller queued what it is woken for).
    pub(super) fn wake(&self) {
        // Orders the caller's send before the look at `parked` (see [`Inlets::wait`]).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.parked.swap(false, Ordering::SeqCst) {
            // An eventfd's counter only saturates after 2^64 - 2 writes; a failure
            // here would leave the thread to its next tick.
            let _ = rustix::io::write(&self.eventfd, &1u64.to_ne_bytes());
        }
    }
}

/// What a wait found.
pub(super) enum Woken {
    /// A command.
    Command(super::Command),
    /// Messages from inlets, a new inlet, or the timeout: nothing to hand over.
    Nothing,
    /// Every sender is gone.
    Disconnected,
}

/// The token of the eventfd in the epoll; inlets have the ones below it.
const WAKER_TOKEN: u64 = u64::MAX;

/// The raft thread's epoll, its eventfd and its inlets.
pub(super) struct Inlets {
    epoll: OwnedFd,
    waker: Arc<Waker>,
    new_inlets: Receiver<Box<dyn Inlet>>,
    inlets: HashMap<u64, Box<dyn Inlet>>,
    next_token: u64,
}

/// Room for what one `epoll_wait` reports; made on the raft thread (an epoll event is
/// not `Send`).
pub(super) struct Events(Vec<epoll::Event>);

impl Default for Events {
    fn default() -> Events {
        Events(Vec::with_capacity(64))
    }
}

impl Inlets {
    /// An epoll with its waker; inlets arrive on `new_inlets`.
    pub(super) fn new(
        new_inlets: Receiver<Box<dyn Inlet>>,
    ) -> Result<(Inlets, Arc<Waker>), RaftError> {
        let failed = |what: &'static str| {
            move |e: rustix::io::Errno| RaftError::Wait {
                what,
                source: e.into(),
            }
        };
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(failed("epoll"))?;
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map_err(failed("eventfd"))?;
        epoll::add(
            &epoll,
            &fd,
            epoll::EventData::new_u64(WAKER_TOKEN),
            epoll::EventFlags::IN,
        )
        .map_err(failed("epoll add"))?;
        let waker = Arc::new(Waker {
            eventfd: fd,
            parked: AtomicBool::new(false),
        });
        let inlets = Inlets {
            epoll,
            waker: waker.clone(),
            new_inlets,
            inlets: HashMap::new(),
            next_token: 0,
        };
        Ok((inlets, waker))
    }

    /// Waits up to `timeout` for a command, or for inlets to have something; steps
    /// nothing itself: the inlets' messages are appended to `msgs`.
    pub(super) fn wait(
        &mut self,
        rx: &Receiver<super::Command>,
        timeout: Duration,
        events: &mut Events,
        msgs: &mut Vec<Message>,
    ) -> Woken {
        self.waker.parked.store(true, Ordering::SeqCst);
        // Orders the store before the look at the channel: a sender that queued after
        // the look sees `parked` and writes the eventfd.
        std::sync::atomic::fence(Ordering::SeqCst);
        let queued = match rx.try_recv() {
            Ok(cmd) => {
                self.waker.parked.store(false, Ordering::SeqCst);
                Some(cmd)
            }
            Err(TryRecvError::Disconnected) => return Woken::Disconnected,
            Err(TryRecvError::Empty) => None,
        };
        // With a command queued the links are still looked at, without waiting: a
        // steady flow of commands must not hold back the peers' answers.
        let timeout = if queued.is_some() {
            Duration::ZERO
        } else {
            timeout
        };
        self.take_new_inlets(msgs);
        let timeout = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        events.0.clear();
        let waited = epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut events.0),
            Some(&timeout),
        );
        self.waker.parked.store(false, Ordering::SeqCst);
        if let Err(e) = waited
            && e != rustix::io::Errno::INTR
        {
            tracing::warn!("raft: epoll_wait: {e}");
        }
        for token in events.0.iter().map(|e| e.data.u64()) {
            if token == WAKER_TOKEN {
                let mut counter = [0u8; 8];
                let _ = rustix::io::read(&self.waker.eventfd, &mut counter);
            } else {
                self.read(token, msgs);
            }
        }
        self.take_new_inlets(msgs);
        if let Some(cmd) = queued {
            return Woken::Command(cmd);
        }
        match rx.try_recv() {
            Ok(cmd) => Woken::Command(cmd),
            Err(TryRecvError::Disconnected) => Woken::Disconnected,
            Err(TryRecvError::Empty) => Woken::Nothing,
        }
    }

    /// Drops the inlets that say they are dead.
    pub(super) fn tick(&mut self, now: Instant) {
        let dead: Vec<u64> = self
            .inlets
            .iter_mut()
            .filter_map(|(&token, inlet)| (!inlet.alive(now)).then_some(token))
            .collect();
        for token in dead {
            self.drop_inlet(token);
        }
    }

    fn read(&mut self, token: u64, msgs: &mut Vec<Message>) {
        let open = match self.inlets.get_mut(&token) {
            Some(inlet) => inlet.read(READ_BUDGET, msgs),
            None => return,
        };
        if !open {
            self.drop_inlet(token);
        }
    }

    /// Waits on the inlets handed over since the last look, and reads each once: what
    /// came with its connection's upgrade is taken now, not at its next byte.
    fn take_new_inlets(&mut self, msgs: &mut Vec<Message>) {
        while let Ok(inlet) = self.new_inlets.try_recv() {
            let token = self.next_token;
            self.next_token += 1;
            let added = epoll::add(
                &self.epoll,
                inlet.fd(),
                epoll::EventData::new_u64(token),
                epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
            );
            match added {
                Ok(()) => {
                    self.inlets.insert(token, inlet);
                    self.read(token, msgs);
                }
                Err(e) => tracing::warn!("raft: a peer link could not be waited on: {e}"),
            }
        }
    }

    fn drop_inlet(&mut self, token: u64) {
        if let Some(inlet) = self.inlets.remove(&token) {
            let _ = epoll::delete(&self.epoll, inlet.fd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;

    use super::super::Command;

    /// An inlet over one end of a socket pair: each byte is a message with that index.
    struct Bytes(UnixStream);

    impl Inlet for Bytes {
        fn fd(&self) -> BorrowedFd<'_> {
            self.0.as_fd()
        }
        fn read(&mut self, _budget: usize, out: &mut Vec<Message>) -> bool {
            let mut buf = [0u8; 16];
            match std::io::Read::read(&mut self.0, &mut buf) {
                Ok(0) => false,
                Ok(n) => {
                    for &b in &buf[..n] {
                        out.push(Message {
                            index: u64::from(b),
                            ..Default::default()
                        });
                    }
                    true
                }
                Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
            }
        }
        fn alive(&mut self, _now: Instant) -> bool {
            true
        }
    }

    #[test]
    fn a_sleeping_thread_wakes_for_a_command_an_inlet_and_a_closed_inlet() {
        let (tx, rx) = mpsc::channel();
        let (inlets_tx, inlets_rx) = mpsc::channel::<Box<dyn Inlet>>();
        let (mut inlets, waker) = Inlets::new(inlets_rx).expect("inlets");
        let long = Duration::from_secs(30);
        let mut msgs = Vec::new();
        let mut events = Events::default();

        // A command queued while the thread sleeps wakes it.
        let sender = std::thread::spawn({
            let waker = waker.clone();
            move || {
                std::thread::sleep(Duration::from_millis(50));
                tx.send(Command::Campaign).expect("send");
                waker.wake();
                tx
            }
        });
        let started = Instant::now();
        assert!(matches!(
            inlets.wait(&rx, long, &mut events, &mut msgs),
            Woken::Command(Command::Campaign)
        ));
        assert!(started.elapsed() < long);
        let tx = sender.join().expect("sender");

        // Bytes on an inlet wake it, and are read.
        let (mine, theirs) = UnixStream::pair().expect("pair");
        mine.set_nonblocking(true).expect("nonblocking");
        inlets_tx.send(Box::new(Bytes(mine))).expect("inlet");
        waker.wake();
        assert!(matches!(
            inlets.wait(&rx, Duration::ZERO, &mut events, &mut msgs),
            Woken::Nothing
        ));
        std::io::Write::write_all(&mut &theirs, &[4, 5]).expect("write");
        let mut got = Vec::new();
        while got.len() < 2 {
            assert!(matches!(
                inlets.wait(&rx, long, &mut events, &mut msgs),
                Woken::Nothing
            ));
            got.extend(msgs.drain(..).map(|m| m.index));
        }
        assert_eq!(got, vec![4, 5]);

        // A closed inlet wakes it and is dropped; a timeout returns with nothing.
        drop(theirs);
        assert!(matches!(
            inlets.wait(&rx, long, &mut events, &mut msgs),
            Woken::Nothing
        ));
        assert!(inlets.inlets.is_empty());
        let started = Instant::now();
        assert!(matches!(
            inlets.wait(&rx, Duration::from_millis(20), &mut events, &mut msgs),
            Woken::Nothing
        ));
        assert!(started.elapsed() >= Duration::from_millis(20));
        drop(tx);
        assert!(matches!(
            inlets.wait(&rx, long, &mut events, &mut msgs),
            Woken::Disconnected
        ));
    }
}
