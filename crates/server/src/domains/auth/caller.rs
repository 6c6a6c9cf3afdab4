//! Who a request is made for, as etcd reads it: the user of the auth token in the
//! request's metadata (`token`, or `authorization` as etcd's gateway sends it), with the
//! auth revision at the time (a JWT's: the one it was signed with); with
//! `--client-cert-auth` and no token, the common name of the connection's verified
//! client certificate (etcd's CN auth), unless the request came through a gateway
//! (`grpcgateway-accept` metadata: the certificate is the gateway's). Nobody while auth
//! is off or when the request carries neither (the checks then answer etcd's "user name
//! is empty").

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::RequestAuth;
use tonic::Request;

use crate::machine::reads::Reads;
use crate::start::listeners::ClientAddr;
use oxcd_auth::AuthStore;
use oxcd_auth::provider::TokenProvider;
use oxcd_auth::tokens;

/// The metadata keys a token travels in: etcd's clients, then its gateway.
const TOKEN_KEYS: [&str; 2] = ["token", "authorization"];
/// The metadata etcd's gateway adds to what it forwards.
const GATEWAY_KEY: &str = "grpcgateway-accept";

/// What a request presents to say who makes it.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Its auth token, if any.
    pub token: Option<String>,
    /// Its connection's certificate's common name, where CN auth applies.
    pub common_name: Option<Arc<str>>,
}

/// Tells who makes a request: the auth store's tokens, and the applied index a simple
/// token's login may still have to reach here. Cheap to clone.
#[derive(Clone)]
pub struct Callers {
    auth: Arc<AuthStore>,
    reads: Reads,
}

impl Callers {
    /// Callers as `auth` knows them, waiting on `reads` for logins not applied yet.
    pub fn new(auth: Arc<AuthStore>, reads: Reads) -> Callers {
        Callers { auth, reads }
    }

    /// The auth store the callers are checked against.
    pub fn auth(&self) -> &Arc<AuthStore> {
        &self.auth
    }

    /// The caller of `req` (see the module doc); an unknown or expired token is etcd's
    /// "invalid auth token".
    pub async fn of<T>(&self, req: &Request<T>) -> Result<Option<RequestAuth>, EtcdError> {
        // Every request comes here: with auth off, not even the metadata is read.
        if !self.auth.enabled() {
            return Ok(None);
        }
        self.presenting(&credentials(req)).await
    }

    /// etcd 3.6's `requireAuthInfo`: with auth on, `req` must come from an
    /// authenticated user (any one); "user name is empty" otherwise.
    pub async fn require_user<T>(&self, req: &Request<T>) -> Result<(), EtcdError> {
        match self.of(req).await? {
            Some(_) => Ok(()),
            None if !self.auth.enabled() => Ok(()),
            None => Err(EtcdError::UserEmpty),
        }
    }

    /// The caller a request presenting `creds` is made for (a stream keeps its
    /// credentials and asks again at each request on it, as etcd does): for a simple
    /// token, its recorded user and the current auth revision; for a JWT, the user and
    /// auth revision it was signed with, so a token made before an auth change is
    /// refused as etcd refuses it ("revision of auth store is old"); for a certificate,
    /// its CN and the current revision.
    pub async fn presenting(&self, creds: &Credentials) -> Result<Option<RequestAuth>, EtcdError> {
        let auth = &self.auth;
        if !auth.enabled() {
            return Ok(None);
        }
        let Some(token) = creds.token.as_deref() else {
            return Ok(creds.common_name.as_ref().map(|cn| RequestAuth {
                username: cn.to_string(),
                revision: auth.revision(),
            }));
        };
        let (username, revision) = match &auth.tokens {
            TokenProvider::Simple(simple) => {
                // A token made by an entry this member has not applied yet (the client
                // logged in through another member): wait for it, as etcd does.
                if let Some(index) = tokens::index_of(token)
                    && index > self.reads.applied_index()
                {
                    self.reads.wait_applied(index).await?;
                }
                let user = simple
                    .user(token, Instant::now())
                    .ok_or(EtcdError::InvalidAuthToken)?;
                (user, auth.revision())
            }
            // Nothing to wait for: a JWT carries its user and revision.
            TokenProvider::Jwt(jwt) => jwt
                .verify(token, SystemTime::now())
                .ok_or(EtcdError::InvalidAuthToken)?,
            TokenProvider::Nop => return Err(EtcdError::InvalidAuthToken),
        };
        Ok(Some(RequestAuth { username, revision }))
    }
}

/// The credentials `req` presents (checked by [`Callers::presenting`]).
pub fn credentials<T>(req: &Request<T>) -> Credentials {
    let token = TOKEN_KEYS
        .iter()
        .find_map(|k| req.metadata().get(*k))
        .map(|v| {
            // A value that is not text is no token anyone issued: it stays invalid.
            v.to_str().unwrap_or("\u{fffd}").to_string()
        });
    let common_name = if token.is_none() && req.metadata().get(GATEWAY_KEY).is_none() {
        req.extensions()
            .get::<axum::extract::ConnectInfo<ClientAddr>>()
            .and_then(|c| c.0.common_name.clone())
    } else {
        None
    };
    Credentials { token, common_name }
}

/// The caller's name, if any.
pub fn name(caller: &Option<RequestAuth>) -> Option<&str> {
    caller.as_ref().map(|c| c.username.as_str())
}
