//! Auto-TLS (`--auto-tls`, `--peer-auto-tls`): a self-signed certificate made on first
//! start under the data dir (`fixtures/client`, `fixtures/peer`, as etcd) and reused on
//! every later start.
//!
//! What it protects against: passive eavesdropping on the link. What it does not:
//! anyone who can reach the port can present a self-signed certificate of their own,
//! so it neither authenticates the member to its clients and peers (they do not verify
//! it) nor keeps an active man in the middle out. Use CA-signed certificates with
//! `--client-cert-auth` / `--peer-client-cert-auth` for that.

use std::io::Write;
use std::path::Path;

use crate::tls::TlsError;
use crate::tls::TlsInfo;

/// Who the certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// The client port: server authentication.
    Client,
    /// The peer port: server and client authentication (a member dials its peers with
    /// the same certificate).
    Peer,
}

/// The certificate and key in `dir` (`cert.pem`, `key.pem`), made now if either is
/// missing: ECDSA P-256, a random 128-bit serial, organization "etcd", valid for
/// `validity_years` from now, for `hosts` (IP addresses and DNS names; ports and the
/// unspecified addresses are dropped).
pub fn self_cert(
    dir: &Path,
    hosts: &[String],
    validity_years: u32,
    usage: Usage,
) -> Result<TlsInfo, TlsError> {
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    let info = |self_signed| TlsInfo {
        cert_file: Some(cert_path.clone()),
        key_file: Some(key_path.clone()),
        self_signed,
        ..TlsInfo::default()
    };
    if cert_path.exists() && key_path.exists() {
        return Ok(info(true));
    }
    if validity_years == 0 {
        return Err(TlsError(
            "--self-signed-cert-validity must be at least 1 (year)".into(),
        ));
    }
    make(dir, &cert_path, &key_path, hosts, validity_years, usage).map_err(|e| {
        TlsError(format!(
            "cannot generate a self-signed certificate in {}: {e}",
            dir.display()
        ))
    })?;
    tracing::info!(cert = %cert_path.display(), key = %key_path.display(), ?hosts, "generated a self-signed certificate (auto TLS)");
    Ok(info(true))
}

fn make(
    dir: &Path,
    cert_path: &Path,
    key_path: &Path,
    hosts: &[String],
    validity_years: u32,
    usage: Usage,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut names: Vec<String> = Vec::new();
    for h in hosts {
        let host = strip_port(h);
        if host.is_empty() || host == "0.0.0.0" || host == "::" {
            continue;
        }
        if !names.iter().any(|n| n == host) {
            names.push(host.to_string());
        }
    }
    let mut params = rcgen::CertificateParams::new(names).map_err(|e| e.to_string())?;
    let mut serial = [0u8; 16];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut serial)
        .map_err(|_| "no randomness for the serial number".to_string())?;
    serial[0] &= 0x7f;
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&serial));
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "etcd");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now;
    params.not_after = now + time::Duration::days(365 * i64::from(validity_years));
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params.extended_key_usages = match usage {
        Usage::Client => vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth],
        Usage::Peer => vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ],
    };
    let key =
        rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    write_private(key_path, key.serialize_pem().as_bytes())?;
    write_private(cert_path, cert.pem().as_bytes())?;
    Ok(())
}

/// `host:port`, `[v6]:port` or a bare host → the host.
fn strip_port(h: &str) -> &str {
    if let Some(rest) = h.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match h.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.chars().all(|c| c.is_ascii_digit()) => {
            host
        }
        _ => h,
    }
}

fn write_private(path: &Path, data: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(data).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().join("fixtures").join("peer");
        let hosts = vec!["127.0.0.1:2380".to_string(), "localhost:2380".to_string()];
        let a = self_cert(&d, &hosts, 1, Usage::Peer).expect("make");
        let pem1 = std::fs::read(a.cert_file.as_ref().expect("cert")).expect("read");
        let b = self_cert(&d, &hosts, 1, Usage::Peer).expect("reuse");
        let pem2 = std::fs::read(b.cert_file.as_ref().expect("cert")).expect("read");
        assert_eq!(pem1, pem2, "reused on restart");
        assert!(a.self_signed);
        let der = rustls_pki_types::CertificateDer::from_pem_slice(&pem1).expect("pem");
        let (_, ips) = {
            let (_, dns, ips) = crate::tls::cert_names(der.as_ref()).expect("names");
            (dns, ips)
        };
        assert_eq!(
            ips,
            vec!["127.0.0.1".parse::<std::net::IpAddr>().expect("ip")]
        );
        assert_eq!(strip_port("[::1]:2380"), "::1");
    }

    use rustls_pki_types::pem::PemObject;
}
