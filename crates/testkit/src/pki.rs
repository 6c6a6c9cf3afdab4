//! Certificates for TLS tests: a CA that issues server, peer and client certificates
//! (also expired and revoked ones) and CRLs, written as PEM files into a directory.
//! Keys are ECDSA P-256, as etcd's own test certificates are.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, RevokedCertParams,
    SerialNumber,
};
use time::{Duration, OffsetDateTime};

/// A certificate and its key, as files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8).
    pub key: PathBuf,
    serial: u64,
}

/// What to put in a certificate.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    /// File name stem in the directory.
    pub name: &'a str,
    /// Subject common name.
    pub cn: &'a str,
    /// IP addresses and DNS names.
    pub sans: &'a [&'a str],
    /// Valid for clients (client auth).
    pub client: bool,
    /// Valid for servers (server auth).
    pub server: bool,
    /// Already expired (valid from two days ago until yesterday).
    pub expired: bool,
}

impl<'a> Spec<'a> {
    /// A server and client certificate for `127.0.0.1` and `localhost`, named `name`.
    pub fn member(name: &'a str) -> Spec<'a> {
        Spec {
            name,
            cn: name,
            sans: &["127.0.0.1", "localhost"],
            client: true,
            server: true,
            expired: false,
        }
    }

    /// A client-only certificate with common name `cn`.
    pub fn client(name: &'a str, cn: &'a str) -> Spec<'a> {
        Spec {
            name,
            cn,
            sans: &[],
            client: true,
            server: false,
            expired: false,
        }
    }
}

/// A certificate authority writing into one directory.
pub struct Ca {
    dir: PathBuf,
    name: String,
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (PEM), for `--trusted-ca-file` / `--cacert`.
    pub cert: PathBuf,
    next_serial: std::sync::atomic::AtomicU64,
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Ca {
    /// A new CA called `name`, its certificate at `<dir>/<name>.pem`.
    pub fn new(dir: &Path, name: &str) -> Result<Ca, String> {
        std::fs::create_dir_all(dir).map_err(fail)?;
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(fail)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::days(30);
        params.not_after = now + Duration::days(3650);
        let cert = params.self_signed(&key).map_err(fail)?;
        let cert_path = dir.join(format!("{name}.pem"));
        std::fs::write(&cert_path, cert.pem()).map_err(fail)?;
        Ok(Ca {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            issuer: Issuer::new(params, key),
            cert: cert_path,
            next_serial: std::sync::atomic::AtomicU64::new(1000),
        })
    }

    /// Issues a certificate as `spec` says, written as `<name>.pem` and `<name>-key.pem`.
    pub fn issue(&self, spec: &Spec<'_>) -> Result<CertFiles, String> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(fail)?;
        let sans: Vec<String> = spec.sans.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).map_err(fail)?;
        params.distinguished_name.push(DnType::CommonName, spec.cn);
        params
            .distinguished_name
            .push(DnType::OrganizationName, self.name.as_str());
        let serial = self
            .next_serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        params.serial_number = Some(SerialNumber::from(serial));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        if spec.server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if spec.client {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        let now = OffsetDateTime::now_utc();
        if spec.expired {
            params.not_before = now - Duration::days(2);
            params.not_after = now - Duration::days(1);
        } else {
            params.not_before = now - Duration::days(1);
            params.not_after = now + Duration::days(365);
        }
        let cert = params.signed_by(&key, &self.issuer).map_err(fail)?;
        let files = CertFiles {
            cert: self.dir.join(format!("{}.pem", spec.name)),
            key: self.dir.join(format!("{}-key.pem", spec.name)),
            serial,
        };
        std::fs::write(&files.cert, cert.pem()).map_err(fail)?;
        std::fs::write(&files.key, key.serialize_pem()).map_err(fail)?;
        Ok(files)
    }

    /// A CRL revoking `revoked`, written as `<name>`.
    pub fn crl(&self, name: &str, revoked: &[&CertFiles]) -> Result<PathBuf, String> {
        let now = OffsetDateTime::now_utc();
        let params = CertificateRevocationListParams {
            this_update: now - Duration::hours(1),
            next_update: now + Duration::days(30),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|c| RevokedCertParams {
                    serial_number: SerialNumber::from(c.serial),
                    revocation_time: now - Duration::hours(1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.issuer).map_err(fail)?;
        let path = self.dir.join(name);
        std::fs::write(&path, crl.pem().map_err(fail)?).map_err(fail)?;
        Ok(path)
    }
}
