//! `move-leader`: hand leadership to another member, asking the current leader.

use oxcd_api::etcdserverpb::{MoveLeaderRequest, StatusRequest};

use super::{Command, Run};
use crate::{Ctx, Fail, exit};

/// `move-leader <transferee-member-id>`.
pub const MOVE_LEADER: Command = Command {
    words: &["move-leader"],
    flags: &[],
    help: "move-leader - Transfers leadership to another etcd cluster member.\n\nUSAGE:\n\toxcdctl move-leader <transferee-member-id>\n",
    run: move_leader,
};

fn move_leader(ctx: Ctx) -> Run {
    Box::pin(async move {
        let args = &ctx.flags.args;
        if args.len() != 1 {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "move-leader command needs 1 argument",
            ));
        }
        let target = u64::from_str_radix(&args[0], 16).map_err(|e| {
            Fail::new(
                exit::BAD_ARGS,
                format!("strconv.ParseUint: parsing {:?}: {e}", args[0]),
            )
        })?;
        let eps = ctx.endpoints();
        for ep in &eps {
            let one = super::endpoint::single(&ctx, ep);
            let c = one.client().await?;
            let st = one.timed(c.maintenance().status(StatusRequest {})).await?;
            let me = st.header.as_ref().map(|h| h.member_id).unwrap_or(0);
            if me != 0 && me == st.leader {
                let resp = one
                    .timed(
                        c.maintenance()
                            .move_leader(MoveLeaderRequest { target_id: target }),
                    )
                    .await?;
                return ctx
                    .printer
                    .move_leader(me, target, &resp)
                    .map_err(|e| Fail::new(exit::BAD_FEATURE, e));
            }
        }
        Err(Fail::new(
            exit::BAD_ARGS,
            format!("no leader endpoint given at [{}]", eps.join(" ")),
        ))
    })
}
