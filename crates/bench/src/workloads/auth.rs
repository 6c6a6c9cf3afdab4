//! `authenticate` (its flags and requests): logins per second. Each request is one `Auth.Authenticate` of the
//! given user, so the figure is the server's password checking (bcrypt at its
//! `--bcrypt-cost`) and its ordering of logins through consensus.

use clap::Args;
use oxcd_api::etcdserverpb::AuthenticateRequest;
use oxcd_client::Client;

use crate::driver::{self, Plan, Request};
use crate::stats::Report;

/// `authenticate`'s flags.
#[derive(Debug, Clone, Args)]
pub struct AuthenticateArgs {
    /// The user to log in as.
    #[arg(long)]
    pub name: String,
    /// Its password.
    #[arg(long)]
    pub password: String,
    /// Total number of logins.
    #[arg(long, default_value_t = 1_000)]
    pub total: u64,
    /// Maximum logins per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
}

struct Login {
    name: String,
    password: String,
}

impl Request for Login {
    async fn issue(&self, _n: u64, conn: Client) -> Result<(), String> {
        let req = AuthenticateRequest {
            name: self.name.clone(),
            password: self.password.clone(),
        };
        conn.auth()
            .authenticate(req)
            .await
            .map(|_| ())
            .map_err(driver::message)
    }
}

/// Runs `a.total` logins as `a.name` with `a.password`, `clients` at a time.
pub async fn authenticate(a: &AuthenticateArgs, clients: usize, conns: &[Client]) -> Report {
    let plan = Plan {
        total: a.total,
        clients,
        rate: a.rate,
    };
    let login = Login {
        name: a.name.clone(),
        password: a.password.clone(),
    };
    Report::new("authenticate", driver::run(plan, conns, login).await)
}
