//! A DNS server on loopback for discovery tests: it answers SRV and A questions from a
//! fixed table over UDP (NOERROR with no answer for a known name asked another type,
//! NXDOMAIN for a name it does not know) until dropped.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

const TYPE_A: u16 = 1;
const TYPE_SRV: u16 = 33;

/// What the server knows.
#[derive(Debug, Clone, Default)]
pub struct Records {
    /// `(name, port, target)`: SRV records, in the order they are answered.
    pub srv: Vec<(String, u16, String)>,
    /// `(name, address)`.
    pub a: Vec<(String, Ipv4Addr)>,
}

/// A running server; stopped when dropped.
pub struct DnsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn norm(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `name` as DNS labels.
fn encode_name(out: &mut Vec<u8>, name: &str) {
    for label in norm(name).split('.').filter(|l| !l.is_empty()) {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
}

/// The question of a query: its name, type, and where the question section ends.
fn question(q: &[u8]) -> Option<(String, u16, usize)> {
    let mut pos = 12;
    let mut labels = Vec::new();
    loop {
        let len = *q.get(pos)? as usize;
        pos += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(q.get(pos..pos + len)?).into_owned());
        pos += len;
    }
    let qtype = u16::from_be_bytes([*q.get(pos)?, *q.get(pos + 1)?]);
    Some((labels.join("."), qtype, pos + 4))
}

/// The answer to query `q` from `records`.
fn answer(q: &[u8], records: &Records) -> Option<Vec<u8>> {
    let (name, qtype, end) = question(q)?;
    let name = norm(&name);
    let mut answers: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut known = false;
    for (n, port, target) in &records.srv {
        if norm(n) == name {
            known = true;
            if qtype == TYPE_SRV {
                let mut rdata = vec![0, 0, 0, 0];
                rdata.extend_from_slice(&port.to_be_bytes());
                encode_name(&mut rdata, target);
                answers.push((TYPE_SRV, rdata));
            }
        }
    }
    for (n, ip) in &records.a {
        if norm(n) == name {
            known = true;
            if qtype == TYPE_A {
                answers.push((TYPE_A, ip.octets().to_vec()));
            }
        }
    }
    let rcode: u8 = if known { 0 } else { 3 };
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&q[0..2]);
    out.extend_from_slice(&[0x81, 0x80 | rcode]);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&q[12..end]);
    for (kind, rdata) in answers {
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&60u32.to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&rdata);
    }
    Some(out)
}

impl DnsServer {
    /// Serves `records` on a free UDP port of 127.0.0.1.
    pub fn start(records: Records) -> std::io::Result<DnsServer> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = socket.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("test-dns".into())
            .spawn(move || {
                let mut buf = [0u8; 1500];
                while !stopping.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    if let Some(out) = answer(&buf[..n], &records) {
                        let _ = socket.send_to(&out, from);
                    }
                }
            })?;
        Ok(DnsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (`127.0.0.1:port`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
