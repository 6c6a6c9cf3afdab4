//! Which auth tokens a member makes and accepts: `--auth-token`, read as etcd 3.5's
//! `NewTokenProvider` reads it. The value is `<type>[,<name>=<value>...]`: `simple`
//! (options ignored), `jwt` (options in [`jwt`](super::jwt)), or empty: no tokens at
//! all (every token is invalid and Authenticate fails, as etcd's "nop" provider). An
//! option without exactly one `=`, an option given twice, or another type fails with
//! etcd's "auth: invalid auth options".
//!
//! Each member reads its own flag; the members of a cluster should agree (as in etcd,
//! nothing checks it).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::jwt::{JwtTokens, OptionsError};
use super::tokens::SimpleTokens;

/// A member's tokens.
#[derive(Debug)]
pub enum TokenProvider {
    /// `simple`: random tokens recorded by every member (see [`super::tokens`]).
    Simple(SimpleTokens),
    /// `jwt,...`: signed tokens, recorded nowhere.
    Jwt(JwtTokens),
    /// An empty `--auth-token`: no token is ever made or accepted.
    Nop,
}

impl TokenProvider {
    /// The provider `--auth-token` names (`simple_ttl`: `--auth-token-ttl`, for simple
    /// tokens), with the warnings etcd logs about it; etcd's start-up error otherwise.
    pub fn from_flag(
        spec: &str,
        simple_ttl: Duration,
    ) -> Result<(TokenProvider, Vec<String>), OptionsError> {
        let mut parts = spec.split(',');
        let kind = parts.next().unwrap_or_default();
        let mut opts = BTreeMap::new();
        for part in parts {
            let pair: Vec<&str> = part.split('=').collect();
            let [name, value] = pair.as_slice() else {
                return Err(OptionsError::invalid(format!(
                    "invalid token option {spec:?}"
                )));
            };
            if opts.insert(name.to_string(), value.to_string()).is_some() {
                return Err(OptionsError::invalid(format!(
                    "invalid token option {spec:?}: duplicate parameter {name:?}"
                )));
            }
        }
        match kind {
            "simple" => Ok((
                TokenProvider::Simple(SimpleTokens::new(simple_ttl)),
                Vec::new(),
            )),
            "jwt" => {
                let (jwt, warning) = JwtTokens::from_options(&opts)?;
                Ok((TokenProvider::Jwt(jwt), warning.into_iter().collect()))
            }
            "" => Ok((TokenProvider::Nop, Vec::new())),
            other => Err(OptionsError::invalid(format!(
                "unknown token type {other:?}"
            ))),
        }
    }

    /// Simple tokens: records `<prefix>.<index>` for `user` (an Authenticate entry
    /// applied) and returns it. None for other providers, and for an empty prefix (one
    /// proposed by a member without simple tokens: a token anyone could guess).
    pub fn record_simple(
        &self,
        prefix: &str,
        index: u64,
        user: &str,
        now: Instant,
    ) -> Option<String> {
        match self {
            TokenProvider::Simple(t) if !prefix.is_empty() => {
                let token = format!("{prefix}.{index}");
                t.assign(token.clone(), user, now);
                Some(token)
            }
            _ => None,
        }
    }

    /// Drops the recorded tokens of `user` (deleted, or its password changed); JWTs
    /// are recorded nowhere and live on (as in etcd).
    pub fn invalidate_user(&self, user: &str) {
        if let TokenProvider::Simple(t) = self {
            t.invalidate_user(user);
        }
    }

    /// Drops every recorded token (auth disabled).
    pub fn clear(&self) {
        if let TokenProvider::Simple(t) = self {
            t.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(spec: &str) -> OptionsError {
        match TokenProvider::from_flag(spec, Duration::from_secs(300)) {
            Ok((p, _)) => panic!("{spec} was accepted: {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn types_and_option_syntax_as_etcd() {
        let ttl = Duration::from_secs(300);
        for spec in ["simple", "simple,whatever=1"] {
            let (p, _) = TokenProvider::from_flag(spec, ttl).expect(spec);
            assert!(matches!(p, TokenProvider::Simple(_)), "{spec}");
        }
        let (p, _) = TokenProvider::from_flag("", ttl).expect("empty");
        assert!(matches!(p, TokenProvider::Nop));
        for spec in [
            "magic",
            "simple,bad",
            "simple,a=b=c",
            "simple,a=1,a=2",
            "simple,",
            "jwt,sign-method=HS256,ttl=1s,ttl=2s",
        ] {
            assert_eq!(refused(spec).error, "auth: invalid auth options", "{spec}");
        }
        assert_eq!(
            refused("simple,a=1,a=2").detail.as_deref(),
            Some(r#"invalid token option "simple,a=1,a=2": duplicate parameter "a""#)
        );
    }

    #[test]
    fn only_simple_tokens_are_recorded() {
        let (p, _) = TokenProvider::from_flag("simple", Duration::from_secs(300)).expect("simple");
        let now = Instant::now();
        assert_eq!(
            p.record_simple("abc", 7, "u", now).as_deref(),
            Some("abc.7")
        );
        assert_eq!(p.record_simple("", 8, "u", now), None, "no guessable token");
        assert_eq!(TokenProvider::Nop.record_simple("abc", 9, "u", now), None);
    }
}
