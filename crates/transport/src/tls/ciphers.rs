//! Cipher suites by Go's names (`--cipher-suites`), as etcd's `tlsutil` accepts them.
//!
//! oxcd's TLS library implements only AEAD suites with forward secrecy. A name etcd
//! knows but oxcd does not implement (CBC, RC4, 3DES, static RSA) is refused at start
//! with the list of what is supported, never silently dropped.

use rustls::SupportedCipherSuite;
use rustls::crypto::ring::cipher_suite as rs;

use super::TlsError;

/// Every name Go (and so etcd 3.5) accepts, and the suite oxcd has for it, if any.
pub static GO_CIPHER_SUITES: &[(&str, Option<&SupportedCipherSuite>)] = &[
    ("TLS_RSA_WITH_RC4_128_SHA", None),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", None),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Some(&rs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Some(&rs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Some(&rs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Some(&rs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        Some(&rs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        Some(&rs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(&rs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(&rs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    // TLS 1.3 suites: Go accepts their names and ignores them (1.3 suites are fixed).
    ("TLS_AES_128_GCM_SHA256", None),
    ("TLS_AES_256_GCM_SHA384", None),
    ("TLS_CHACHA20_POLY1305_SHA256", None),
];

const TLS13_NAMES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The names oxcd implements.
pub fn supported_cipher_suites() -> Vec<&'static str> {
    GO_CIPHER_SUITES
        .iter()
        .filter(|(_, s)| s.is_some())
        .map(|(n, _)| *n)
        .collect()
}

/// The TLS 1.2 suite for a Go name; `None` for a TLS 1.3 name (always on).
pub(super) fn lookup(name: &str) -> Result<Option<SupportedCipherSuite>, TlsError> {
    if TLS13_NAMES.contains(&name) {
        return Ok(None);
    }
    match GO_CIPHER_SUITES.iter().find(|(n, _)| *n == name) {
        Some((_, Some(s))) => Ok(Some(**s)),
        Some((_, None)) => Err(TlsError(format!(
            "cipher suite {name:?} is not implemented by oxcd's TLS library (it has only AEAD suites with forward secrecy); supported: {}",
            supported_cipher_suites().join(", ")
        ))),
        None => Err(TlsError(format!(
            "unexpected TLS cipher suite {name:?}; supported: {}",
            supported_cipher_suites().join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_names() {
        assert!(lookup("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256").is_ok_and(|s| s.is_some()));
        assert!(lookup("TLS_AES_128_GCM_SHA256").is_ok_and(|s| s.is_none()));
        let e = lookup("TLS_RSA_WITH_AES_128_CBC_SHA").unwrap_err().0;
        assert!(e.contains("not implemented"), "{e}");
        assert!(e.contains("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"), "{e}");
        let e = lookup("NOPE").unwrap_err().0;
        assert!(e.starts_with("unexpected TLS cipher suite \"NOPE\""), "{e}");
    }
}
