//! The lease commands' answers in each format, as etcdctl 3.4 prints them. etcdctl hands
//! clientv3's wrappers to its printers, not the protobuf messages, which shows: `json`
//! prints the wrappers' fields, `protobuf` prints only the header the wrappers embed (the
//! one part of them that can be marshalled), `revoke`'s wrapper cannot be marshalled at
//! all, and no answer has a `table` form.

use oxcd_api::etcdserverpb::{
    LeaseGrantResponse, LeaseKeepAliveResponse, LeaseLeasesResponse, LeaseRevokeResponse,
    LeaseTimeToLiveResponse, ResponseHeader,
};

use super::{Format, Out, Printer, fields, json, pb, simple};

/// What `protobuf` prints for a clientv3 wrapper that embeds the header.
fn embedded_header(h: &Option<ResponseHeader>) -> Out {
    pb(&h.unwrap_or_default())
}

/// A header as Go's `%v` prints it inside a struct: the protobuf compact text of its
/// non-zero fields, each followed by a space.
fn compact_header(h: &Option<ResponseHeader>) -> String {
    let Some(h) = h else {
        return "<nil>".to_string();
    };
    let mut out = String::new();
    for (name, v) in [
        ("cluster_id", i128::from(h.cluster_id)),
        ("member_id", i128::from(h.member_id)),
        ("revision", i128::from(h.revision)),
        ("raft_term", i128::from(h.raft_term)),
    ] {
        if v != 0 {
            out.push_str(&format!("{name}:{v} "));
        }
    }
    out
}

impl Printer {
    /// `lease grant`.
    pub fn grant(&self, r: &LeaseGrantResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(simple::grant(r)),
            Format::Json => Out::text(json::grant(r) + "\n"),
            Format::Fields => Out::text(fields::grant(r)),
            Format::Protobuf => embedded_header(&r.header),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `lease revoke` of lease `id`.
    pub fn revoke(&self, id: i64, r: &LeaseRevokeResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(simple::revoke(id)),
            Format::Json => Out::text(json::revoke(r) + "\n"),
            Format::Fields => Out::text(fields::revoke(r)),
            Format::Protobuf => {
                return Err(format!(
                    "marshal unsupported for type clientv3.LeaseRevokeResponse ({{{}}})",
                    compact_header(&r.header)
                ));
            }
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `lease keep-alive`: one answer.
    pub fn keep_alive(&self, r: &LeaseKeepAliveResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(simple::keep_alive(r)),
            Format::Json => Out::text(json::keep_alive(r) + "\n"),
            Format::Fields => Out::text(fields::keep_alive(r)),
            Format::Protobuf => embedded_header(&r.header),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// The end of `lease keep-alive` of lease `id`: a line in `simple`, nothing else.
    pub fn keep_alive_end(&self, id: i64) -> Out {
        match self.format {
            Format::Simple => Out::text(simple::keep_alive_end(id)),
            _ => Out::default(),
        }
    }

    /// `lease timetolive`; `keys`: whether the keys were asked for.
    pub fn time_to_live(&self, r: &LeaseTimeToLiveResponse, keys: bool) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(simple::time_to_live(r, keys)),
            Format::Json => Out::text(json::time_to_live(r) + "\n"),
            Format::Fields => Out::text(fields::time_to_live(r)),
            Format::Protobuf => embedded_header(&r.header),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `lease list`.
    pub fn leases(&self, r: &LeaseLeasesResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(simple::leases(r)),
            Format::Json => Out::text(json::leases(r) + "\n"),
            Format::Fields => Out::text(fields::leases(r)),
            Format::Protobuf => embedded_header(&r.header),
            Format::Table => return Err(self.format.unsupported()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_go_prints_a_string_slice() {
        let p = Printer {
            format: Format::Simple,
            hex: false,
            value_only: false,
        };
        let r = LeaseTimeToLiveResponse {
            id: 0x1234,
            ttl: 9,
            granted_ttl: 10,
            keys: vec![b"k1".to_vec(), b"k 2".to_vec()],
            ..Default::default()
        };
        let out = p.time_to_live(&r, true).map(|o| o.stdout());
        assert_eq!(
            out.unwrap_or_default(),
            b"lease 0000000000001234 granted with TTL(10s), remaining(9s), attached keys([k1 k 2])\n"
        );
        let out = p.time_to_live(&r, false).map(|o| o.stdout());
        assert_eq!(
            out.unwrap_or_default(),
            b"lease 0000000000001234 granted with TTL(10s), remaining(9s)\n"
        );
    }

    #[test]
    fn revoke_cannot_be_marshalled() {
        let p = Printer {
            format: Format::Protobuf,
            hex: false,
            value_only: false,
        };
        let r = LeaseRevokeResponse {
            header: Some(ResponseHeader {
                cluster_id: 7,
                member_id: 9,
                revision: 0,
                raft_term: 2,
            }),
        };
        assert_eq!(
            p.revoke(1, &r).err().unwrap_or_default(),
            "marshal unsupported for type clientv3.LeaseRevokeResponse ({cluster_id:7 member_id:9 raft_term:2 })"
        );
    }
}
