//! A minimal HTTP/1.1 client for the gateway benchmark: one keep-alive connection,
//! one request at a time, bodies by `Content-Length` or chunked. Nothing more is
//! needed to load etcd's gateway and oxcd's the same way, and it costs the load
//! generator little per request.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One connection to `host:port`.
pub struct HttpConn {
    stream: BufReader<TcpStream>,
    host: String,
    request: Vec<u8>,
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl HttpConn {
    /// Connects to `host` (`127.0.0.1:2379`).
    pub async fn connect(host: &str) -> io::Result<HttpConn> {
        let s = TcpStream::connect(host).await?;
        s.set_nodelay(true)?;
        Ok(HttpConn {
            stream: BufReader::with_capacity(64 * 1024, s),
            host: host.to_string(),
            request: Vec::with_capacity(1024),
        })
    }

    /// POSTs `body` to `path`: the status code and the body of the answer.
    pub async fn post(&mut self, path: &str, body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
        self.request.clear();
        self.request.extend_from_slice(
            format!(
                "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                self.host,
                body.len()
            )
            .as_bytes(),
        );
        self.request.extend_from_slice(body);
        self.stream.get_mut().write_all(&self.request).await?;
        self.answer().await
    }

    /// GETs `path`: the status code and the body.
    pub async fn get(&mut self, path: &str) -> io::Result<(u16, Vec<u8>)> {
        let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.host);
        self.stream.get_mut().write_all(req.as_bytes()).await?;
        self.answer().await
    }

    async fn line(&mut self, line: &mut String) -> io::Result<()> {
        line.clear();
        if self.stream.read_line(line).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        Ok(())
    }

    async fn answer(&mut self) -> io::Result<(u16, Vec<u8>)> {
        let mut line = String::new();
        self.line(&mut line).await?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| bad("no status line"))?;
        let mut length = None;
        let mut chunked = false;
        loop {
            self.line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (name, value) = l.split_once(':').unwrap_or((l, ""));
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.trim().eq_ignore_ascii_case("chunked");
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                self.line(&mut line).await?;
                let size = usize::from_str_radix(line.trim(), 16).map_err(|_| bad("chunk size"))?;
                if size == 0 {
                    self.line(&mut line).await?;
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                self.stream.read_exact(&mut body[start..]).await?;
                self.line(&mut line).await?;
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            self.stream.read_exact(&mut body).await?;
        }
        Ok((status, body))
    }
}
