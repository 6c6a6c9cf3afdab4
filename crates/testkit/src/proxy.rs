//! A partitioning TCP proxy in front of each member's peer port.
//!
//! Members advertise the proxy's port as their peer URL, so all peer traffic to member
//! `j` passes through proxy `j`. Each member connects from its own loopback address
//! (`127.0.0.<10+i>`, set with `OXCD_PEER_SOURCE_IP`), so the proxy knows which member a
//! connection comes from. Cutting the link (i, j) closes the open connections from `i`
//! to `j` and refuses new ones; a partition is a set of cut links. An etcd member cannot
//! be given a source address: a connection from an unknown address is known by the
//! `X-Server-From` header (the sender's member id) that etcd's peer protocol puts on
//! every request, read before anything is forwarded. Freezing a member
//! stalls the connections to and from it that are open at that moment, without closing
//! them, as a silent network drop or a dead NAT entry would; new connections work. Works
//! unprivileged, on loopback only.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The loopback address member `i` connects to peers from.
pub fn source_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + i as u8))
}

fn member_of(addr: SocketAddr) -> Option<usize> {
    match addr.ip() {
        IpAddr::V4(v4) if v4.octets()[..3] == [127, 0, 0] && v4.octets()[3] >= 10 => {
            Some(usize::from(v4.octets()[3] - 10))
        }
        _ => None,
    }
}

/// The cut links, shared by every proxy of a cluster. Changing it bumps a generation so
/// that proxies drop connections on links that are now cut.
#[derive(Clone)]
pub struct Links {
    cut: Arc<Mutex<HashSet<(usize, usize)>>>,
    changed: watch::Sender<u64>,
    /// The member whose open connections were last frozen.
    frozen: watch::Sender<Option<usize>>,
    /// Member ids by index, for connections known by their `X-Server-From` header.
    ids: Arc<Mutex<HashMap<u64, usize>>>,
}

impl Default for Links {
    fn default() -> Links {
        Links {
            cut: Arc::default(),
            changed: watch::channel(0).0,
            frozen: watch::channel(None).0,
            ids: Arc::default(),
        }
    }
}

impl Links {
    /// Whether traffic from `from` to `to` is cut.
    pub fn is_cut(&self, from: usize, to: usize) -> bool {
        self.cut
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(from, to))
    }

    /// Member `index` has id `id` (its requests in etcd's protocol say so).
    pub fn name_member(&self, id: u64, index: usize) {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, index);
    }

    fn index_of(&self, id: u64) -> Option<usize> {
        self.ids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .copied()
    }

    /// Separates `group` from every other member of `0..n` (both directions).
    pub fn isolate(&self, group: &[usize], n: usize) {
        {
            let mut cut = self.cut.lock().unwrap_or_else(|p| p.into_inner());
            for &a in group {
                for b in (0..n).filter(|b| !group.contains(b)) {
                    cut.insert((a, b));
                    cut.insert((b, a));
                }
            }
        }
        self.changed.send_modify(|g| *g += 1);
    }

    /// Stalls every connection open now to or from `member`: bytes stop flowing both
    /// ways and nothing is closed, until [`Links::heal`] closes them. Connections opened
    /// later are not affected.
    pub fn freeze_open(&self, member: usize) {
        self.frozen.send_replace(Some(member));
    }

    /// Restores every link and closes frozen connections.
    pub fn heal(&self) {
        self.cut.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.changed.send_modify(|g| *g += 1);
    }
}

/// The first bytes of a connection: up to the end of an HTTP/1.1 request head, at most
/// 16 KiB, or whatever came within a second.
async fn read_head(inbound: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
    while head.len() < 16 << 10 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, inbound.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    head
}

/// The member id an HTTP request head names in `X-Server-From` (hex, as etcd writes it).
fn sender_id(head: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(head).ok()?;
    text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("x-server-from")
            .then(|| u64::from_str_radix(value.trim(), 16).ok())?
    })
}

/// Starts the proxy for member `to`: accepts on `listen`, forwards to `target`.
pub async fn start(
    to: usize,
    listen: SocketAddr,
    target: SocketAddr,
    links: Links,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(listen).await?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((inbound, from_addr)) = listener.accept().await else {
                continue;
            };
            let from = member_of(from_addr);
            if from.is_some_and(|f| links.is_cut(f, to)) {
                drop(inbound);
                continue;
            }
            let links = links.clone();
            tokio::spawn(async move {
                let mut inbound = inbound;
                // From an unknown address: an HTTP/1.1 peer request names its sender.
                let (from, head) = match from {
                    Some(f) => (Some(f), Vec::new()),
                    None => {
                        let head = read_head(&mut inbound).await;
                        let from = sender_id(&head).and_then(|id| links.index_of(id));
                        (from, head)
                    }
                };
                if from.is_some_and(|f| links.is_cut(f, to)) {
                    return;
                }
                let Ok(mut outbound) = TcpStream::connect(target).await else {
                    return;
                };
                if !head.is_empty() && outbound.write_all(&head).await.is_err() {
                    return;
                }
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let mut changed = links.changed.subscribe();
                let mut frozen = links.frozen.subscribe();
                frozen.mark_unchanged();
                let freeze = async {
                    loop {
                        if frozen.changed().await.is_err() {
                            return std::future::pending().await;
                        }
                        let member = *frozen.borrow_and_update();
                        if member.is_some_and(|m| m == to || from == Some(m)) {
                            return;
                        }
                    }
                };
                let cut = async {
                    loop {
                        if changed.changed().await.is_err() {
                            return;
                        }
                        if from.is_some_and(|f| links.is_cut(f, to)) {
                            return;
                        }
                    }
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = cut => {}
                    _ = freeze => {
                        // Hold both sockets open, forwarding nothing, until links change.
                        let _ = links.changed.subscribe().changed().await;
                    }
                }
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_etcd_request_names_its_sender() {
        let head = b"POST /raft HTTP/1.1\r\nHost: x\r\nX-Server-From: 8e9e05c52164694d\r\n\r\n";
        assert_eq!(sender_id(head), Some(0x8e9e05c52164694d));
        assert_eq!(sender_id(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), None);
    }
}
