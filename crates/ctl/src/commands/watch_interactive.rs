//! `watch -i`: etcdctl 3.4's interactive watch. Lines read from stdin (`watch [options]
//! <key> [range_end] [-- command ...]` or `progress`) start watches, or ask for a
//! progress notification, on one shared Watch stream; events print as the plain watch
//! prints them. As etcdctl: an unusable line is reported on stderr and skipped, a line
//! with bad flags or arguments ends the command (exit 128), and the end of stdin ends it
//! with "Error reading watch request line: EOF" (exit 3). A broken stream is reopened
//! and every watch resumes after the last revision it delivered.

use std::collections::{BTreeMap, VecDeque};
use std::io::BufRead;
use std::time::Duration;

use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{
    WatchCreateRequest, WatchProgressRequest, WatchRequest, WatchResponse,
};
use oxcd_client::{Client, prefix_end};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::txn_syntax::argify;
use super::watch_events::{FLAGS, show};
use crate::args::{self, HELP};
use crate::command::bad_args;
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::{Out, Printer};

/// The id of a response meant for every watch of the stream (progress).
const EVERY_WATCH: i64 = -1;

/// A watch asked for by a line.
#[derive(Clone)]
struct Wanted {
    req: WatchCreateRequest,
    exec: Vec<String>,
}

/// What a line asks for.
enum Line {
    Watch(Wanted),
    Progress,
}

/// The watch's words after `watch`, as etcdctl parses them in interactive mode: the
/// create request and the command to run per event, an argument error (which ends
/// the command), or an unusable request (reported, skipped).
fn parse_watch(
    words: &[String],
    env_key: &str,
    env_range: &str,
) -> Result<Result<Wanted, String>, Fail> {
    let dash = words.iter().position(|w| w == "--");
    if dash.is_some_and(|i| i + 1 == words.len()) {
        return Err(bad_args(
            "bad number of arguments (found separator --, but no commands)",
        ));
    }
    let mut specs = FLAGS.to_vec();
    specs.push(HELP);
    let p = args::parse(words, &specs).map_err(|e| bad_args(&e))?;
    if p.flag("help") {
        return Err(bad_args("pflag: help requested"));
    }
    if dash.is_none() && env_key.is_empty() && p.args.is_empty() {
        return Err(bad_args("bad number of arguments"));
    }
    if dash.is_none() && !p.args.is_empty() && !env_key.is_empty() {
        return Err(bad_args(
            "bad number of arguments (found conflicting environment key)",
        ));
    }
    let exec: Vec<String> = dash.map_or(Vec::new(), |i| words[i + 1..].to_vec());
    let mut keys: Vec<String> = Vec::new();
    if !env_key.is_empty() {
        keys.push(env_key.to_string());
        if !env_range.is_empty() {
            keys.push(env_range.to_string());
        }
    }
    keys.extend(p.args.iter().cloned());
    if let Some(first) = exec.first() {
        // The command's words follow the keys: cut at the last occurrence of its name.
        let end = keys.iter().rposition(|k| k == first).unwrap_or(0);
        keys.truncate(end);
    }
    let prefix = p.flag("prefix");
    let Some(key) = keys.first() else {
        return Ok(Err("bad number of arguments".into()));
    };
    let mut req = WatchCreateRequest {
        key: key.clone().into_bytes(),
        start_revision: p.int("rev"),
        prev_kv: p.flag("prev-kv"),
        progress_notify: p.flag("progress-notify"),
        ..Default::default()
    };
    if let [_, end] = keys.as_slice() {
        if prefix {
            return Ok(Err(
                "`range_end` and `--prefix` are mutually exclusive".into()
            ));
        }
        req.range_end = end.clone().into_bytes();
    }
    if prefix {
        req.range_end = prefix_end(&req.key);
    }
    Ok(Ok(Wanted { req, exec }))
}

/// One stdin line: what it asks for, or `None` after reporting it as etcdctl does.
fn parse_line(line: &str, env_key: &str, env_range: &str) -> Result<Option<Line>, Fail> {
    let words = argify(line).map_err(|f| Fail {
        code: exit::INVALID_INPUT,
        ..f
    })?;
    let Some(first) = words.first() else {
        eprintln!("Invalid command: {line} (watch and progress supported)");
        return Ok(None);
    };
    match first.as_str() {
        "watch" => {
            if words.len() < 2 && env_key.is_empty() {
                eprintln!("Invalid command {line} (command type or key is not provided)");
                return Ok(None);
            }
            match parse_watch(&words[1..], env_key, env_range)? {
                Ok(w) => Ok(Some(Line::Watch(w))),
                Err(why) => {
                    eprintln!("Invalid command {line} ({why})");
                    Ok(None)
                }
            }
        }
        "progress" => Ok(Some(Line::Progress)),
        _ => {
            eprintln!("Invalid command {line} (only support watch)");
            Ok(None)
        }
    }
}

/// Reads stdin line by line in a thread; the first failure (end of input included) is
/// the last message.
fn read_lines() -> mpsc::Receiver<Result<String, String>> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        loop {
            let mut buf = Vec::new();
            let got = match input.read_until(b'\n', &mut buf) {
                Ok(_) if buf.last() == Some(&b'\n') => {
                    buf.pop();
                    Ok(String::from_utf8_lossy(&buf).into_owned())
                }
                Ok(_) => Err("EOF".to_string()),
                Err(e) => Err(e.to_string()),
            };
            let end = got.is_err();
            if tx.blocking_send(got).is_err() || end {
                return;
            }
        }
    });
    rx
}

/// A watch the server created, and where it would resume.
struct Active {
    wanted: Wanted,
    next_rev: i64,
}

type Conn = (mpsc::Sender<WatchRequest>, tonic::Streaming<WatchResponse>);

/// The shared stream (opened with its first watch: a server answers the call only once
/// it has something to send) and the watches on it.
struct Stream {
    conn: Option<Conn>,
    /// Sent, not yet created, in order.
    pending: VecDeque<Wanted>,
    /// Created, by id.
    active: BTreeMap<i64, Active>,
}

fn create(w: &Wanted) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(w.req.clone())),
    }
}

/// Opens a stream that starts with `first`, trying until the cluster answers.
async fn open(client: &Client, first: Vec<WatchRequest>) -> Conn {
    loop {
        let (tx, rx) = mpsc::channel(first.len() + 16);
        for r in &first {
            // The receiver is alive and the channel has room.
            let _ = tx.try_send(r.clone());
        }
        if let Ok(stream) = client.watch().watch(ReceiverStream::new(rx)).await {
            return (tx, stream.into_inner());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

impl Stream {
    async fn start(&mut self, client: &Client, w: Wanted) -> Result<(), Fail> {
        match &self.conn {
            Some((tx, _)) => tx
                .send(create(&w))
                .await
                .map_err(|_| Fail::new(exit::ERROR, "watch stream closed"))?,
            None => self.conn = Some(open(client, vec![create(&w)]).await),
        }
        self.pending.push_back(w);
        Ok(())
    }

    /// Asks for a progress notification (nothing to ask without a watch).
    async fn progress(&mut self) {
        if let Some((tx, _)) = &self.conn {
            let req = WatchRequest {
                request_union: Some(RequestUnion::ProgressRequest(WatchProgressRequest {})),
            };
            let _ = tx.send(req).await;
        }
    }

    /// The next message of the stream; never, while there is none.
    async fn message(&mut self) -> Result<Option<WatchResponse>, tonic::Status> {
        match &mut self.conn {
            Some((_, rx)) => rx.message().await,
            None => std::future::pending().await,
        }
    }

    /// Prints one response; `exec` per event.
    fn handle(&mut self, printer: &Printer, resp: &WatchResponse) -> Result<(), Fail> {
        if resp.created {
            let Some(w) = self.pending.pop_front() else {
                return Ok(());
            };
            if resp.canceled {
                show(printer, resp, &w.exec)?;
                return Ok(());
            }
            let rev = resp.header.as_ref().map_or(0, |h| h.revision);
            let next_rev = if w.req.start_revision > 0 {
                w.req.start_revision
            } else {
                rev + 1
            };
            self.active.insert(
                resp.watch_id,
                Active {
                    wanted: w,
                    next_rev,
                },
            );
            return Ok(());
        }
        let rev = resp.header.as_ref().map_or(0, |h| h.revision);
        if resp.watch_id == EVERY_WATCH && resp.events.is_empty() {
            for a in self.active.values_mut() {
                a.next_rev = a.next_rev.max(rev + 1);
                show(printer, resp, &a.wanted.exec)?;
            }
            return Ok(());
        }
        let Some(a) = self.active.get_mut(&resp.watch_id) else {
            return Ok(());
        };
        match resp.events.last().and_then(|e| e.kv.as_ref()) {
            Some(kv) => a.next_rev = a.next_rev.max(kv.mod_revision + 1),
            None if !resp.canceled => a.next_rev = a.next_rev.max(rev + 1),
            None => {}
        }
        if show(printer, resp, &a.wanted.exec)? {
            self.active.remove(&resp.watch_id);
        }
        Ok(())
    }

    /// A new stream after a break: every watch again, from where it stopped.
    async fn reopen(&mut self, client: &Client) {
        self.conn = None;
        let mut again: Vec<Wanted> = std::mem::take(&mut self.active)
            .into_values()
            .map(|a| {
                let mut w = a.wanted;
                w.req.start_revision = a.next_rev;
                w
            })
            .collect();
        again.extend(std::mem::take(&mut self.pending));
        if again.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        self.conn = Some(open(client, again.iter().map(create).collect()).await);
        self.pending = again.into();
    }
}

/// `watch -i`.
pub async fn run(mut ctx: Ctx, env_key: String, env_range: String) -> Result<Out, Fail> {
    let s = ctx.session()?;
    let client = s.client().await?;
    let mut lines = read_lines();
    let mut st = Stream {
        conn: None,
        pending: VecDeque::new(),
        active: BTreeMap::new(),
    };
    loop {
        tokio::select! {
            line = lines.recv() => {
                let line = match line {
                    Some(Ok(l)) => l,
                    Some(Err(e)) => {
                        return Err(Fail::new(
                            exit::INVALID_INPUT,
                            format!("Error reading watch request line: {e}"),
                        ));
                    }
                    None => return Err(Fail::new(exit::INVALID_INPUT, "Error reading watch request line: EOF")),
                };
                match parse_line(&line, &env_key, &env_range)? {
                    Some(Line::Watch(w)) => st.start(&client, w).await?,
                    Some(Line::Progress) => st.progress().await,
                    None => {}
                }
            }
            msg = st.message() => match msg {
                Ok(Some(resp)) => st.handle(&s.printer, &resp)?,
                Ok(None) | Err(_) => st.reopen(&client).await,
            },
        }
    }
}
