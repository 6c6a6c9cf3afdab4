//! `authenticate`: logins per second. Each request is one `Auth.Authenticate` of the
//! given user, so the figure is the server's password checking (bcrypt at its
//! `--bcrypt-cost`) and its ordering of logins through consensus.

use oxcd_api::etcdserverpb::AuthenticateRequest;
use oxcd_client::Client;

use crate::cli::AuthenticateArgs;
use crate::driver::{self, Plan, Request};
use crate::stats::Report;

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
