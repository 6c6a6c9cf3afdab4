//! The keys of `--auth-token jwt,...`, read from PEM files as etcd 3.5 reads them: the
//! first PEM block of a file (its label ignored, as Go's `pem.Decode`), then the DER
//! formats golang-jwt v4 tries in its order (RSA private: PKCS#1 then PKCS#8; EC
//! private: SEC1 then PKCS#8; public: SubjectPublicKeyInfo, then a certificate's), with
//! the error texts etcd prints when a key is refused at start.
//!
//! Where Go's own parser message depends on ASN.1 details (a damaged DER body), the text
//! differs from Go's; the common refusals (not PEM, the wrong kind of key, a key of
//! another algorithm, a file that is not a key at all) are etcd's, byte for byte.

use base64::Engine as _;
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::spki::SubjectPublicKeyInfoRef;
use rsa::pkcs8::{ObjectIdentifier, PrivateKeyInfo};
use rsa::{RsaPrivateKey, RsaPublicKey};

/// golang-jwt: a key file without a PEM block.
pub const NOT_PEM: &str = "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key";
/// golang-jwt: a private key of another algorithm given for RS*/PS*.
pub const NOT_RSA_PRIVATE: &str = "key is not a valid RSA private key";
/// golang-jwt: a public key of another algorithm given for RS*/PS*.
pub const NOT_RSA_PUBLIC: &str = "key is not a valid RSA public key";
/// golang-jwt: a private key of another algorithm given for ES*.
pub const NOT_EC_PRIVATE: &str = "key is not a valid ECDSA private key";
/// golang-jwt: a public key of another algorithm given for ES*.
pub const NOT_EC_PUBLIC: &str = "key is not a valid ECDSA public key";
/// Go's x509: a SEC1 EC key where PKCS#8 was tried last.
const USE_EC: &str =
    "x509: failed to parse private key (use ParseECPrivateKey instead for this key format)";
/// Go's x509: a PKCS#1 RSA key where PKCS#8 was tried last.
const USE_PKCS1: &str =
    "x509: failed to parse private key (use ParsePKCS1PrivateKey instead for this key format)";
/// Go's x509: DER that is neither a public key nor a certificate.
const MALFORMED_CERT: &str = "x509: malformed certificate";

/// Why a key file was refused: golang-jwt's and Go's x509 errors, their texts as etcd
/// prints them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No PEM block in the file.
    #[error("{}", NOT_PEM)]
    NotPem,
    /// A private key of another algorithm given for RS*/PS*.
    #[error("{}", NOT_RSA_PRIVATE)]
    NotRsaPrivate,
    /// A public key of another algorithm given for RS*/PS*.
    #[error("{}", NOT_RSA_PUBLIC)]
    NotRsaPublic,
    /// A private key of another algorithm given for ES*.
    #[error("{}", NOT_EC_PRIVATE)]
    NotEcPrivate,
    /// A public key of another algorithm given for ES*.
    #[error("{}", NOT_EC_PUBLIC)]
    NotEcPublic,
    /// A SEC1 EC key where PKCS#8 was tried last.
    #[error("{}", USE_EC)]
    UseEc,
    /// A PKCS#1 RSA key where PKCS#8 was tried last.
    #[error("{}", USE_PKCS1)]
    UsePkcs1,
    /// DER that is neither a public key nor a certificate.
    #[error("{}", MALFORMED_CERT)]
    MalformedCert,
    /// DER that is no PKCS#8 structure.
    #[error("asn1: structure error: {0}")]
    Pkcs8Structure(rsa::pkcs8::Error),
    /// PKCS#8 holding an RSA key that does not read.
    #[error("x509: failed to parse RSA private key embedded in PKCS#8: {0}")]
    Pkcs8Rsa(rsa::pkcs1::Error),
    /// PKCS#8 holding an EC key that does not read.
    #[error("x509: failed to parse EC private key embedded in PKCS#8: {0}")]
    Pkcs8Ec(Box<KeyError>),
    /// PKCS#8 holding a key of an algorithm Go does not know.
    #[error("x509: PKCS#8 wrapping contained private key with unknown algorithm: {0}")]
    Pkcs8Algorithm(ObjectIdentifier),
    /// DER that is no SEC1 EC private key.
    #[error("x509: failed to parse EC private key: {0}")]
    Sec1(sec1::Error),
    /// An EC private key on a curve Go does not know.
    #[error("x509: unknown elliptic curve")]
    UnknownCurve,
    /// An EC private key whose scalar is not one of its curve.
    #[error("x509: invalid elliptic curve private key value")]
    InvalidEcPrivate,
    /// An EC private key that could not be encoded again as PKCS#8.
    #[error("x509: cannot re-encode the EC private key: {0}")]
    Reencode(rsa::pkcs8::Error),
    /// An RSA public key without the NULL algorithm parameters.
    #[error("x509: RSA key missing NULL parameters")]
    RsaMissingNull,
    /// An RSA public key that does not read.
    #[error("x509: invalid RSA public key")]
    InvalidRsaPublic,
    /// An EC public key without a named curve.
    #[error("x509: invalid ECDSA parameters")]
    InvalidEcParameters,
    /// An EC public key on a curve Go does not know.
    #[error("x509: unsupported elliptic curve")]
    UnsupportedCurve,
    /// An EC public point not on its curve.
    #[error("x509: failed to unmarshal elliptic curve point")]
    BadPoint,
    /// A public key of an algorithm Go does not know.
    #[error("x509: unknown public key algorithm")]
    UnknownPublicAlgorithm,
}

const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const OID_EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const OID_X25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.110");
const OID_DSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10040.4.1");
const OID_P224: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.33");
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const OID_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const OID_P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");

/// The named curves Go's x509 knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    /// P-224: Go reads it; no JWT method signs with it.
    P224,
    /// P-256 (ES256).
    P256,
    /// P-384 (ES384).
    P384,
    /// P-521 (ES512, which oxcd does not make).
    P521,
}

impl Curve {
    fn of(oid: &ObjectIdentifier) -> Option<Curve> {
        [
            (OID_P224, Curve::P224),
            (OID_P256, Curve::P256),
            (OID_P384, Curve::P384),
            (OID_P521, Curve::P521),
        ]
        .into_iter()
        .find_map(|(o, c)| (o == *oid).then_some(c))
    }

    /// The size of a coordinate or scalar, in bytes.
    pub fn size(self) -> usize {
        match self {
            Curve::P224 => 28,
            Curve::P256 => 32,
            Curve::P384 => 48,
            Curve::P521 => 66,
        }
    }
}

/// An EC private key: its curve, the PKCS#8 DER jsonwebtoken signs with and the
/// uncompressed public point (both only for the curves oxcd signs on).
#[derive(Clone)]
pub struct EcPrivate {
    /// The key's curve.
    pub curve: Curve,
    /// PKCS#8 DER of the key and its uncompressed public point (P-256 and P-384).
    pub usable: Option<(Vec<u8>, Vec<u8>)>,
}

/// An EC public key: its curve and uncompressed point (`04 || X || Y`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcPublic {
    /// The key's curve.
    pub curve: Curve,
    /// The uncompressed point.
    pub point: Vec<u8>,
}

impl EcPrivate {
    /// The public point (uncompressed), where oxcd computes it.
    pub fn point(&self) -> Option<&[u8]> {
        self.usable.as_ref().map(|(_, p)| p.as_slice())
    }
}

/// A public key as Go's `ParsePKIXPublicKey` types it.
enum Public {
    Rsa(RsaPublicKey),
    Ec(EcPublic),
    /// Ed25519, X25519, DSA: keys Go reads that no RS/PS/ES method takes.
    Other,
}

/// What PKCS#8 held.
enum Pkcs8 {
    Rsa(Box<RsaPrivateKey>),
    Ec(EcPrivate),
    Other,
}

/// Go's `pem.Decode`: the bytes of the first well-formed PEM block in `data` (any
/// label; headers skipped), or None.
pub fn pem_block(data: &[u8]) -> Option<Vec<u8>> {
    const BEGIN: &[u8] = b"\n-----BEGIN ";
    const END: &[u8] = b"\n-----END ";
    const DASHES: &[u8] = b"-----";
    let mut rest = data;
    loop {
        if let Some(after) = rest.strip_prefix(&BEGIN[1..]) {
            rest = after;
        } else {
            let at = find(rest, BEGIN)?;
            rest = &rest[at + BEGIN.len()..];
        }
        let (type_line, after_type) = line(rest);
        rest = after_type;
        let Some(label) = type_line.strip_suffix(DASHES) else {
            continue;
        };
        // Header lines (`Key: value`) up to the first line without a colon.
        let mut headers = false;
        let mut body = rest;
        loop {
            if body.is_empty() {
                return None;
            }
            let (l, next) = line(body);
            if !l.contains(&b':') {
                break;
            }
            headers = true;
            body = next;
        }
        let (end_at, trailer_at) = if !headers && body.starts_with(&END[1..]) {
            (0, END.len() - 1)
        } else {
            match find(body, END) {
                Some(i) => (i, i + END.len()),
                None => continue,
            }
        };
        let trailer = &body[trailer_at..];
        let want = label.len() + DASHES.len();
        if trailer.len() < want
            || !trailer[..want].starts_with(label)
            || !trailer[..want].ends_with(DASHES)
            || !line(&trailer[want..]).0.is_empty()
        {
            continue;
        }
        let text: Vec<u8> = body[..end_at]
            .iter()
            .copied()
            .filter(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            .collect();
        match GO_STD_BASE64.decode(&text) {
            Ok(bytes) => return Some(bytes),
            Err(_) => continue,
        }
    }
}

/// Go's `base64.StdEncoding` when decoding: padded, extra bits after the last
/// character allowed.
const GO_STD_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::RequireCanonical),
);

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Go's pem `getLine`: the line (trailing spaces, tabs and CR trimmed) and the rest.
fn line(data: &[u8]) -> (&[u8], &[u8]) {
    let (l, rest) = match data.iter().position(|c| *c == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let trimmed = l
        .iter()
        .rposition(|c| !matches!(c, b' ' | b'\t' | b'\r'))
        .map_or(&l[..0], |i| &l[..=i]);
    (trimmed, rest)
}

/// golang-jwt's `ParseRSAPrivateKeyFromPEM`.
pub fn rsa_private(pem: &[u8]) -> Result<RsaPrivateKey, KeyError> {
    let der = pem_block(pem).ok_or(KeyError::NotPem)?;
    if let Ok(key) = RsaPrivateKey::from_pkcs1_der(&der) {
        return Ok(key);
    }
    match pkcs8(&der)? {
        Pkcs8::Rsa(key) => Ok(*key),
        _ => Err(KeyError::NotRsaPrivate),
    }
}

/// golang-jwt's `ParseRSAPublicKeyFromPEM`.
pub fn rsa_public(pem: &[u8]) -> Result<RsaPublicKey, KeyError> {
    let der = pem_block(pem).ok_or(KeyError::NotPem)?;
    match public(&der)? {
        Public::Rsa(key) => Ok(key),
        _ => Err(KeyError::NotRsaPublic),
    }
}

/// golang-jwt's `ParseECPrivateKeyFromPEM`.
pub fn ec_private(pem: &[u8]) -> Result<EcPrivate, KeyError> {
    let der = pem_block(pem).ok_or(KeyError::NotPem)?;
    if let Ok(key) = sec1_private(&der, None) {
        return Ok(key);
    }
    match pkcs8(&der)? {
        Pkcs8::Ec(key) => Ok(key),
        _ => Err(KeyError::NotEcPrivate),
    }
}

/// golang-jwt's `ParseECPublicKeyFromPEM`.
pub fn ec_public(pem: &[u8]) -> Result<EcPublic, KeyError> {
    let der = pem_block(pem).ok_or(KeyError::NotPem)?;
    match public(&der)? {
        Public::Ec(key) => Ok(key),
        _ => Err(KeyError::NotEcPublic),
    }
}

/// etcd's check that a private and a public key given together match, as etcd 3.5
/// writes it: they are refused only when they differ in every part compared (so a
/// different RSA key with the usual exponent passes, and the private key is used).
pub fn rsa_mismatch(private: &RsaPrivateKey, public: &RsaPublicKey) -> bool {
    use rsa::traits::PublicKeyParts;
    private.e() != public.e() && private.n() != public.n()
}

/// As [`rsa_mismatch`], for EC keys: curve, X and Y must all differ.
pub fn ec_mismatch(private: &EcPrivate, public: &EcPublic) -> bool {
    if private.curve == public.curve {
        return false;
    }
    let size = public.curve.size();
    let Some(point) = private.point() else {
        // A private key on a curve oxcd has no arithmetic for: its point is unknown;
        // the curves differ, and a point of one curve is practically never another's.
        return true;
    };
    let (px, py) = coordinates(point, private.curve.size());
    let (qx, qy) = coordinates(&public.point, size);
    px != qx && py != qy
}

/// X and Y of an uncompressed point, without leading zeros (as big integers compare).
fn coordinates(point: &[u8], size: usize) -> (&[u8], &[u8]) {
    let strip = |b: &'_ [u8]| -> usize { b.iter().take_while(|c| **c == 0).count() };
    let body = point.get(1..).unwrap_or_default();
    let (x, y) = body.split_at(size.min(body.len()));
    (&x[strip(x)..], &y[strip(y)..])
}

/// Go's `x509.ParsePKCS8PrivateKey`, with its errors for the formats it recognizes.
fn pkcs8(der: &[u8]) -> Result<Pkcs8, KeyError> {
    let info = match PrivateKeyInfo::try_from(der) {
        Ok(info) => info,
        Err(e) => {
            if sec1_private(der, None).is_ok() {
                return Err(KeyError::UseEc);
            }
            if RsaPrivateKey::from_pkcs1_der(der).is_ok() {
                return Err(KeyError::UsePkcs1);
            }
            return Err(KeyError::Pkcs8Structure(e));
        }
    };
    let oid = info.algorithm.oid;
    if oid == OID_RSA {
        RsaPrivateKey::from_pkcs1_der(info.private_key)
            .map(|k| Pkcs8::Rsa(Box::new(k)))
            .map_err(KeyError::Pkcs8Rsa)
    } else if oid == OID_EC {
        let curve = info
            .algorithm
            .parameters
            .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
        sec1_private(info.private_key, curve.as_ref())
            .map(Pkcs8::Ec)
            .map_err(|e| KeyError::Pkcs8Ec(Box::new(e)))
    } else if oid == OID_ED25519 || oid == OID_X25519 {
        Ok(Pkcs8::Other)
    } else {
        Err(KeyError::Pkcs8Algorithm(oid))
    }
}

/// Go's `x509.ParseECPrivateKey` (SEC1), the curve named by `outer` (PKCS#8's) or by
/// the key itself.
fn sec1_private(der: &[u8], outer: Option<&ObjectIdentifier>) -> Result<EcPrivate, KeyError> {
    let key = sec1::EcPrivateKey::try_from(der).map_err(KeyError::Sec1)?;
    let named = match (outer, key.parameters) {
        (Some(o), _) => Some(*o),
        (None, Some(sec1::EcParameters::NamedCurve(o))) => Some(o),
        (None, None) => None,
    };
    let curve = named
        .as_ref()
        .and_then(Curve::of)
        .ok_or(KeyError::UnknownCurve)?;
    let usable = match curve {
        Curve::P256 => {
            let k = p256::SecretKey::from_slice(key.private_key)
                .map_err(|_| KeyError::InvalidEcPrivate)?;
            Some(ec_usable(&k, k.public_key().to_sec1_bytes().as_ref())?)
        }
        Curve::P384 => {
            let k = p384::SecretKey::from_slice(key.private_key)
                .map_err(|_| KeyError::InvalidEcPrivate)?;
            Some(ec_usable(&k, k.public_key().to_sec1_bytes().as_ref())?)
        }
        Curve::P224 | Curve::P521 => {
            let zero = key.private_key.iter().all(|b| *b == 0);
            if zero || key.private_key.len() > curve.size() {
                return Err(KeyError::InvalidEcPrivate);
            }
            None
        }
    };
    Ok(EcPrivate { curve, usable })
}

/// PKCS#8 DER and the uncompressed public point of a key oxcd signs with.
fn ec_usable(
    key: &impl rsa::pkcs8::EncodePrivateKey,
    point: &[u8],
) -> Result<(Vec<u8>, Vec<u8>), KeyError> {
    let der = key.to_pkcs8_der().map_err(KeyError::Reencode)?;
    Ok((der.as_bytes().to_vec(), point.to_vec()))
}

/// Go's `x509.ParsePKIXPublicKey`, then the public key of a certificate (golang-jwt's
/// fallback); the certificate parser's error when neither reads.
fn public(der: &[u8]) -> Result<Public, KeyError> {
    match SubjectPublicKeyInfoRef::try_from(der) {
        Ok(spki) => spki_key(&spki),
        Err(_) => {
            let (_, cert) =
                x509_parser::parse_x509_certificate(der).map_err(|_| KeyError::MalformedCert)?;
            let raw = cert.tbs_certificate.subject_pki.raw;
            let spki =
                SubjectPublicKeyInfoRef::try_from(raw).map_err(|_| KeyError::MalformedCert)?;
            spki_key(&spki)
        }
    }
}

/// The key a SubjectPublicKeyInfo holds, typed as Go types it.
fn spki_key(spki: &SubjectPublicKeyInfoRef<'_>) -> Result<Public, KeyError> {
    let oid = spki.algorithm.oid;
    let bits = spki.subject_public_key.as_bytes();
    if oid == OID_RSA {
        let null = spki
            .algorithm
            .parameters
            .is_some_and(|p| p.is_null() || p.value().is_empty());
        if !null {
            return Err(KeyError::RsaMissingNull);
        }
        bits.and_then(|b| RsaPublicKey::from_pkcs1_der(b).ok())
            .map(Public::Rsa)
            .ok_or(KeyError::InvalidRsaPublic)
    } else if oid == OID_EC {
        let curve = spki
            .algorithm
            .parameters
            .and_then(|p| p.decode_as::<ObjectIdentifier>().ok())
            .ok_or(KeyError::InvalidEcParameters)?;
        let curve = Curve::of(&curve).ok_or(KeyError::UnsupportedCurve)?;
        let point = bits.unwrap_or_default();
        let on_curve = point.len() == 1 + 2 * curve.size()
            && point.first() == Some(&4)
            && match curve {
                Curve::P256 => p256::PublicKey::from_sec1_bytes(point).is_ok(),
                Curve::P384 => p384::PublicKey::from_sec1_bytes(point).is_ok(),
                Curve::P224 | Curve::P521 => true,
            };
        if !on_curve {
            return Err(KeyError::BadPoint);
        }
        Ok(Public::Ec(EcPublic {
            curve,
            point: point.to_vec(),
        }))
    } else if oid == OID_ED25519 || oid == OID_X25519 || oid == OID_DSA {
        Ok(Public::Other)
    } else {
        Err(KeyError::UnknownPublicAlgorithm)
    }
}

impl std::fmt::Debug for EcPrivate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EcPrivate")
            .field("curve", &self.curve)
            .finish_non_exhaustive()
    }
}
