//! DNS SRV discovery as etcd 3.5 does it (`client/pkg/srv`): a member's initial cluster
//! from `_etcd-server-ssl._tcp.<domain>` (https) and `_etcd-server._tcp.<domain>` (http),
//! a client's endpoints from `_etcd-client-ssl._tcp` and `_etcd-client._tcp`; with a
//! service name, `_etcd-server-ssl-<name>._tcp` and so on.
//!
//! The resolver is the system's (`/etc/resolv.conf`), or the one name server that
//! `OXCD_DNS_SERVER` (`ip:port`, oxcd's own) names: a test's DNS server on loopback, or
//! an operator's for discovery only.
//!
//! Invariants: a member recognises itself among the records by address, as etcd: a
//! record whose target and port resolve to the address one of its advertised peer URLs
//! resolves to is named with its `--name`; the others get etcd's placeholder names
//! (`0`, `1`, ...), replaced by their own names when they publish them.

use std::net::{IpAddr, SocketAddr};

use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::{Resolver, TokioResolver};

/// The variable naming the one DNS server to ask (`ip:port`) instead of the system's.
pub const DNS_SERVER_VARIABLE: &str = "OXCD_DNS_SERVER";

/// A resolver for SRV discovery.
pub struct SrvResolver {
    inner: TokioResolver,
}

/// A SRV record: where a service is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvTarget {
    /// The target host, without the root's dot.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl SrvResolver {
    /// The system's resolver, or the server [`DNS_SERVER_VARIABLE`] names.
    pub fn new() -> Result<SrvResolver, String> {
        let inner = match std::env::var(DNS_SERVER_VARIABLE) {
            Ok(server) => {
                let addr: SocketAddr = server
                    .parse()
                    .map_err(|e| format!("{DNS_SERVER_VARIABLE}={server:?}: {e}"))?;
                let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                for c in &mut ns.connections {
                    c.port = addr.port();
                }
                Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![ns]),
                    TokioRuntimeProvider::default(),
                )
                .build()
                .map_err(|e| format!("DNS resolver: {e}"))?
            }
            Err(_) => Resolver::builder_tokio()
                .map_err(|e| format!("DNS resolver: {e}"))?
                .build()
                .map_err(|e| format!("DNS resolver: {e}"))?,
        };
        Ok(SrvResolver { inner })
    }

    /// The SRV records of `_<service>._tcp.<domain>`, in the order the server gave them.
    pub async fn lookup(&self, service: &str, domain: &str) -> Result<Vec<SrvTarget>, String> {
        let name = format!("_{service}._tcp.{}.", domain.trim_end_matches('.'));
        let found = self
            .inner
            .srv_lookup(name.as_str())
            .await
            .map_err(|e| format!("lookup {name}: {e}"))?;
        Ok(found
            .answers()
            .iter()
            .filter_map(|r| match &r.data {
                RData::SRV(srv) => Some(SrvTarget {
                    host: srv.target.to_ascii().trim_end_matches('.').to_string(),
                    port: srv.port,
                }),
                _ => None,
            })
            .collect())
    }

    /// The address `host:port` resolves to (an IPv4 one first, as Go's resolver).
    pub async fn resolve(&self, host: &str, port: u16) -> Result<SocketAddr, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, port));
        }
        let ips = self
            .inner
            .lookup_ip(format!("{}.", host.trim_end_matches('.')))
            .await
            .map_err(|e| format!("lookup {host}: {e}"))?;
        let all: Vec<IpAddr> = ips.iter().collect();
        all.iter()
            .find(|ip| ip.is_ipv4())
            .or(all.first())
            .map(|ip| SocketAddr::new(*ip, port))
            .ok_or_else(|| format!("lookup {host}: no address"))
    }
}

/// The SRV service of `service` for `scheme` with an optional `name` suffix
/// (`etcd-server` → `etcd-server-ssl-<name>` for https).
pub fn service_name(service: &str, name: &str, scheme: &str) -> String {
    let mut s = service.to_string();
    if scheme == "https" {
        s.push_str("-ssl");
    }
    if !name.is_empty() {
        s.push('-');
        s.push_str(name);
    }
    s
}

/// The host and port of a URL (`http://host:port/...`).
fn host_port(url: &str) -> Option<(String, u16)> {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// A member's initial cluster from the SRV records of `domain`: `(name, peer URLs)` in
/// the order found, the https records first. `me` is the member's `--name`,
/// `advertise` its advertised peer URLs. An error when neither service has a record.
pub async fn initial_cluster(
    resolver: &SrvResolver,
    domain: &str,
    srv_name: &str,
    me: &str,
    advertise: &[String],
) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut mine = Vec::new();
    for url in advertise {
        let (host, port) =
            host_port(url).ok_or_else(|| format!("{url}: not a URL with a host and a port"))?;
        mine.push((resolver.resolve(&host, port).await?, url.clone()));
    }
    let mut cluster: Vec<(String, Vec<String>)> = Vec::new();
    let mut errors = Vec::new();
    for scheme in ["https", "http"] {
        let service = service_name("etcd-server", srv_name, scheme);
        let mut placeholder = 0;
        let records = match resolver.lookup(&service, domain).await {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("error querying DNS SRV records for _{service} {e}"));
                continue;
            }
        };
        for r in records {
            let addr = match resolver.resolve(&r.host, r.port).await {
                Ok(a) => a,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let url = format!("{scheme}://{}:{}", r.host, r.port);
            let own = mine.iter().find(|(a, _)| *a == addr);
            if let Some((_, advertised)) = own
                && !advertised.starts_with(&format!("{scheme}://"))
            {
                errors.push(format!(
                    "bootstrap at {url} from DNS for {service} has scheme mismatch with expected peer {advertised}"
                ));
                continue;
            }
            let name = match own {
                Some(_) => me.to_string(),
                None => {
                    placeholder += 1;
                    (placeholder - 1).to_string()
                }
            };
            match cluster.iter_mut().find(|(n, _)| *n == name) {
                Some((_, urls)) => {
                    urls.push(url);
                    urls.sort();
                }
                None => cluster.push((name, vec![url])),
            }
        }
    }
    if cluster.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(cluster)
}

/// A client's endpoints from the SRV records of `domain` (etcdctl's `--discovery-srv`):
/// the https ones, then the http ones; an error when neither service could be looked up.
pub async fn client_endpoints(
    resolver: &SrvResolver,
    domain: &str,
    srv_name: &str,
) -> Result<Vec<String>, String> {
    let mut endpoints = Vec::new();
    let mut errors = Vec::new();
    for scheme in ["https", "http"] {
        let service = service_name("etcd-client", srv_name, scheme);
        match resolver.lookup(&service, domain).await {
            Ok(records) => endpoints.extend(
                records
                    .into_iter()
                    .map(|r| format!("{scheme}://{}:{}", r.host, r.port)),
            ),
            Err(e) => errors.push(e),
        }
    }
    if errors.len() == 2 {
        return Err(format!(
            "dns lookup errors: {} and {}",
            errors[0], errors[1]
        ));
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_named_as_etcds() {
        assert_eq!(service_name("etcd-server", "", "https"), "etcd-server-ssl");
        assert_eq!(service_name("etcd-server", "", "http"), "etcd-server");
        assert_eq!(
            service_name("etcd-client", "prod", "https"),
            "etcd-client-ssl-prod"
        );
        assert_eq!(
            host_port("http://m1.example.com:2380"),
            Some(("m1.example.com".to_string(), 2380))
        );
    }
}
