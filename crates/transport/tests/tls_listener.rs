//! A TLS listener and the dialer on loopback: handshakes, client certificates, plain
//! clients on a TLS port, and certificates re-read after a rotation.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use oxcd_testkit::pki::{Ca, CertFiles, Spec};
use oxcd_transport::TlsInfo;
use oxcd_transport::dial::{ClientConn, Dialer};
use oxcd_transport::listen::{self, Bind, Listener};
use oxcd_transport::tls::{ClientTls, ServerTls};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn server_info(c: &CertFiles) -> TlsInfo {
    TlsInfo {
        cert_file: Some(c.cert.clone()),
        key_file: Some(c.key.clone()),
        ..TlsInfo::default()
    }
}

/// A TLS echo server on a free loopback port; returns its address.
async fn echo_server(info: &TlsInfo) -> (String, Arc<ServerTls>) {
    let tls = Arc::new(ServerTls::new("test", info).expect("server tls"));
    let socket = listen::bind(&Bind::Tcp("127.0.0.1:0".parse().expect("addr"))).expect("bind");
    let mut l = Listener::tls(socket, tls.clone(), None, "client").expect("listener");
    let addr = l.local_addr().to_string();
    tokio::spawn(async move {
        loop {
            let (mut c, _) = l.accept().await;
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = c.read(&mut buf).await {
                    if n == 0 || c.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, tls)
}

async fn round_trip(addr: &str, client: TlsInfo) -> Result<Vec<u8>, String> {
    let tls = ClientTls::new("test", &client).map_err(|e| e.0)?;
    let dialer = Dialer::new(Some(Arc::new(tls)));
    let uri: http::Uri = format!("https://{addr}").parse().expect("uri");
    let mut c = dialer.connect(&uri).await.map_err(|e| e.to_string())?;
    let leaf = match &c {
        ClientConn::Tls(s) => s
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .unwrap_or_default(),
        ClientConn::Plain(_) => return Err("not TLS".into()),
    };
    c.write_all(b"ping").await.map_err(|e| e.to_string())?;
    let mut buf = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut buf))
        .await
        .map_err(|_| "timed out".to_string())?
        .map_err(|e| e.to_string())?;
    assert_eq!(&buf, b"ping");
    Ok(leaf)
}

fn ca_info(ca: &Path) -> TlsInfo {
    TlsInfo {
        trusted_ca_file: Some(ca.to_path_buf()),
        ..TlsInfo::default()
    }
}

#[tokio::test]
async fn handshake_and_echo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "ca").expect("ca");
    let server = ca.issue(&Spec::member("server")).expect("server");
    let (addr, _) = echo_server(&server_info(&server)).await;
    round_trip(&addr, ca_info(&ca.cert))
        .await
        .expect("round trip");
    // Another CA's client does not trust the server.
    let other = Ca::new(dir.path(), "other").expect("other");
    let e = round_trip(&addr, ca_info(&other.cert)).await.unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
}

#[tokio::test]
async fn client_certificates_are_required_and_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "ca").expect("ca");
    let server = ca.issue(&Spec::member("server")).expect("server");
    let client = ca.issue(&Spec::client("client", "root")).expect("client");
    let revoked = ca.issue(&Spec::client("revoked", "root")).expect("revoked");
    let crl = ca.crl("crl.pem", &[&revoked]).expect("crl");
    let info = TlsInfo {
        trusted_ca_file: Some(ca.cert.clone()),
        client_cert_auth: true,
        crl_file: Some(crl),
        ..server_info(&server)
    };
    let (addr, _) = echo_server(&info).await;
    let with = |c: &CertFiles| TlsInfo {
        cert_file: Some(c.cert.clone()),
        key_file: Some(c.key.clone()),
        ..ca_info(&ca.cert)
    };
    round_trip(&addr, with(&client))
        .await
        .expect("a good certificate");
    assert!(round_trip(&addr, ca_info(&ca.cert)).await.is_err(), "none");
    assert!(round_trip(&addr, with(&revoked)).await.is_err(), "revoked");
}

#[tokio::test]
async fn a_plain_http_client_is_told_it_talks_to_a_tls_port() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "ca").expect("ca");
    let server = ca.issue(&Spec::member("server")).expect("server");
    let (addr, _) = echo_server(&server_info(&server)).await;
    let mut s = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut answer))
        .await
        .expect("answered at once")
        .expect("read");
    assert!(
        answer.contains("Client sent an HTTP request to an HTTPS server."),
        "{answer}"
    );
}

#[tokio::test]
async fn rotated_files_serve_the_next_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "ca").expect("ca");
    let first = ca.issue(&Spec::member("first")).expect("first");
    let second = ca.issue(&Spec::member("second")).expect("second");
    let live = dir.path().join("live");
    std::fs::create_dir_all(&live).expect("mkdir");
    let (cert, key) = (live.join("cert.pem"), live.join("key.pem"));
    std::fs::copy(&first.cert, &cert).expect("copy");
    std::fs::copy(&first.key, &key).expect("copy");
    let info = TlsInfo {
        cert_file: Some(cert.clone()),
        key_file: Some(key.clone()),
        ..TlsInfo::default()
    };
    let (addr, _) = echo_server(&info).await;
    let a = round_trip(&addr, ca_info(&ca.cert)).await.expect("first");
    // A half-written rotation (new certificate, old key) keeps the old pair in force.
    std::fs::copy(&second.cert, live.join("c.tmp")).expect("copy");
    std::fs::rename(live.join("c.tmp"), &cert).expect("rename");
    let b = round_trip(&addr, ca_info(&ca.cert))
        .await
        .expect("mid-rotation");
    assert_eq!(a, b, "mismatched pair not used");
    std::fs::copy(&second.key, live.join("k.tmp")).expect("copy");
    std::fs::rename(live.join("k.tmp"), &key).expect("rename");
    let c = round_trip(&addr, ca_info(&ca.cert)).await.expect("after");
    assert_ne!(a, c, "the new certificate is served");
}

#[test]
fn bad_files_are_errors_when_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(dir.path(), "ca").expect("ca");
    let a = ca.issue(&Spec::member("a")).expect("a");
    let b = ca.issue(&Spec::member("b")).expect("b");
    let mismatch = TlsInfo {
        cert_file: Some(a.cert.clone()),
        key_file: Some(b.key.clone()),
        ..TlsInfo::default()
    };
    let e = ServerTls::new("t", &mismatch).unwrap_err().0;
    assert!(
        e.ends_with("tls: private key does not match public key"),
        "{e}"
    );
    let missing = TlsInfo {
        cert_file: Some(dir.path().join("nope.pem")),
        key_file: Some(a.key.clone()),
        ..TlsInfo::default()
    };
    let e = ServerTls::new("t", &missing).unwrap_err().0;
    assert!(e.ends_with("nope.pem: no such file or directory"), "{e}");
}
