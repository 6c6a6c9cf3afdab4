//! `move-leader`: hand leadership to another member, asking the current leader.

use crate::command::{Command, Run};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use oxcd_go::strconv;

/// `move-leader <transferee-member-id>`.
pub const MOVE_LEADER: Command = Command {
    path: &["move-leader"],
    use_: "move-leader <transferee-member-id>",
    short: "Transfers leadership to another etcd cluster member.",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(move_leader),
};

fn move_leader(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = &ctx.flags.args;
        if args.len() != 1 {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "move-leader command needs 1 argument",
            ));
        }
        let target = strconv::parse_uint(&args[0], 16, 64)
            .map_err(|e| Fail::new(exit::BAD_ARGS, e.to_string()))?;
        let s = ctx.session()?;
        for ep in &s.endpoints {
            let c = s.client_for(std::slice::from_ref(ep)).await?;
            let st = c.status().await?;
            let me = st.header.as_ref().map(|h| h.member_id).unwrap_or(0);
            if me == st.leader {
                let resp = c.move_leader(target).await?;
                return s
                    .printer
                    .move_leader(me, target, &resp)
                    .map_err(|e| Fail::new(exit::BAD_FEATURE, e));
            }
        }
        Err(Fail::new(
            exit::BAD_ARGS,
            format!("no leader endpoint given at [{}]", s.endpoints.join(" ")),
        ))
    })
}
