//! `defrag`: asks each endpoint (or, with `--cluster`, every member) to defragment its
//! backend, one after the other, as etcdctl 3.5 does; `--data-dir` defragments a data
//! directory no server is using, here, as etcdctl 3.5's deprecated form does.

use oxcd_client::{Client, ConnectOptions};

use crate::args::{boolean, string};
use crate::command::{Command, Run};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::Out;

/// `defrag`.
pub const DEFRAG: Command = Command {
    path: &["defrag"],
    use_: "defrag",
    short: "Defragments the storage of the etcd members with given endpoints",
    long: "",
    flags: &[string(
        "data-dir",
        "",
        "Optional. If present, defragments a data directory not in use by etcd.",
    )],
    persistent: &[boolean(
        "cluster",
        "use all endpoints from the cluster member list",
    )],
    run: Some(defrag),
};

fn defrag(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let data_dir = ctx.flags.get("data-dir").to_string();
        if !data_dir.is_empty() {
            return offline(&data_dir).await;
        }
        let s = ctx.session()?;
        let eps = super::endpoint::endpoints(&ctx, &s).await?;
        let mut out = Out::default();
        let mut failures = 0;
        for ep in eps {
            match defrag_one(&ep, &s.conn).await {
                Ok(()) => {
                    out = out.then(Out::text(format!(
                        "Finished defragmenting etcd member[{ep}]\n"
                    )))
                }
                Err(e) => {
                    failures += 1;
                    out = out.then(Out::err(format!(
                        "Failed to defragment etcd member[{ep}] ({e})\n"
                    )));
                }
            }
        }
        if failures > 0 {
            let mut f = Fail::silent(exit::ERROR);
            f.partial = out;
            return Err(f);
        }
        Ok(out)
    })
}

async fn defrag_one(ep: &str, opts: &ConnectOptions) -> Result<(), oxcd_client::Error> {
    let c = Client::connect(&[ep.to_string()], opts).await?;
    c.defragment().await.map(|_| ())
}

/// etcdctl 3.5's `defrag --data-dir`: a notice, then the offline defragmentation.
async fn offline(dir: &str) -> Result<Out, Fail> {
    let notice = Out::err(
        "Use `oxcdutl defrag` instead. The --data-dir is going to be decomissioned in v3.6.\n\n",
    );
    let dir = dir.to_string();
    let done = tokio::task::spawn_blocking(move || oxcd_storage::defrag::offline(&dir))
        .await
        .map_err(|e| Fail::new(exit::ERROR, e.to_string()))?;
    match done {
        Ok(_) => Ok(notice),
        Err(e) => {
            let mut f = Fail::new(exit::ERROR, e.to_string());
            f.partial = notice;
            Err(f)
        }
    }
}
