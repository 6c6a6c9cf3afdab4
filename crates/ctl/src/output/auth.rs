//! The user, role and auth commands' answers in each format, as etcdctl prints them:
//! `simple` says what happened in a sentence, `json` and `protobuf` print the response
//! message, `fields` prints the header (and a role's permissions or the role list) but
//! has no form for a user or the user list, and no answer has a `table` form.

use oxcd_api::authpb::Permission;
use oxcd_api::authpb::permission::Type as PermType;
use oxcd_api::etcdserverpb::{
    AuthRoleGetResponse, AuthRoleListResponse, AuthStatusResponse, AuthUserGetResponse,
    AuthUserListResponse, ResponseHeader,
};
use oxcd_client::prefix_end;
use oxcd_go::json::json_string;
use oxcd_go::quote::quote;
use prost::Message;

use super::json::{Obj, header};
use super::{Format, Out, Printer, fields, pb};

/// An auth response whose simple form is one sentence and whose other forms show only
/// its header (the add, delete, grant, revoke and password answers).
pub struct Done<'a, M> {
    /// The response.
    pub resp: &'a M,
    /// Its header.
    pub header: &'a Option<ResponseHeader>,
    /// The sentence `simple` prints (with its newline).
    pub sentence: Vec<u8>,
}

fn header_only(h: &Option<ResponseHeader>) -> String {
    Obj::default().raw("header", header(h)).done()
}

/// A permission as Go's encoding/json writes authpb's struct.
fn perm_json(p: &Permission) -> String {
    Obj::default()
        .num("permType", p.perm_type)
        .bytes("key", &p.key)
        .bytes("range_end", &p.range_end)
        .done()
}

/// A response of a header and a list of names, as Go's encoding/json writes it.
fn names_json(h: &Option<ResponseHeader>, field: &str, names: &[String]) -> Out {
    let names = names.iter().map(|s| json_string(s)).collect();
    Out::text(
        Obj::default()
            .raw("header", header(h))
            .list(field, names)
            .done()
            + "\n",
    )
}

/// A permission's range as `role get` prints it, the tab included.
fn simple_range(out: &mut Vec<u8>, p: &Permission) {
    out.push(b'\t');
    if p.range_end.is_empty() {
        out.extend_from_slice(&p.key);
        out.push(b'\n');
        return;
    }
    out.push(b'[');
    out.extend_from_slice(&p.key);
    if p.range_end != b"\0" {
        out.extend_from_slice(b", ");
        out.extend_from_slice(&p.range_end);
        out.push(b')');
    } else {
        out.extend_from_slice(b", <open ended>");
    }
    if prefix_end(&p.key) == p.range_end {
        out.extend_from_slice(b" (prefix ");
        out.extend_from_slice(&p.key);
        out.push(b')');
    }
    out.push(b'\n');
}

fn perm_name(t: i32) -> &'static str {
    PermType::try_from(t).map(|t| t.as_str_name()).unwrap_or("")
}

impl Printer {
    /// An answer that is a sentence in `simple` (see [`Done`]).
    pub fn auth_done<M: Message>(&self, d: Done<'_, M>) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(d.sentence),
            Format::Json => Out::text(header_only(d.header) + "\n"),
            Format::Fields => Out::text(fields::header(d.header)),
            Format::Protobuf => pb(d.resp),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `user get <name>`.
    pub fn user_get(&self, name: &str, r: &AuthUserGetResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => {
                let roles: String = r.roles.iter().map(|role| format!(" {role}")).collect();
                Out::text(format!("User: {name}\nRoles:{roles}\n"))
            }
            Format::Json => names_json(&r.header, "roles", &r.roles),
            Format::Protobuf => pb(r),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `user list`.
    pub fn user_list(&self, r: &AuthUserListResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(r.users.iter().map(|u| format!("{u}\n")).collect()),
            Format::Json => names_json(&r.header, "users", &r.users),
            Format::Protobuf => pb(r),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `role get <name>`.
    pub fn role_get(&self, name: &str, r: &AuthRoleGetResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => {
                let mut out = format!("Role {name}\nKV Read:\n").into_bytes();
                let reads = r
                    .perm
                    .iter()
                    .filter(|p| p.perm_type != PermType::Write as i32);
                for p in reads {
                    simple_range(&mut out, p);
                }
                out.extend_from_slice(b"KV Write:\n");
                let writes = r
                    .perm
                    .iter()
                    .filter(|p| p.perm_type != PermType::Read as i32);
                for p in writes {
                    simple_range(&mut out, p);
                }
                Out::bytes(out)
            }
            Format::Json => Out::text(
                Obj::default()
                    .raw("header", header(&r.header))
                    .list("perm", r.perm.iter().map(perm_json).collect())
                    .done()
                    + "\n",
            ),
            Format::Fields => {
                let mut out = fields::header(&r.header);
                for p in &r.perm {
                    // Go's Println puts a space between the label and the name.
                    out.push_str(&format!("\"PermType\" :  {}\n", perm_name(p.perm_type)));
                    out.push_str(&format!("\"Key\" : {}\n", quote(&p.key)));
                    out.push_str(&format!("\"RangeEnd\" : {}\n", quote(&p.range_end)));
                }
                Out::text(out)
            }
            Format::Protobuf => pb(r),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `role list`.
    pub fn role_list(&self, r: &AuthRoleListResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(r.roles.iter().map(|u| format!("{u}\n")).collect()),
            Format::Json => names_json(&r.header, "roles", &r.roles),
            Format::Fields => {
                let roles: String = r
                    .roles
                    .iter()
                    .map(|role| format!(" {}", quote(role.as_bytes())))
                    .collect();
                Out::text(format!("{}\"Roles\" :{roles}\n", fields::header(&r.header)))
            }
            Format::Protobuf => pb(r),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `auth status` (etcdctl 3.5's).
    pub fn auth_status(&self, r: &AuthStatusResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(format!(
                "Authentication Status: {}\nAuthRevision: {}\n",
                r.enabled, r.auth_revision
            )),
            Format::Json => Out::text(
                Obj::default()
                    .raw("header", header(&r.header))
                    .bool("enabled", r.enabled)
                    .num("authRevision", r.auth_revision)
                    .done()
                    + "\n",
            ),
            Format::Protobuf => pb(r),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }
}
