//! The member commands' answers in each format, as etcdctl 3.4 prints them. `simple`
//! says what happened in a sentence (ids as Go's `%16x`: space-padded hex) and lists
//! members as `ID, Status, Name, Peer Addrs, Client Addrs, Is Learner`; `json` and
//! `protobuf` print the response message; `fields` and `table` have a form for the list
//! alone, and refuse the others — after the change was made, as etcdctl refuses them.
//!
//! `member add` in `simple` also prints the settings the new member starts with
//! (`ETCD_NAME`, `ETCD_INITIAL_CLUSTER`, ...), built from the members in the answer.
//!
//! etcdctl 3.4 (and 3.5) crashes on a successful `member promote` in any format but
//! `simple` (a nil pointer: its printers lack the method); oxcdctl prints what it would
//! print for the other member answers instead: the message in `json` and `protobuf`,
//! the refusal in `fields` and `table`.

use std::fmt::Write as _;

use oxcd_api::etcdserverpb::{
    Member, MemberAddResponse, MemberListResponse, MemberPromoteResponse, MemberRemoveResponse,
    MemberUpdateResponse, ResponseHeader,
};
use oxcd_go::json::json_string;
use oxcd_go::quote::quote_str;

use super::json::{Obj, header};
use super::{Format, Out, Printer, fields, pb, table};

/// A member as Go's encoding/json writes etcdserverpb's struct.
fn member_json(m: &Member) -> String {
    let strings = |v: &[String]| v.iter().map(|s| json_string(s)).collect();
    Obj::default()
        .num("ID", m.id)
        .str("name", &m.name)
        .list("peerURLs", strings(&m.peer_ur_ls))
        .list("clientURLs", strings(&m.client_ur_ls))
        .bool("isLearner", m.is_learner)
        .done()
}

/// A response made of a header and the members (remove, update, promote, list).
fn members_json(h: &Option<ResponseHeader>, members: &[Member]) -> String {
    Obj::default()
        .raw("header", header(h))
        .list("members", members.iter().map(member_json).collect())
        .done()
}

/// etcdctl's `makeMemberListTable` rows: a member without a name has not started.
fn rows(members: &[Member]) -> Vec<Vec<String>> {
    members
        .iter()
        .map(|m| {
            vec![
                format!("{:x}", m.id),
                if m.name.is_empty() {
                    "unstarted"
                } else {
                    "started"
                }
                .to_string(),
                m.name.clone(),
                m.peer_ur_ls.join(","),
                m.client_ur_ls.join(","),
                m.is_learner.to_string(),
            ]
        })
        .collect()
}

const LIST_HEADER: [&str; 6] = [
    "ID",
    "Status",
    "Name",
    "Peer Addrs",
    "Client Addrs",
    "Is Learner",
];

fn cluster_id(h: &Option<ResponseHeader>) -> u64 {
    h.as_ref().map_or(0, |h| h.cluster_id)
}

/// The settings `member add` prints for the new member `name`: every member's peer
/// URLs as `name=url` (the new member under `name`, the others under their own names,
/// empty for those not started), and `peer_urls` as the flag gave them.
fn initial_cluster(name: &str, peer_urls: &str, r: &MemberAddResponse) -> String {
    let new_id = r.member.as_ref().map_or(0, |m| m.id);
    let conf: Vec<String> = r
        .members
        .iter()
        .flat_map(|m| {
            let n = if m.id == new_id { name } else { &m.name };
            m.peer_ur_ls.iter().map(move |u| format!("{n}={u}"))
        })
        .collect();
    format!(
        "\nETCD_NAME={}\nETCD_INITIAL_CLUSTER={}\nETCD_INITIAL_ADVERTISE_PEER_URLS={}\nETCD_INITIAL_CLUSTER_STATE=\"existing\"\n",
        quote_str(name),
        quote_str(&conf.join(",")),
        quote_str(peer_urls)
    )
}

impl Printer {
    /// `member add <name> --peer-urls=<peer_urls>`.
    pub fn member_add(
        &self,
        name: &str,
        peer_urls: &str,
        r: &MemberAddResponse,
    ) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => {
                let id = r.member.as_ref().map_or(0, |m| m.id);
                Out::text(format!(
                    "Member {id:16x} added to cluster {:16x}\n{}",
                    cluster_id(&r.header),
                    initial_cluster(name, peer_urls, r)
                ))
            }
            Format::Json => Out::text(
                Obj::default()
                    .raw("header", header(&r.header))
                    .raw("member", r.member.as_ref().map(member_json))
                    .list("members", r.members.iter().map(member_json).collect())
                    .done()
                    + "\n",
            ),
            Format::Protobuf => pb(r),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `member remove <id>`.
    pub fn member_remove(&self, id: u64, r: &MemberRemoveResponse) -> Result<Out, String> {
        self.member_changed(id, "removed from", &r.header, &r.members, || pb(r))
    }

    /// `member update <id>`.
    pub fn member_update(&self, id: u64, r: &MemberUpdateResponse) -> Result<Out, String> {
        self.member_changed(id, "updated in", &r.header, &r.members, || pb(r))
    }

    /// `member promote <id>` (see the module's doc for the formats but `simple`).
    pub fn member_promote(&self, id: u64, r: &MemberPromoteResponse) -> Result<Out, String> {
        self.member_changed(id, "promoted in", &r.header, &r.members, || pb(r))
    }

    /// A change to member `id`: "Member <id> <what> cluster <cluster id>" in `simple`.
    fn member_changed(
        &self,
        id: u64,
        what: &str,
        h: &Option<ResponseHeader>,
        members: &[Member],
        protobuf: impl FnOnce() -> Out,
    ) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(format!(
                "Member {id:16x} {what} cluster {:16x}\n",
                cluster_id(h)
            )),
            Format::Json => Out::text(members_json(h, members) + "\n"),
            Format::Protobuf => protobuf(),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `member list`.
    pub fn member_list(&self, r: &MemberListResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(
                rows(&r.members)
                    .iter()
                    .map(|row| row.join(", ") + "\n")
                    .collect(),
            ),
            Format::Json => Out::text(members_json(&r.header, &r.members) + "\n"),
            Format::Fields => {
                let mut out = fields::header(&r.header);
                for m in &r.members {
                    let _ = writeln!(out, "\"ID\" : {}", m.id);
                    let _ = writeln!(out, "\"Name\" : {}", quote_str(&m.name));
                    for u in &m.peer_ur_ls {
                        let _ = writeln!(out, "\"PeerURL\" : {}", quote_str(u));
                    }
                    for u in &m.client_ur_ls {
                        let _ = writeln!(out, "\"ClientURL\" : {}", quote_str(u));
                    }
                    let _ = write!(out, "\"IsLearner\" : {}\n\n", m.is_learner);
                }
                Out::text(out)
            }
            Format::Table => Out::text(table::render(&LIST_HEADER, &rows(&r.members))),
            Format::Protobuf => pb(r),
        })
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    fn printer(format: Format) -> Printer {
        Printer {
            format,
            hex: false,
            value_only: false,
        }
    }

    fn text(r: Result<Out, String>) -> String {
        match r {
            Ok(o) => String::from_utf8_lossy(&o.stdout()).into_owned(),
            Err(e) => format!("Error: {e}"),
        }
    }

    fn hdr() -> Option<ResponseHeader> {
        Some(ResponseHeader {
            cluster_id: 0xd1cf_af99_9eb9_7a2a,
            member_id: 0x0294_3212_f5e2_cf73,
            revision: 0,
            raft_term: 2,
        })
    }

    fn started() -> Member {
        Member {
            id: 0x0294_3212_f5e2_cf73,
            name: "default".into(),
            peer_ur_ls: vec!["http://127.0.0.1:2380".into()],
            client_ur_ls: vec![
                "http://127.0.0.1:2379".into(),
                "http://10.0.0.1:2379".into(),
            ],
            is_learner: false,
        }
    }

    fn learner() -> Member {
        Member {
            id: 0x0fca_f472_d9b1_b66b,
            name: String::new(),
            peer_ur_ls: vec![
                "http://127.0.0.1:2480".into(),
                "http://127.0.0.1:2481".into(),
            ],
            client_ur_ls: Vec::new(),
            is_learner: true,
        }
    }

    fn list() -> MemberListResponse {
        MemberListResponse {
            header: hdr(),
            members: vec![started(), learner()],
        }
    }

    #[test]
    fn list_in_every_format() {
        assert_eq!(
            text(printer(Format::Simple).member_list(&list())),
            "2943212f5e2cf73, started, default, http://127.0.0.1:2380, http://127.0.0.1:2379,http://10.0.0.1:2379, false\n\
             fcaf472d9b1b66b, unstarted, , http://127.0.0.1:2480,http://127.0.0.1:2481, , true\n"
        );
        assert_eq!(
            text(printer(Format::Json).member_list(&list())),
            "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":185828541645115251,\"raft_term\":2},\
             \"members\":[{\"ID\":185828541645115251,\"name\":\"default\",\"peerURLs\":[\"http://127.0.0.1:2380\"],\
             \"clientURLs\":[\"http://127.0.0.1:2379\",\"http://10.0.0.1:2379\"]},\
             {\"ID\":1137990629980223083,\"peerURLs\":[\"http://127.0.0.1:2480\",\"http://127.0.0.1:2481\"],\"isLearner\":true}]}\n"
        );
        assert_eq!(
            text(printer(Format::Fields).member_list(&list())),
            "\"ClusterID\" : 15118495548433857066\n\"MemberID\" : 185828541645115251\n\
             \"Revision\" : 0\n\"RaftTerm\" : 2\n\
             \"ID\" : 185828541645115251\n\"Name\" : \"default\"\n\
             \"PeerURL\" : \"http://127.0.0.1:2380\"\n\
             \"ClientURL\" : \"http://127.0.0.1:2379\"\n\"ClientURL\" : \"http://10.0.0.1:2379\"\n\
             \"IsLearner\" : false\n\n\
             \"ID\" : 1137990629980223083\n\"Name\" : \"\"\n\
             \"PeerURL\" : \"http://127.0.0.1:2480\"\n\"PeerURL\" : \"http://127.0.0.1:2481\"\n\
             \"IsLearner\" : true\n\n"
        );
        assert_eq!(
            text(printer(Format::Table).member_list(&list())),
            "\
+-----------------+-----------+---------+---------------------------------------------+--------------------------------------------+------------+
|       ID        |  STATUS   |  NAME   |                 PEER ADDRS                  |                CLIENT ADDRS                | IS LEARNER |
+-----------------+-----------+---------+---------------------------------------------+--------------------------------------------+------------+
| 2943212f5e2cf73 |   started | default |                       http://127.0.0.1:2380 | http://127.0.0.1:2379,http://10.0.0.1:2379 |      false |
| fcaf472d9b1b66b | unstarted |         | http://127.0.0.1:2480,http://127.0.0.1:2481 |                                            |       true |
+-----------------+-----------+---------+---------------------------------------------+--------------------------------------------+------------+
"
        );
        let pb = printer(Format::Protobuf)
            .member_list(&list())
            .map(|o| o.stdout());
        assert_eq!(pb.ok(), Some(list().encode_to_vec()));
        // No members: nothing but the header where there is one.
        let empty = MemberListResponse {
            header: hdr(),
            members: Vec::new(),
        };
        assert_eq!(text(printer(Format::Simple).member_list(&empty)), "");
        assert_eq!(
            text(printer(Format::Json).member_list(&empty)),
            "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":185828541645115251,\"raft_term\":2}}\n"
        );
    }

    fn added() -> MemberAddResponse {
        MemberAddResponse {
            header: hdr(),
            member: Some(learner()),
            members: vec![started(), learner()],
        }
    }

    #[test]
    fn add_prints_the_new_members_settings_in_simple() {
        let urls = "http://127.0.0.1:2480,http://127.0.0.1:2481";
        assert_eq!(
            text(printer(Format::Simple).member_add("l1", urls, &added())),
            "Member  fcaf472d9b1b66b added to cluster d1cfaf999eb97a2a\n\
             \n\
             ETCD_NAME=\"l1\"\n\
             ETCD_INITIAL_CLUSTER=\"default=http://127.0.0.1:2380,l1=http://127.0.0.1:2480,l1=http://127.0.0.1:2481\"\n\
             ETCD_INITIAL_ADVERTISE_PEER_URLS=\"http://127.0.0.1:2480,http://127.0.0.1:2481\"\n\
             ETCD_INITIAL_CLUSTER_STATE=\"existing\"\n"
        );
        // Another member that has not started yet keeps its empty name; the flag's text
        // and the name are quoted as Go's %q quotes them.
        let other = Member {
            id: 7,
            name: String::new(),
            peer_ur_ls: vec!["http://h:1".into()],
            ..Default::default()
        };
        let mut r = added();
        r.members.insert(0, other);
        let out = text(printer(Format::Simple).member_add("a\"b", " http://x:1", &r));
        assert!(
            out.contains(
                "ETCD_NAME=\"a\\\"b\"\n\
                 ETCD_INITIAL_CLUSTER=\"=http://h:1,default=http://127.0.0.1:2380,a\\\"b=http://127.0.0.1:2480,a\\\"b=http://127.0.0.1:2481\"\n\
                 ETCD_INITIAL_ADVERTISE_PEER_URLS=\" http://x:1\"\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn add_in_the_other_formats() {
        assert_eq!(
            text(printer(Format::Json).member_add("l1", "u", &added())),
            "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":185828541645115251,\"raft_term\":2},\
             \"member\":{\"ID\":1137990629980223083,\"peerURLs\":[\"http://127.0.0.1:2480\",\"http://127.0.0.1:2481\"],\"isLearner\":true},\
             \"members\":[{\"ID\":185828541645115251,\"name\":\"default\",\"peerURLs\":[\"http://127.0.0.1:2380\"],\
             \"clientURLs\":[\"http://127.0.0.1:2379\",\"http://10.0.0.1:2379\"]},\
             {\"ID\":1137990629980223083,\"peerURLs\":[\"http://127.0.0.1:2480\",\"http://127.0.0.1:2481\"],\"isLearner\":true}]}\n"
        );
        let pb = printer(Format::Protobuf).member_add("l1", "u", &added());
        assert_eq!(pb.map(|o| o.stdout()).ok(), Some(added().encode_to_vec()));
        for f in [Format::Fields, Format::Table] {
            assert_eq!(
                printer(f).member_add("l1", "u", &added()).err(),
                Some(f.unsupported())
            );
        }
    }

    #[test]
    fn changes_in_every_format() {
        let members = vec![started()];
        let removed = MemberRemoveResponse {
            header: hdr(),
            members: members.clone(),
        };
        let updated = MemberUpdateResponse {
            header: hdr(),
            members: members.clone(),
        };
        let promoted = MemberPromoteResponse {
            header: hdr(),
            members: members.clone(),
        };
        let id = 0x0fca_f472_d9b1_b66b;
        let simple = printer(Format::Simple);
        assert_eq!(
            text(simple.member_remove(id, &removed)),
            "Member  fcaf472d9b1b66b removed from cluster d1cfaf999eb97a2a\n"
        );
        assert_eq!(
            text(simple.member_update(id, &updated)),
            "Member  fcaf472d9b1b66b updated in cluster d1cfaf999eb97a2a\n"
        );
        assert_eq!(
            text(simple.member_promote(0x1f, &promoted)),
            "Member               1f promoted in cluster d1cfaf999eb97a2a\n"
        );
        let json = "{\"header\":{\"cluster_id\":15118495548433857066,\"member_id\":185828541645115251,\"raft_term\":2},\
             \"members\":[{\"ID\":185828541645115251,\"name\":\"default\",\"peerURLs\":[\"http://127.0.0.1:2380\"],\
             \"clientURLs\":[\"http://127.0.0.1:2379\",\"http://10.0.0.1:2379\"]}]}\n";
        let p = printer(Format::Json);
        assert_eq!(text(p.member_remove(id, &removed)), json);
        assert_eq!(text(p.member_update(id, &updated)), json);
        assert_eq!(text(p.member_promote(id, &promoted)), json);
        let p = printer(Format::Protobuf);
        let bytes = |r: Result<Out, String>| r.map(|o| o.stdout()).ok();
        assert_eq!(
            bytes(p.member_remove(id, &removed)),
            Some(removed.encode_to_vec())
        );
        assert_eq!(
            bytes(p.member_update(id, &updated)),
            Some(updated.encode_to_vec())
        );
        assert_eq!(
            bytes(p.member_promote(id, &promoted)),
            Some(promoted.encode_to_vec())
        );
        for f in [Format::Fields, Format::Table] {
            let p = printer(f);
            assert_eq!(p.member_remove(id, &removed).err(), Some(f.unsupported()));
            assert_eq!(p.member_update(id, &updated).err(), Some(f.unsupported()));
            assert_eq!(p.member_promote(id, &promoted).err(), Some(f.unsupported()));
        }
    }
}
