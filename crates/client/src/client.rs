//! The connection: dialing the endpoints in order, authenticating, and handing out the
//! generated stubs with the auth token attached.

use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::AuthenticateRequest;
use oxcd_api::etcdserverpb::auth_client::AuthClient;
use oxcd_api::etcdserverpb::cluster_client::ClusterClient;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::lease_client::LeaseClient;
use oxcd_api::etcdserverpb::maintenance_client::MaintenanceClient;
use oxcd_api::etcdserverpb::watch_client::WatchClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use std::path::PathBuf;
use std::sync::Arc;

use oxcd_transport::TlsInfo;
use oxcd_transport::dial::Dialer;
use oxcd_transport::tls::ClientTls;

use crate::Error;
use crate::endpoint::{Target, parse_endpoint};

/// The shortest keepalive ping interval used, as grpc-go's client enforces.
const MIN_KEEPALIVE_TIME: Duration = Duration::from_secs(10);

/// A user name and password for `Auth.Authenticate`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Connection options.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// How long to try each endpoint.
    pub dial_timeout: Duration,
    /// How long one request may take (the convenience methods enforce it).
    pub request_timeout: Duration,
    /// HTTP/2 keepalive ping interval.
    pub keepalive_time: Duration,
    /// How long to wait for a keepalive ping's answer.
    pub keepalive_timeout: Duration,
    /// Authenticate as this user.
    pub credentials: Option<Credentials>,
    /// TLS settings (`--cacert`, `--cert`, `--key`, `--insecure-skip-tls-verify`);
    /// `None`: only `https`/`unixs` endpoints use TLS, with the system's CAs.
    pub tls: Option<TlsConfig>,
}

/// Client TLS settings, as etcdctl's flags give them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// CA bundle the server's certificate must chain to (`--cacert`); none: the
    /// system's CAs.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (`--cert`).
    pub cert_file: Option<PathBuf>,
    /// Its key (`--key`).
    pub key_file: Option<PathBuf>,
    /// Accept any server certificate (`--insecure-skip-tls-verify`).
    pub insecure_skip_verify: bool,
}

impl TlsConfig {
    /// Reads the files now: a missing or bad one is an error before any dial.
    fn load(&self) -> Result<Arc<ClientTls>, Error> {
        let info = TlsInfo {
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            trusted_ca_file: self.ca_file.clone(),
            insecure_skip_verify: self.insecure_skip_verify,
            ..TlsInfo::default()
        };
        ClientTls::new("client", &info)
            .map(Arc::new)
            .map_err(|e| Error::Tls(e.0))
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            dial_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            keepalive_time: Duration::from_secs(2),
            keepalive_timeout: Duration::from_secs(6),
            credentials: None,
            tls: None,
        }
    }
}

/// The largest answer a client takes: etcd's Go client's default (`math.MaxInt32`).
pub const MAX_ANSWER_BYTES: usize = i32::MAX as usize;

/// Adds the auth token (if any) to every request, in the `token` metadata key etcd reads.
#[derive(Debug, Clone, Default)]
pub struct TokenInterceptor {
    token: Option<MetadataValue<Ascii>>,
}

impl Interceptor for TokenInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(t) = &self.token {
            req.metadata_mut().insert("token", t.clone());
        }
        Ok(req)
    }
}

/// The transport every stub uses: the channel with the token interceptor.
pub type Service = InterceptedService<Channel, TokenInterceptor>;

/// A connected client.
#[derive(Debug, Clone)]
pub struct Client {
    channel: Channel,
    endpoint: String,
    auth: TokenInterceptor,
    pub(crate) request_timeout: Duration,
}

impl Client {
    /// Connects to the first of `endpoints`, in order, that answers within the dial
    /// timeout, then authenticates if credentials with a user and a password are given
    /// (as etcd's Go client, an empty password means no authentication). A server's
    /// refusal to authenticate is returned as is; an unreachable endpoint moves on to
    /// the next.
    pub async fn connect(endpoints: &[String], opts: &ConnectOptions) -> Result<Client, Error> {
        let mut last = Error::DeadlineExceeded;
        let configured = opts.tls.as_ref().map(TlsConfig::load).transpose()?;
        let mut default_tls = None;
        for ep in endpoints {
            let target = parse_endpoint(ep)?;
            let tls = match (target.tls, &configured) {
                (Some(false), _) => None,
                (None, None) => None,
                (_, Some(c)) => Some(c.clone()),
                (Some(true), None) => {
                    if default_tls.is_none() {
                        default_tls = Some(TlsConfig::default().load()?);
                    }
                    default_tls.clone()
                }
            };
            let channel = match dial(ep, &target, tls, opts).await {
                Ok(c) => c,
                Err(e @ Error::BadEndpoint(..)) => return Err(e),
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let mut client = Client {
                channel,
                endpoint: ep.clone(),
                auth: TokenInterceptor::default(),
                request_timeout: opts.request_timeout,
            };
            if let Some(c) = &opts.credentials
                && !c.user.is_empty()
                && !c.password.is_empty()
            {
                client.authenticate(c).await?;
            }
            return Ok(client);
        }
        Err(last)
    }

    /// Gets a token for `c`. As etcd's Go client, a server without authentication
    /// enabled is not an error: requests then go without a token.
    async fn authenticate(&mut self, c: &Credentials) -> Result<(), Error> {
        let req = AuthenticateRequest {
            name: c.user.clone(),
            password: c.password.clone(),
        };
        let got = self
            .bounded(AuthClient::new(self.channel.clone()).authenticate(req))
            .await;
        let resp = match got {
            Err(Error::Status(s)) if s.message() == EtcdError::AuthNotEnabled.message() => {
                return Ok(());
            }
            other => other?,
        };
        let token = MetadataValue::try_from(resp.token.as_str()).map_err(|_| Error::BadToken)?;
        self.auth.token = Some(token);
        Ok(())
    }

    /// Runs one call under the request timeout.
    pub(crate) async fn bounded<T>(
        &self,
        f: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Error> {
        match tokio::time::timeout(self.request_timeout, f).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(Error::Status(s)),
            Err(_) => Err(Error::DeadlineExceeded),
        }
    }

    /// The endpoint this client talks to, as it was given.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The transport with the token, for calls the stubs do not cover (a custom codec).
    pub fn service(&self) -> Service {
        InterceptedService::new(self.channel.clone(), self.auth.clone())
    }

    /// The KV service. Answers up to 2 GiB are accepted, as etcd's Go client accepts
    /// them (gRPC's default of 4 MiB would refuse a large range that etcdctl reads).
    pub fn kv(&self) -> KvClient<Service> {
        KvClient::new(self.service()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    /// The Maintenance service.
    pub fn maintenance(&self) -> MaintenanceClient<Service> {
        MaintenanceClient::new(self.service())
    }

    /// The Cluster service.
    pub fn cluster(&self) -> ClusterClient<Service> {
        ClusterClient::new(self.service())
    }

    /// The Lease service.
    pub fn lease(&self) -> LeaseClient<Service> {
        LeaseClient::new(self.service())
    }

    /// The Watch service (answers up to 2 GiB, as for KV).
    pub fn watch(&self) -> WatchClient<Service> {
        WatchClient::new(self.service()).max_decoding_message_size(MAX_ANSWER_BYTES)
    }

    /// The Auth service.
    pub fn auth(&self) -> AuthClient<Service> {
        AuthClient::new(self.service())
    }
}

/// Opens a channel to one endpoint, waiting at most the dial timeout; `tls`: over TLS
/// with that configuration.
async fn dial(
    ep: &str,
    target: &Target,
    tls: Option<Arc<ClientTls>>,
    opts: &ConnectOptions,
) -> Result<Channel, Error> {
    // The channel is made for the http:// URI; TLS is the dialer's business.
    let mut dialer = Dialer::new(tls.clone()).with_tls(tls.is_some());
    if let Some(path) = &target.unix {
        dialer = dialer.with_unix_socket(path.clone());
    }
    let endpoint = Endpoint::from_shared(target.uri.clone())
        .map_err(|e| Error::BadEndpoint(ep.to_string(), e.to_string()))?
        .connect_timeout(opts.dial_timeout)
        .tcp_nodelay(true)
        // As grpc-go (etcdctl), pings go no more often than every 10 s whatever is
        // asked: etcd drops a connection that pings more often than its
        // --grpc-keepalive-min-time (5 s) while a stream is open.
        .http2_keep_alive_interval(opts.keepalive_time.max(MIN_KEEPALIVE_TIME))
        .keep_alive_timeout(opts.keepalive_timeout);
    match tokio::time::timeout(opts.dial_timeout, endpoint.connect_with_connector(dialer)).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(_)) | Err(_) => Err(Error::DeadlineExceeded),
    }
}
