//! Auth as a replicated domain. Its state (users, roles, permissions, tokens, the auth
//! revision) and the rules of each change are the oxcd-auth crate's ([`oxcd_auth`]);
//! here are what a committed auth entry does ([`apply`]), the Auth service
//! ([`service`]) and who a request's caller is ([`caller`]: its token or certificate).

pub mod apply;
pub mod caller;
pub mod service;
