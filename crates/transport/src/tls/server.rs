//! The TLS configuration of a listener: its certificate and key, and — with client
//! certificate auth — the CAs, CRL and names a client certificate is checked against.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;

use super::reload::Reloading;
use super::verify::NameCheck;
use super::{TlsError, TlsInfo, pem};

/// ALPN: gRPC over HTTP/2 and `/health`, `/version`, `/metrics` over HTTP/1.1 on the
/// same port, as etcd.
const ALPN: &[&[u8]] = &[b"h2", b"http/1.1"];

/// A server configuration, rebuilt when its files change.
pub struct ServerTls {
    config: Reloading<rustls::ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Loads `info` (`what` names the port in logs and errors). Every file is read and
    /// checked now: an unusable one is an error here, not at the first handshake.
    pub fn new(what: &'static str, info: &TlsInfo) -> Result<ServerTls, TlsError> {
        let files: Vec<PathBuf> = [
            &info.cert_file,
            &info.key_file,
            &info.trusted_ca_file,
            &info.crl_file,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        let info = info.clone();
        let config = Reloading::new(what, files, Box::new(move || build(&info)))?;
        Ok(ServerTls { config })
    }

    /// The configuration for the next handshake.
    pub fn config(&self) -> Arc<rustls::ServerConfig> {
        self.config.get()
    }
}

fn build(info: &TlsInfo) -> Result<rustls::ServerConfig, TlsError> {
    let (Some(cert_file), Some(key_file)) = (&info.cert_file, &info.key_file) else {
        return Err(TlsError(
            "a certificate and a key are required to serve TLS".into(),
        ));
    };
    let provider = info.options.provider()?;
    let certs = pem::certs(cert_file).map_err(|e| pem::in_file(cert_file, e))?;
    pem::check_validity(&certs[0]).map_err(|e| pem::in_file(cert_file, e))?;
    let key = pem::key(key_file).map_err(|e| pem::in_file(key_file, e))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&info.options.versions())
        .map_err(|e| TlsError(format!("TLS versions: {e}")))?;
    let builder = if info.requires_client_cert() {
        let roots = match &info.trusted_ca_file {
            Some(ca) => pem::ca_bundle(ca).map_err(|e| pem::in_file(ca, e))?,
            None => pem::system_roots(),
        };
        let mut v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        if let Some(crl) = &info.crl_file {
            // As etcd, the CRL refuses the certificates it lists, whoever issued it.
            v = v
                .with_crls(pem::crls(crl).map_err(|e| pem::in_file(crl, e))?)
                .allow_unknown_revocation_status()
                .only_check_end_entity_revocation();
        }
        let inner = v
            .build()
            .map_err(|e| TlsError(format!("client certificate verification: {e}")))?;
        builder.with_client_cert_verifier(Arc::new(NameCheck {
            inner,
            allowed_cn: info.allowed_cn.clone(),
            allowed_hostnames: info.allowed_hostnames.clone(),
        }))
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        TlsError(match e {
            rustls::Error::InconsistentKeys(_) => format!(
                "{} and {}: tls: private key does not match public key",
                cert_file.display(),
                key_file.display()
            ),
            other => format!("{}: {other}", key_file.display()),
        })
    })?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
