//! Certificate checks beyond the chain: allowed common names and host names of client
//! certificates (etcd's `--peer-cert-allowed-cn`, `--*-cert-allowed-hostname`), and
//! dialing without verifying the server (auto-TLS, `--insecure-skip-tls-verify`).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// A client-certificate verifier that also checks the leaf's names.
#[derive(Debug)]
pub(super) struct NameCheck {
    pub(super) inner: Arc<dyn ClientCertVerifier>,
    pub(super) allowed_cn: Vec<String>,
    pub(super) allowed_hostnames: Vec<String>,
}

/// The subject common name and the DNS and IP names of a certificate.
pub fn cert_names(der: &[u8]) -> Option<(String, Vec<String>, Vec<std::net::IpAddr>)> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => dns.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(b) => match b.len() {
                    4 => ips.push(std::net::IpAddr::from(<[u8; 4]>::try_from(*b).ok()?)),
                    16 => ips.push(std::net::IpAddr::from(<[u8; 16]>::try_from(*b).ok()?)),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    Some((cn, dns, ips))
}

/// Go's `Certificate.VerifyHostname`: an IP against the IP names, a host name against
/// the DNS names (case-insensitively, `*.` matching one leftmost label).
pub fn valid_for_host(dns: &[String], ips: &[std::net::IpAddr], host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return ips.contains(&ip);
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    dns.iter().any(|d| {
        let d = d.to_ascii_lowercase();
        match d.strip_prefix("*.") {
            Some(rest) => host
                .split_once('.')
                .is_some_and(|(first, tail)| !first.is_empty() && tail == rest),
            None => d == host,
        }
    })
}

impl ClientCertVerifier for NameCheck {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let ok = match self
            .inner
            .verify_client_cert(end_entity, intermediates, now)
        {
            Ok(ok) => ok,
            Err(e) => {
                // The listener logs the address; this names the certificate.
                if let Some((cn, dns, ips)) = cert_names(end_entity.as_ref()) {
                    tracing::warn!(cn, dns_names = ?dns, ip_addresses = ?ips, "refused a client certificate: {e}");
                }
                return Err(e);
            }
        };
        if self.allowed_cn.is_empty() && self.allowed_hostnames.is_empty() {
            return Ok(ok);
        }
        let Some((cn, dns, ips)) = cert_names(end_entity.as_ref()) else {
            return Err(Error::General("client certificate cannot be parsed".into()));
        };
        if !self.allowed_cn.is_empty() && !self.allowed_cn.contains(&cn) {
            return Err(Error::General(format!(
                "client certificate authentication failed: CN {cn:?} is not allowed (allowed: {:?})",
                self.allowed_cn
            )));
        }
        if !self.allowed_hostnames.is_empty()
            && !self
                .allowed_hostnames
                .iter()
                .any(|h| valid_for_host(&dns, &ips, h))
        {
            return Err(Error::General(format!(
                "client certificate authentication failed: the certificate (CN {cn:?}) is not valid for any allowed hostname {:?}",
                self.allowed_hostnames
            )));
        }
        Ok(ok)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Accepts any server certificate (the handshake's signatures are still checked, so
/// the connection is encrypted to whoever holds the key — but anyone may hold it).
#[derive(Debug)]
pub(super) struct SkipServerVerify(pub(super) Arc<CryptoProvider>);

impl ServerCertVerifier for SkipServerVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The subject's common name, as Go reads it (the last CN attribute), if it has one that
/// is not empty: the user a client certificate names when etcd's CN auth applies.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().last()?.as_str().ok()?;
    (!cn.is_empty()).then(|| cn.to_string())
}

/// Why a peer's certificate does not fit the address its connection comes from.
#[derive(Debug, thiserror::Error)]
pub enum HostMismatch {
    /// The certificate does not parse.
    #[error("tls: the peer's certificate cannot be parsed")]
    Unparsable,
    /// It names addresses or hosts, none of them the connection's.
    #[error(
        "tls: {remote} does not match any of the peer certificate's IP addresses {ips:?} or DNS names {dns:?} (CN {cn:?})"
    )]
    NotNamed {
        /// Where the connection comes from.
        remote: std::net::IpAddr,
        /// The certificate's IP addresses.
        ips: Vec<std::net::IpAddr>,
        /// Its DNS names.
        dns: Vec<String>,
        /// Its common name.
        cn: String,
    },
}

/// etcd's SAN check of a peer's client certificate (`checkSAN`): a certificate that
/// names IP addresses or hosts must name the address the connection comes from (a
/// host name counts if it resolves to it). One naming neither passes.
pub fn valid_for_host_of(der: &[u8], remote: std::net::IpAddr) -> Result<(), HostMismatch> {
    let Some((cn, dns, ips)) = cert_names(der) else {
        return Err(HostMismatch::Unparsable);
    };
    if dns.is_empty() && ips.is_empty() {
        return Ok(());
    }
    if ips.contains(&remote) {
        return Ok(());
    }
    for host in &dns {
        if host.eq_ignore_ascii_case("localhost") && remote.is_loopback() {
            return Ok(());
        }
        use std::net::ToSocketAddrs;
        if let Ok(addrs) = (host.as_str(), 0).to_socket_addrs()
            && addrs.into_iter().any(|a| a.ip() == remote)
        {
            return Ok(());
        }
    }
    Err(HostMismatch::NotNamed {
        remote,
        ips,
        dns,
        cn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_like_go() {
        let dns = vec!["*.example.com".to_string(), "m1.local".to_string()];
        let ips = vec!["127.0.0.1".parse().expect("ip")];
        assert!(valid_for_host(&dns, &ips, "a.example.com"));
        assert!(!valid_for_host(&dns, &ips, "a.b.example.com"));
        assert!(valid_for_host(&dns, &ips, "M1.local"));
        assert!(valid_for_host(&dns, &ips, "127.0.0.1"));
        assert!(!valid_for_host(&dns, &ips, "127.0.0.2"));
    }
}
