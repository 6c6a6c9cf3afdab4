//! Reading certificates, keys, CA bundles and CRLs from files, with the errors Go's
//! `crypto/tls` and `crypto/x509` give for the same files (etcd prints those).

use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};

use super::TlsError;

/// Reads a file, with Go's `open <path>: <reason>` on failure.
pub(super) fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError(oxcd_go::os::path_error("open", path, &e)))
}

/// The certificates of a PEM file, in order; at least one.
pub(super) fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let data = read(path)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&data)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(TlsError(
            "tls: failed to find any PEM data in certificate input".into(),
        ));
    }
    if certs
        .iter()
        .any(|c| x509_parser::parse_x509_certificate(c.as_ref()).is_err())
    {
        return Err(TlsError("x509: malformed certificate".into()));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub(super) fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let data = read(path)?;
    PrivateKeyDer::from_pem_slice(&data)
        .map_err(|_| TlsError("tls: failed to find any PEM data in key input".into()))
}

/// A CA bundle: at least one certificate.
pub(super) fn ca_bundle(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let data = read(path)?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&data).filter_map(Result::ok) {
        roots
            .add(c)
            .map_err(|_| TlsError("x509: malformed certificate".into()))?;
    }
    if roots.is_empty() {
        return Err(TlsError(
            "no certificate found in the trusted CA file".into(),
        ));
    }
    Ok(roots)
}

/// The system's CA bundle (`SSL_CERT_FILE`, else Debian's), for dialing without a CA
/// file; empty when there is none.
pub(super) fn system_roots() -> rustls::RootCertStore {
    let path = std::env::var_os("SSL_CERT_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/etc/ssl/certs/ca-certificates.crt".into());
    let mut roots = rustls::RootCertStore::empty();
    if let Ok(data) = std::fs::read(path) {
        let certs = CertificateDer::pem_slice_iter(&data).filter_map(Result::ok);
        roots.add_parsable_certificates(certs);
    }
    roots
}

/// A CRL file, PEM or DER (Go's `x509.ParseCRL` takes both).
pub(super) fn crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let data = read(path)?;
    let pem: Vec<_> = CertificateRevocationListDer::pem_slice_iter(&data)
        .filter_map(Result::ok)
        .collect();
    let list = if pem.is_empty() {
        vec![CertificateRevocationListDer::from(data)]
    } else {
        pem
    };
    for crl in &list {
        if let Err(e) = x509_parser::parse_x509_crl(crl.as_ref()) {
            return Err(TlsError(format!("x509: malformed CRL ({e})")));
        }
    }
    Ok(list)
}

/// Names the file an error is about (unless the error already does).
pub(super) fn in_file(path: &Path, e: TlsError) -> TlsError {
    if e.0.contains(&path.display().to_string()) {
        e
    } else {
        TlsError(format!("{}: {}", path.display(), e.0))
    }
}

/// Refuses a leaf certificate outside its validity period: a member serving an
/// expired certificate would be refused by every client and peer.
pub(super) fn check_validity(leaf: &CertificateDer<'_>) -> Result<(), TlsError> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf.as_ref()) else {
        return Ok(());
    };
    let v = cert.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > v.not_after {
        return Err(TlsError(format!(
            "the certificate expired at {} (it is valid from {} to {}); renew it",
            v.not_after, v.not_before, v.not_after
        )));
    }
    if now < v.not_before {
        return Err(TlsError(format!(
            "the certificate is not valid before {}; check the clock",
            v.not_before
        )));
    }
    Ok(())
}
