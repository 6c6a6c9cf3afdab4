//! JWT auth tokens (`--auth-token jwt,pub-key=..,priv-key=..,sign-method=..,ttl=..`),
//! made and checked as etcd 3.5 makes and checks them (golang-jwt v4 under its
//! `tokenJWT`), signed and verified with `jsonwebtoken`'s RustCrypto backend.
//!
//! A token is `header.claims.signature`, each part base64url without padding: the
//! header `{"alg":"<method>","typ":"JWT"}` and the claims
//! `{"exp":<unix seconds>,"revision":<auth revision>,"username":"<name>"}`, written as
//! Go writes them (keys sorted, `<`, `>`, `&` escaped), so a token has etcd's form byte
//! for byte. RS*/PS*/ES* sign with the private key; HS* with the bytes of the
//! `priv-key` file as the shared secret. Nothing about a token is recorded anywhere: any
//! member holding the same key accepts a token any member made, and a token lives until
//! its `exp` (`ttl`, 5 minutes by default), whatever happens to its user meanwhile.
//!
//! Checking follows golang-jwt's parse: three parts; a header whose `alg` is this
//! member's method; `exp`, `iat` and `nbf` checked when present, in whole seconds (a
//! token is good while now < exp; an `exp` of 0 never expires); the signature; then a
//! string `username` and a number `revision`. The revision is the caller's auth
//! revision, so after any auth change an older token is answered "revision of auth
//! store is old", as etcd answers it.
//!
//! A member given only the public key is verify-only: it accepts tokens, and its
//! Authenticate fails with etcd's "auth: token signing attempted with verify-only key".
//!
//! Not built: ES512 (jsonwebtoken has no P-521 signatures); it is refused at start.

pub mod keys;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;

use keys::Curve;

/// etcd's token lifetime when `ttl` is not given.
pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);

/// etcd's error for a member without a private key asked to sign.
pub const VERIFY_ONLY: &str = "auth: token signing attempted with verify-only key";
/// etcd's options error (bad syntax, unreadable files, an unknown method or TTL).
pub const INVALID_OPTIONS: &str = "auth: invalid auth options";
/// etcd's error for a method without the key it needs.
pub const MISSING_KEY: &str = "auth: missing key data";
/// etcd's error for a private and a public key that differ (as etcd compares them).
pub const KEY_MISMATCH: &str = "auth: public and private keys don't match";
/// golang-jwt's error for an EC key on another curve than its method's, at signing.
pub const INVALID_KEY: &str = "key is invalid";

/// The options etcd's JWT provider knows.
const KNOWN: [&str; 4] = ["sign-method", "pub-key", "priv-key", "ttl"];

/// What a signing method takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// HMAC with the shared secret.
    Hmac,
    /// RSA (PKCS#1 v1.5 or PSS).
    Rsa,
    /// ECDSA on a curve.
    Ec(Curve),
    /// Known to golang-jwt, refused by etcd's provider (Go's type name in its error).
    Unsupported(&'static str),
}

/// golang-jwt's registered signing methods, by name; `None`: not built in oxcd.
const METHODS: [(&str, Option<Algorithm>, Family); 14] = [
    ("HS256", Some(Algorithm::HS256), Family::Hmac),
    ("HS384", Some(Algorithm::HS384), Family::Hmac),
    ("HS512", Some(Algorithm::HS512), Family::Hmac),
    ("RS256", Some(Algorithm::RS256), Family::Rsa),
    ("RS384", Some(Algorithm::RS384), Family::Rsa),
    ("RS512", Some(Algorithm::RS512), Family::Rsa),
    ("PS256", Some(Algorithm::PS256), Family::Rsa),
    ("PS384", Some(Algorithm::PS384), Family::Rsa),
    ("PS512", Some(Algorithm::PS512), Family::Rsa),
    ("ES256", Some(Algorithm::ES256), Family::Ec(Curve::P256)),
    ("ES384", Some(Algorithm::ES384), Family::Ec(Curve::P384)),
    ("ES512", None, Family::Ec(Curve::P521)),
    (
        "EdDSA",
        None,
        Family::Unsupported("*jwt.SigningMethodEd25519"),
    ),
    ("none", None, Family::Unsupported("*jwt.signingMethodNone")),
];

/// Why the JWT options were refused: etcd's error, and what etcd logs before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError {
    /// The error etcd fails to start with (its exact text).
    pub error: String,
    /// The cause etcd logs first, if any.
    pub detail: Option<String>,
}

impl OptionsError {
    fn new(error: impl Into<String>) -> OptionsError {
        OptionsError {
            error: error.into(),
            detail: None,
        }
    }

    /// etcd's "auth: invalid auth options", with what was wrong.
    pub(crate) fn invalid(detail: impl Into<String>) -> OptionsError {
        OptionsError {
            error: INVALID_OPTIONS.into(),
            detail: Some(detail.into()),
        }
    }
}

/// A refused key file: etcd fails to start with its error alone.
impl From<keys::KeyError> for OptionsError {
    fn from(e: keys::KeyError) -> OptionsError {
        OptionsError::new(e.to_string())
    }
}

impl std::error::Error for OptionsError {}

impl std::fmt::Display for OptionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.detail {
            Some(d) => write!(f, "{} ({d})", self.error),
            None => f.write_str(&self.error),
        }
    }
}

/// Why a token could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignError {
    /// Only a public key was given (etcd's `ErrVerifyOnly`).
    VerifyOnly,
    /// An EC key on another curve than the method's (golang-jwt's `ErrInvalidKey`).
    InvalidKey,
    /// The crypto library failed.
    Failed(String),
}

impl std::fmt::Display for SignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignError::VerifyOnly => f.write_str(VERIFY_ONLY),
            SignError::InvalidKey => f.write_str(INVALID_KEY),
            SignError::Failed(e) => f.write_str(e),
        }
    }
}

/// How this member signs.
#[derive(Clone)]
enum Signing {
    Key(EncodingKey),
    VerifyOnly,
    /// An EC key of another curve than the method's: golang-jwt refuses to sign.
    WrongCurve,
}

/// One member's JWT maker and checker.
#[derive(Clone)]
pub struct JwtTokens {
    /// The method's name, as the header's `alg`.
    name: &'static str,
    alg: Algorithm,
    /// Go's signed duration, in nanoseconds.
    ttl_nanos: i128,
    signing: Signing,
    /// None when no token can verify (an EC key on another curve than the method's).
    verifying: Option<DecodingKey>,
}

impl std::fmt::Debug for JwtTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtTokens")
            .field("method", &self.name)
            .field("ttl_nanos", &self.ttl_nanos)
            .field("verify_only", &self.verify_only())
            .finish_non_exhaustive()
    }
}

/// Key files larger than this are refused (a key is a few KiB; `/dev/zero` is not).
const MAX_KEY_FILE: u64 = 1 << 20;

/// The bytes of key file `path`; Go's `open <path>: <reason>` when unreadable.
fn read_key_file(path: &str) -> Result<Vec<u8>, OptionsError> {
    use std::io::Read;
    let failed = |e: std::io::Error| {
        let op = if std::path::Path::new(path).is_dir() {
            "read"
        } else {
            "open"
        };
        OptionsError::invalid(oxcd_go::os::path_error(op, path, &e))
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(failed)?
        .take(MAX_KEY_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_KEY_FILE {
        return Err(OptionsError::invalid(format!(
            "{path}: larger than {MAX_KEY_FILE} bytes: not a key file"
        )));
    }
    Ok(bytes)
}

/// Go's `time.ParseDuration`, signed, in nanoseconds.
fn go_duration_nanos(text: &str) -> Option<i128> {
    oxcd_go::duration::parse(text).ok().map(i128::from)
}

impl JwtTokens {
    /// etcd's JWT provider from its options (`sign-method`, `pub-key`, `priv-key`,
    /// `ttl`); the warning etcd logs for options it does not know, if any.
    pub fn from_options(
        opts: &BTreeMap<String, String>,
    ) -> Result<(JwtTokens, Option<String>), OptionsError> {
        let get = |k: &str| opts.get(k).map(String::as_str).unwrap_or_default();
        // etcd reads the options in this order; each failure is "invalid auth options".
        let ttl_nanos = match get("ttl") {
            "" => i128::from(DEFAULT_TTL.as_secs()) * 1_000_000_000,
            t => go_duration_nanos(t)
                .ok_or_else(|| OptionsError::invalid(format!("time: invalid duration {t:?}")))?,
        };
        let public = match get("pub-key") {
            "" => Vec::new(),
            path => read_key_file(path)?,
        };
        let private = match get("priv-key") {
            "" => Vec::new(),
            path => read_key_file(path)?,
        };
        let method = get("sign-method");
        let (name, alg, family) = METHODS
            .iter()
            .copied()
            .find(|(n, _, _)| *n == method)
            .ok_or_else(|| OptionsError::invalid("auth: invalid auth signature method"))?;
        let unknown: Vec<&str> = opts
            .keys()
            .map(String::as_str)
            .filter(|k| !KNOWN.contains(k))
            .collect();
        let warning =
            (!unknown.is_empty()).then(|| format!("unknown JWT options: [{}]", unknown.join(" ")));
        let (signing, verifying) = match family {
            Family::Hmac => {
                if private.is_empty() {
                    return Err(OptionsError::new(MISSING_KEY));
                }
                (
                    Signing::Key(EncodingKey::from_secret(&private)),
                    Some(DecodingKey::from_secret(&private)),
                )
            }
            Family::Rsa => rsa_keys(&private, &public)?,
            Family::Ec(curve) => ec_keys(curve, &private, &public)?,
            Family::Unsupported(go_type) => {
                return Err(OptionsError::new(format!(
                    "unsupported signing method: {go_type}"
                )));
            }
        };
        let alg = alg.ok_or_else(|| {
            OptionsError::new(format!(
                "--auth-token=jwt,sign-method={name} is not supported yet by oxcd (no P-521 signatures); use ES256, ES384, RS*, PS* or HS*"
            ))
        })?;
        let tokens = JwtTokens {
            name,
            alg,
            ttl_nanos,
            signing,
            verifying,
        };
        Ok((tokens, warning))
    }

    /// Whether this member can only check tokens (no private key).
    pub fn verify_only(&self) -> bool {
        matches!(self.signing, Signing::VerifyOnly)
    }

    /// A token for `username` at auth revision `revision`, expiring `ttl` after `now`
    /// (etcd's `assign`).
    pub fn sign(
        &self,
        username: &str,
        revision: u64,
        now: SystemTime,
    ) -> Result<String, SignError> {
        let key = match &self.signing {
            Signing::Key(k) => k,
            Signing::VerifyOnly => return Err(SignError::VerifyOnly),
            Signing::WrongCurve => return Err(SignError::InvalidKey),
        };
        let exp = (unix_nanos(now) + self.ttl_nanos).div_euclid(1_000_000_000);
        let header = format!(r#"{{"alg":"{}","typ":"JWT"}}"#, self.name);
        let claims = format!(
            r#"{{"exp":{exp},"revision":{revision},"username":{}}}"#,
            go_json_string(username)
        );
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let message = format!("{}.{}", b64.encode(header), b64.encode(claims));
        let signature = jsonwebtoken::crypto::sign(message.as_bytes(), key, self.alg)
            .map_err(|e| SignError::Failed(e.to_string()))?;
        Ok(format!("{message}.{signature}"))
    }

    /// The user and auth revision `token` was made for, if it is a good token at `now`
    /// (etcd's `info`); None for anything else.
    pub fn verify(&self, token: &str, now: SystemTime) -> Option<(String, u64)> {
        let parts: Vec<&str> = token.split('.').collect();
        let [header, claims, signature] = parts.as_slice() else {
            return None;
        };
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&GO_RAW_URL_BASE64.decode(header).ok()?).ok()?;
        // Go decodes the first JSON value of the claims and ignores what follows.
        let claims_bytes = GO_RAW_URL_BASE64.decode(claims).ok()?;
        let claims: serde_json::Map<String, serde_json::Value> =
            match serde_json::Deserializer::from_slice(&claims_bytes)
                .into_iter::<serde_json::Value>()
                .next()?
                .ok()?
            {
                serde_json::Value::Object(m) => m,
                serde_json::Value::Null => serde_json::Map::new(),
                _ => return None,
            };
        if header.get("alg").and_then(|a| a.as_str()) != Some(self.name) {
            return None;
        }
        let now_secs = i64::try_from(unix_nanos(now).div_euclid(1_000_000_000)).unwrap_or(i64::MAX);
        if !times_valid(&claims, now_secs) {
            return None;
        }
        let key = self.verifying.as_ref()?;
        // Go accepts stray bits after the last character; jsonwebtoken wants the
        // canonical text of the same bytes.
        let signature = GO_RAW_URL_BASE64.decode(signature).ok()?;
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature);
        let signed = &token[..token.rfind('.')?];
        if !jsonwebtoken::crypto::verify(&signature, signed.as_bytes(), key, self.alg)
            .unwrap_or(false)
        {
            return None;
        }
        let username = claims.get("username")?.as_str()?.to_string();
        let revision = claims.get("revision")?.as_f64()?;
        // Go's uint64(float64): whole part; negatives do not name a revision.
        Some((username, revision.max(0.0) as u64))
    }
}

/// Go's `base64.RawURLEncoding` when decoding: no padding, stray bits allowed.
const GO_RAW_URL_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    base64::engine::GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireNone),
);

/// Nanoseconds since the Unix epoch (negative before it).
fn unix_nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// golang-jwt v4's `MapClaims.Valid` at `now` (Unix seconds): `exp` after now, `iat`
/// and `nbf` not after it, each only when present; 0 counts as absent; a value that is
/// not a number fails.
fn times_valid(claims: &serde_json::Map<String, serde_json::Value>, now: i64) -> bool {
    let check = |name: &str, ok: fn(i64, i64) -> bool| match claims.get(name) {
        None => true,
        Some(v) => match v.as_f64() {
            Some(0.0) => true,
            Some(f) => ok(now, go_whole_seconds(f)),
            None => false,
        },
    };
    check("exp", |now, exp| now < exp)
        && check("iat", |now, iat| now >= iat)
        && check("nbf", |now, nbf| now >= nbf)
}

/// The whole second golang-jwt reads a numeric date as (the floor; outside int64 Go's
/// conversion gives its minimum).
fn go_whole_seconds(f: f64) -> i64 {
    let whole = f.trunc();
    if !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&whole) {
        return i64::MIN;
    }
    f.floor() as i64
}

/// `s` as Go's `json.Marshal` writes a string (HTML characters and the line and
/// paragraph separators escaped).
fn go_json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string())
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// etcd's `rsaKey`: the private key when given (a public key given too must match as
/// etcd compares), else the public key alone (verify-only), else "missing key data".
fn rsa_keys(private: &[u8], public: &[u8]) -> Result<(Signing, Option<DecodingKey>), OptionsError> {
    let private = match private.is_empty() {
        true => None,
        false => Some(keys::rsa_private(private)?),
    };
    let public = match public.is_empty() {
        true => None,
        false => Some(keys::rsa_public(public)?),
    };
    let decoding = |k: &rsa::RsaPublicKey| {
        DecodingKey::from_rsa_raw_components(&k.n().to_bytes_be(), &k.e().to_bytes_be())
    };
    // The verifier refuses larger moduli: such a key would sign tokens no member takes.
    let bits = |k: &rsa::RsaPublicKey| rsa::traits::PublicKeyParts::n(k).bits();
    let too_large = private
        .as_ref()
        .map(|k| k.to_public_key())
        .iter()
        .chain(public.iter())
        .any(|k| bits(k) > MAX_RSA_BITS);
    if too_large {
        return Err(OptionsError::new(format!(
            "RSA keys over {MAX_RSA_BITS} bits are not supported yet by oxcd"
        )));
    }
    match (private, public) {
        (None, None) => Err(OptionsError::new(MISSING_KEY)),
        (None, Some(public)) => Ok((Signing::VerifyOnly, Some(decoding(&public)))),
        (Some(private), public) => {
            if public
                .as_ref()
                .is_some_and(|p| keys::rsa_mismatch(&private, p))
            {
                return Err(OptionsError::new(KEY_MISMATCH));
            }
            let der = private
                .to_pkcs1_der()
                .map_err(|e| OptionsError::new(format!("cannot encode the RSA key: {e}")))?;
            Ok((
                Signing::Key(EncodingKey::from_rsa_der(der.as_bytes())),
                Some(decoding(&private.to_public_key())),
            ))
        }
    }
}

/// The largest RSA modulus the verifier takes.
const MAX_RSA_BITS: usize = 4096;

/// etcd's `ecKey`, as [`rsa_keys`]; a key on another curve than `curve` (the
/// method's) is accepted, as etcd accepts it, and then signs and verifies nothing.
fn ec_keys(
    curve: Curve,
    private: &[u8],
    public: &[u8],
) -> Result<(Signing, Option<DecodingKey>), OptionsError> {
    let private = match private.is_empty() {
        true => None,
        false => Some(keys::ec_private(private)?),
    };
    let public = match public.is_empty() {
        true => None,
        false => Some(keys::ec_public(public)?),
    };
    match (private, public) {
        (None, None) => Err(OptionsError::new(MISSING_KEY)),
        (None, Some(public)) => {
            let verifying =
                (public.curve == curve).then(|| DecodingKey::from_ec_der(&public.point));
            Ok((Signing::VerifyOnly, verifying))
        }
        (Some(private), public) => {
            if public
                .as_ref()
                .is_some_and(|p| keys::ec_mismatch(&private, p))
            {
                return Err(OptionsError::new(KEY_MISMATCH));
            }
            match (&private.usable, private.curve == curve) {
                (Some((pkcs8, point)), true) => Ok((
                    Signing::Key(EncodingKey::from_ec_der(pkcs8)),
                    Some(DecodingKey::from_ec_der(point)),
                )),
                _ => Ok((Signing::WrongCurve, None)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
