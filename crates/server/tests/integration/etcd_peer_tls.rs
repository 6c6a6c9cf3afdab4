//! etcd's peer protocol over TLS between an etcd 3.5.16 member and an oxcd member (issue
//! 35): both peer ports serve TLS with certificates checked both ways
//! (`--peer-client-cert-auth`), as production etcd clusters run. An etcd member routes a
//! TLS connection that offers `h2` to its gRPC server (etcd 3.5.16
//! `server/embed/serve.go`, `cmux` on the peer listener), so oxcd dials etcd's peer
//! protocol offering `http/1.1` only, and its peer port takes etcd's HTTP/1.1 over TLS
//! beside its own gRPC.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::Client;
use oxcd_testkit::pki::{Ca, CertFiles, Spec};
use oxcd_transport::tls::TlsInfo;

use crate::common::{InProc, free_port, revision_at};
use crate::etcd_peer::{add_learner, eventually, joining, promote_and_lead, serves};

/// A running etcd, killed when dropped.
struct EtcdProcess(Child);

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A one-member etcd cluster with its peer port on TLS (`member`'s certificate, `ca`
/// trusted, client certificates required); clients in plain text on `client`.
fn start_etcd(dir: &Path, ca: &Path, member: &CertFiles, peer: u16, client: u16) -> EtcdProcess {
    let peer_url = format!("https://127.0.0.1:{peer}");
    let client_url = format!("http://127.0.0.1:{client}");
    let log = std::fs::File::create(dir.join("etcd.log")).expect("etcd log");
    let p = |f: &Path| f.display().to_string();
    let child = Command::new(oxcd_testkit::reference::etcd_binary())
        .arg("--data-dir")
        .arg(dir.join("etcd"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("default={peer_url}")])
        .args(["--peer-cert-file", &p(&member.cert)])
        .args(["--peer-key-file", &p(&member.key)])
        .args(["--peer-trusted-ca-file", &p(ca)])
        .arg("--peer-client-cert-auth")
        .args(["--experimental-initial-corrupt-check=true"])
        .args(["--experimental-corrupt-check-time=1s"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start etcd");
    EtcdProcess(child)
}

#[tokio::test]
async fn an_oxcd_member_joins_and_leads_an_etcd_cluster_over_peer_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(&dir.path().join("pki"), "ca").expect("ca");
    let member = ca
        .issue(&Spec::member("member"))
        .expect("member certificate");
    let (etcd_peer, etcd_client) = (free_port(), free_port());
    let etcd_peer_url = format!("https://127.0.0.1:{etcd_peer}");
    let _etcd = start_etcd(dir.path(), &ca.cert, &member, etcd_peer, etcd_client);
    let etcd_endpoint = format!("http://127.0.0.1:{etcd_client}");
    let connected = eventually(|| async {
        match Client::connect([etcd_endpoint.clone()], None).await {
            Ok(mut c) => c.status().await.is_ok(),
            Err(_) => false,
        }
    })
    .await;
    assert!(connected, "etcd serves");
    let c = Client::connect([etcd_endpoint.clone()], None)
        .await
        .expect("connect");
    let etcd_id = c.clone().status().await.expect("status").leader();
    c.clone().put("before", "v", None).await.expect("put");

    let oxcd_peer_url = format!("https://127.0.0.1:{}", free_port());
    let oxcd_id = add_learner(&c, &oxcd_peer_url).await;
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        joining(s, &etcd_peer_url, &oxcd_peer_url);
        s.peer_tls = TlsInfo {
            cert_file: Some(member.cert.clone()),
            key_file: Some(member.key.clone()),
            trusted_ca_file: Some(ca.cert.clone()),
            client_cert_auth: true,
            ..TlsInfo::default()
        };
    })
    .await;
    let mut ours = oxcd.client().await;
    assert!(
        serves(&ours, "before").await,
        "the oxcd learner catches up over TLS"
    );
    promote_and_lead(&c, oxcd_id).await;
    ours.put("from-oxcd", "v", None)
        .await
        .expect("put through oxcd");
    assert!(
        serves(&c, "from-oxcd").await,
        "etcd applies what the oxcd leader proposed over TLS"
    );
    let leader = ours.status().await.expect("status").leader();
    assert_eq!(leader, oxcd_id, "oxcd leads");
    assert_ne!(leader, etcd_id);
    let rev = revision_at(&mut ours, "from-oxcd").await;
    let mut theirs = c.clone();
    let (a, b) = (
        ours.hash_kv(rev).await.expect("hashkv").hash(),
        theirs.hash_kv(rev).await.expect("hashkv").hash(),
    );
    eprintln!("HashKV at {rev} over peer TLS: oxcd {a}, etcd {b}");
    assert_eq!(a, b, "HashKV equal");
    // etcd's corruption check (every second) compares the two through the peer port.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let alarms = theirs
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await
        .expect("alarms");
    assert!(alarms.alarms().is_empty(), "no alarm");
    oxcd.stop().await;
}
