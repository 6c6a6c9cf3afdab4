//! The gateway's JSON, byte for byte as etcd 3.5's gateway writes it, and the reading of
//! request bodies.
//!
//! etcd's messages carry serde impls with the proto3 JSON mapping under proto field
//! names (`oxcd-api`'s `json` feature). What this module adds is etcd's layout: a unary
//! answer has a space after each comma (`{"a":"1", "b":"2"}`, as Go's protojson writes
//! it in etcd 3.5's build) and a stream's lines are compact
//! (`{"result":{"a":"1","b":"2"}}` then a newline, as its gateway re-encodes them).
//!
//! Invariant: a body is decoded as etcd's gateway decodes it: the first JSON value of
//! the body is the request, an empty body is the empty request, unknown fields are
//! ignored.

use std::io;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::ser::{CompactFormatter, Formatter};

/// Compact JSON with a space after every comma: Go's protojson single-line output as
/// etcd 3.5 prints it.
struct SpacedCommas;

/// Writes the separator before a value or key that is not the first: a comma and a space.
fn spaced_comma<W: ?Sized + io::Write>(writer: &mut W, first: bool) -> io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

impl Formatter for SpacedCommas {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        spaced_comma(writer, first)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        spaced_comma(writer, first)
    }
}

/// `msg` as etcd's gateway answers a unary call.
pub fn unary<T: Serialize>(msg: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedCommas);
    msg.serialize(&mut ser)?;
    Ok(out)
}

/// A stream's line: `{"result":<msg>}` (compact) and a newline.
pub fn stream_result<T: Serialize>(msg: &T) -> Result<Vec<u8>, serde_json::Error> {
    stream_line("result", msg)
}

/// A stream's line `{"<name>":<value>}` (compact) and a newline.
pub fn stream_line<T: Serialize>(name: &str, value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, CompactFormatter);
    name.serialize(&mut ser)?;
    out.extend_from_slice(b":");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, CompactFormatter);
    value.serialize(&mut ser)?;
    out.extend_from_slice(b"}\n");
    Ok(out)
}

/// Why a body is not a request.
#[derive(Debug)]
pub struct BadBody(pub String);

/// The request in `body`: its first JSON value (the empty request when there is none).
pub fn request<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, BadBody> {
    match Values::default().next_in(body) {
        Ok(Some((req, _))) => Ok(req),
        Ok(None) if body.iter().all(u8::is_ascii_whitespace) => Ok(T::default()),
        // A value begun and not finished.
        Ok(None) => Err(BadBody(UNEXPECTED_EOF.to_string())),
        Err(e) => Err(e),
    }
}

/// Reads the requests of a stream's body one after the other as its bytes arrive.
#[derive(Debug, Default)]
pub struct Values {
    /// Bytes received and not yet read as a value.
    pending: Vec<u8>,
}

impl Values {
    /// Adds bytes received.
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The next complete value of what was pushed, if there is one.
    pub fn take_value<T: DeserializeOwned>(&mut self) -> Result<Option<T>, BadBody> {
        let pending = std::mem::take(&mut self.pending);
        match self.next_in::<T>(&pending) {
            Ok(Some((v, used))) => {
                self.pending = pending[used..].to_vec();
                Ok(Some(v))
            }
            Ok(None) => {
                self.pending = pending;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// How many bytes are waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether only whitespace is left.
    pub fn is_empty(&self) -> bool {
        self.pending.iter().all(u8::is_ascii_whitespace)
    }

    /// The first value of `bytes` and the bytes it took; None when `bytes` holds only
    /// whitespace or a value not complete yet.
    fn next_in<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<Option<(T, usize)>, BadBody> {
        let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
        match values.next() {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some((v, values.byte_offset()))),
            Some(Err(e)) if e.is_eof() => Ok(None),
            Some(Err(e)) => Err(BadBody(e.to_string())),
        }
    }
}

/// The message etcd's gateway answers for a body cut short.
pub const UNEXPECTED_EOF: &str = "unexpected EOF";

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
    use oxcd_api::mvccpb::KeyValue;

    fn header() -> ResponseHeader {
        ResponseHeader {
            cluster_id: 324952591200643719,
            member_id: 3319814642761637952,
            revision: 5,
            raft_term: 2,
        }
    }

    #[test]
    fn a_unary_answer_is_laid_out_as_etcd_35_writes_it() {
        let resp = RangeResponse {
            header: Some(header()),
            kvs: vec![KeyValue {
                key: b"foo".to_vec(),
                create_revision: 2,
                mod_revision: 5,
                version: 3,
                value: b"x".to_vec(),
                lease: 0,
            }],
            more: false,
            count: 1,
        };
        let out = unary(&resp).expect("encodes");
        // Captured from etcd 3.5.16's gateway.
        let etcd = r#"{"header":{"cluster_id":"324952591200643719", "member_id":"3319814642761637952", "revision":"5", "raft_term":"2"}, "kvs":[{"key":"Zm9v", "create_revision":"2", "mod_revision":"5", "version":"3", "value":"eA=="}], "count":"1"}"#;
        assert_eq!(String::from_utf8_lossy(&out), etcd);
    }

    #[test]
    fn a_stream_line_is_compact() {
        let resp = RangeResponse {
            header: Some(header()),
            ..Default::default()
        };
        let out = stream_result(&resp).expect("encodes");
        let etcd = "{\"result\":{\"header\":{\"cluster_id\":\"324952591200643719\",\"member_id\":\"3319814642761637952\",\"revision\":\"5\",\"raft_term\":\"2\"}}}\n";
        assert_eq!(String::from_utf8_lossy(&out), etcd);
    }

    #[test]
    fn a_body_is_read_as_etcd_reads_it() {
        let r: RangeRequest =
            request(br#"{"key":"Zm9v","limit":2,"sortOrder":"DESCEND","bogus":[1]} trailing"#)
                .expect("decodes");
        assert_eq!(r.key, b"foo");
        assert_eq!(r.limit, 2);
        assert_eq!(r.sort_order, 2);
        let r: RangeRequest = request(b"  ").expect("empty is the empty request");
        assert_eq!(r, RangeRequest::default());
        let r: RangeRequest = request(br#"{"limit":"7"}"#).expect("64-bit as a string");
        assert_eq!(r.limit, 7);
        assert!(request::<RangeRequest>(br#"{"key":1}"#).is_err());
        let cut = request::<RangeRequest>(br#"{"key":"Zm9v","#).expect_err("cut short");
        assert_eq!(cut.0, UNEXPECTED_EOF);
    }

    #[test]
    fn a_stream_body_yields_its_values_as_they_complete() {
        let mut v = Values::default();
        v.push(br#"{"key":"Zm9v"} {"ke"#);
        let first: Option<RangeRequest> = v.take_value().expect("reads");
        assert_eq!(first.map(|r| r.key), Some(b"foo".to_vec()));
        assert!(
            v.take_value::<RangeRequest>()
                .expect("incomplete")
                .is_none()
        );
        v.push(br#"y":"YmFy"}"#);
        let second: Option<RangeRequest> = v.take_value().expect("reads");
        assert_eq!(second.map(|r| r.key), Some(b"bar".to_vec()));
        assert!(v.is_empty());
    }
}
