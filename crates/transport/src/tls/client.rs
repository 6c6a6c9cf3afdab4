//! The TLS configuration of a dialer: the CAs a server certificate must chain to (or
//! none, for auto-TLS and `--insecure-skip-tls-verify`) and the certificate presented
//! to a server that asks for one.

use std::path::PathBuf;
use std::sync::Arc;

use super::reload::Reloading;
use super::verify::SkipServerVerify;
use super::{TlsError, TlsInfo, pem};

/// A client configuration, rebuilt when its files change.
pub struct ClientTls {
    config: Reloading<rustls::ClientConfig>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Loads `info` for dialing (`what` names the use in logs and errors).
    pub fn new(what: &'static str, info: &TlsInfo) -> Result<ClientTls, TlsError> {
        let (cert, key) = client_pair(info);
        let files: Vec<PathBuf> = [&cert, &key, &info.trusted_ca_file]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let info = info.clone();
        let config = Reloading::new(what, files, Box::new(move || build(&info)))?;
        Ok(ClientTls { config })
    }

    /// The configuration for the next connection.
    pub fn config(&self) -> Arc<rustls::ClientConfig> {
        self.config.get()
    }
}

/// The certificate and key presented when dialing.
fn client_pair(info: &TlsInfo) -> (Option<PathBuf>, Option<PathBuf>) {
    if info.client_cert_file.is_some() || info.client_key_file.is_some() {
        (info.client_cert_file.clone(), info.client_key_file.clone())
    } else {
        (info.cert_file.clone(), info.key_file.clone())
    }
}

fn build(info: &TlsInfo) -> Result<rustls::ClientConfig, TlsError> {
    let provider = info.options.provider()?;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&info.options.versions())
        .map_err(|e| TlsError(format!("TLS versions: {e}")))?;
    let builder = if info.insecure_skip_verify || info.self_signed {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipServerVerify(provider)))
    } else {
        let roots = match &info.trusted_ca_file {
            Some(ca) => pem::ca_bundle(ca)?,
            None => pem::system_roots(),
        };
        builder.with_root_certificates(roots)
    };
    let mut config = match client_pair(info) {
        (Some(cert), Some(key)) => {
            let certs = pem::certs(&cert)?;
            let k = pem::key(&key)?;
            builder.with_client_auth_cert(certs, k).map_err(|e| {
                // Go's bare message, as etcdctl prints it.
                TlsError(match e {
                    rustls::Error::InconsistentKeys(_) => {
                        "tls: private key does not match public key".to_string()
                    }
                    other => other.to_string(),
                })
            })?
        }
        (None, None) => builder.with_no_client_auth(),
        (cert, key) => {
            let show = |p: &Option<PathBuf>| {
                p.as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            };
            return Err(TlsError(format!(
                "KeyFile and CertFile must both be present[key: {}, cert: {}]",
                show(&key),
                show(&cert)
            )));
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}
