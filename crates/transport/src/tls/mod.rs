//! TLS settings as etcd names them, and the rustls configurations built from them.
//!
//! [`TlsInfo`] is etcd's `transport.TLSInfo`: the files of one side (client port or
//! peer port) and what to check of the other side. [`ServerTls`] and [`ClientTls`] are
//! the configurations a listener and a dialer use; both re-read their files when they
//! change ([`reload`]).

mod ciphers;
mod client;
mod pem;
mod reload;
mod server;
mod verify;

pub use verify::{HostMismatch, cert_names, common_name, valid_for_host, valid_for_host_of};

use std::path::PathBuf;
use std::sync::Arc;

pub use ciphers::{GO_CIPHER_SUITES, supported_cipher_suites};
pub use client::ClientTls;
pub use server::ServerTls;

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

impl TlsVersion {
    /// Parses etcd's names (`TLS1.2`, `TLS1.3`); "" is `None`.
    pub fn parse(s: &str) -> Result<Option<TlsVersion>, TlsError> {
        match s {
            "" => Ok(None),
            "TLS1.2" => Ok(Some(TlsVersion::Tls12)),
            "TLS1.3" => Ok(Some(TlsVersion::Tls13)),
            other => Err(TlsError(format!(
                "unexpected TLS version {other:?} (must be one of: TLS1.2, TLS1.3)"
            ))),
        }
    }
}

/// Protocol choices shared by every TLS port of a member (`--cipher-suites`,
/// `--tls-min-version`, `--tls-max-version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// Go's names of the TLS 1.2 cipher suites allowed; empty: every suite oxcd has.
    /// (As in Go, TLS 1.3 suites are not configurable: all of them stay on.)
    pub cipher_suites: Vec<String>,
    /// The lowest version accepted (etcd's default: TLS 1.2).
    pub min_version: TlsVersion,
    /// The highest version accepted; `None`: the newest (TLS 1.3).
    pub max_version: Option<TlsVersion>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            cipher_suites: Vec::new(),
            min_version: TlsVersion::Tls12,
            max_version: None,
        }
    }
}

impl TlsOptions {
    /// The rustls provider with the chosen suites; an unknown or unsupported name is
    /// an error naming it and listing what is supported.
    pub fn provider(&self) -> Result<Arc<rustls::crypto::CryptoProvider>, TlsError> {
        let mut p = rustls::crypto::ring::default_provider();
        if !self.cipher_suites.is_empty() {
            let mut chosen: Vec<rustls::SupportedCipherSuite> = p
                .cipher_suites
                .iter()
                .filter(|s| matches!(s, rustls::SupportedCipherSuite::Tls13(_)))
                .copied()
                .collect();
            for name in &self.cipher_suites {
                if let Some(s) = ciphers::lookup(name)? {
                    chosen.push(s);
                }
            }
            p.cipher_suites = chosen;
        }
        Ok(Arc::new(p))
    }

    /// The protocol versions allowed.
    pub fn versions(&self) -> Vec<&'static rustls::SupportedProtocolVersion> {
        let max = self.max_version.unwrap_or(TlsVersion::Tls13);
        let mut v = Vec::new();
        if self.min_version <= TlsVersion::Tls13 && max >= TlsVersion::Tls13 {
            v.push(&rustls::version::TLS13);
        }
        if self.min_version <= TlsVersion::Tls12 && max >= TlsVersion::Tls12 {
            v.push(&rustls::version::TLS12);
        }
        v
    }

    /// etcd's checks of the versions and suites together.
    pub fn validate(&self) -> Result<(), TlsError> {
        if let Some(max) = self.max_version
            && self.min_version > max
        {
            return Err(TlsError(format!(
                "min version ({}) is greater than max version ({})",
                name(self.min_version),
                name(max)
            )));
        }
        if self.min_version == TlsVersion::Tls13 && !self.cipher_suites.is_empty() {
            return Err(TlsError(
                "cipher suites cannot be configured when only TLS1.3 is enabled".into(),
            ));
        }
        self.provider().map(|_| ())
    }
}

fn name(v: TlsVersion) -> &'static str {
    match v {
        TlsVersion::Tls12 => "TLS1.2",
        TlsVersion::Tls13 => "TLS1.3",
    }
}

/// The TLS files and checks of one side of a member (etcd's `transport.TLSInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsInfo {
    /// The certificate this side presents (`--cert-file`, `--peer-cert-file`).
    pub cert_file: Option<PathBuf>,
    /// Its key (`--key-file`, `--peer-key-file`).
    pub key_file: Option<PathBuf>,
    /// The certificate presented when this side dials, if not `cert_file`
    /// (`--peer-client-cert-file`).
    pub client_cert_file: Option<PathBuf>,
    /// Its key (`--peer-client-key-file`).
    pub client_key_file: Option<PathBuf>,
    /// The CAs that certificates of the other side must chain to
    /// (`--trusted-ca-file`, `--peer-trusted-ca-file`).
    pub trusted_ca_file: Option<PathBuf>,
    /// Require and verify the other side's certificate (`--client-cert-auth`,
    /// `--peer-client-cert-auth`).
    pub client_cert_auth: bool,
    /// Revoked certificates (`--client-crl-file`, `--peer-crl-file`).
    pub crl_file: Option<PathBuf>,
    /// Common names a client certificate may have (`--peer-cert-allowed-cn`).
    pub allowed_cn: Vec<String>,
    /// Host names a client certificate must be valid for
    /// (`--client-cert-allowed-hostname`, `--peer-cert-allowed-hostname`).
    pub allowed_hostnames: Vec<String>,
    /// The certificate is self-signed (auto-TLS): who dials with this info does not
    /// verify the server's certificate, as etcd.
    pub self_signed: bool,
    /// Dialing only: accept any server certificate (`--insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
    /// Versions and cipher suites.
    pub options: TlsOptions,
}

impl TlsInfo {
    /// Neither a certificate nor a key given (etcd's `TLSInfo.Empty`): a CA or CRL
    /// alone does not make a side TLS.
    pub fn is_empty(&self) -> bool {
        self.cert_file.is_none() && self.key_file.is_none()
    }

    /// Whether the other side must present a certificate. As etcd, a trusted CA file
    /// alone asks for and verifies one.
    pub fn requires_client_cert(&self) -> bool {
        self.client_cert_auth || self.trusted_ca_file.is_some()
    }
}

/// A TLS setting that cannot be used, with the message to print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);
