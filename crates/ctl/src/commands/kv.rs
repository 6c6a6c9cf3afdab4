//! get, put, del, compaction — with etcdctl's argument rules and messages.

use std::io::Read;

use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest};
use oxcd_client::prefix_end;

use super::{Command, Run};
use crate::args::{Parsed, Spec, boolean, value};
use crate::output::Format;
use crate::{Ctx, Fail, exit};

const GET_FLAGS: &[Spec] = &[
    value("consistency", "l"),
    value("order", ""),
    value("sort-by", ""),
    value("limit", "0"),
    boolean("prefix"),
    boolean("from-key"),
    value("rev", "0"),
    boolean("keys-only"),
    boolean("count-only"),
    boolean("print-value-only"),
];

/// `get [options] <key> [range_end]`.
pub const GET: Command = Command {
    words: &["get"],
    flags: GET_FLAGS,
    help: "get - Gets the key or a range of keys\n\nUSAGE:\n\toxcdctl get [options] <key> [range_end]\n\nOPTIONS:\n  --consistency=\"l\"  Linearizable(l) or Serializable(s)\n  --from-key  Get keys that are greater than or equal to the given key using byte compare\n  --keys-only  Get only the keys\n  --count-only  Get only the count\n  --limit=0  Maximum number of results\n  --order=\"\"  Order of results; ASCEND or DESCEND (ASCEND by default)\n  --prefix  Get keys with matching prefix\n  --print-value-only  Only write values when using the \"simple\" output format\n  --rev=0  Specify the kv revision\n  --sort-by=\"\"  Sort target; CREATE, KEY, MODIFY, VALUE, or VERSION\n",
    run: get,
};

const PUT_FLAGS: &[Spec] = &[
    value("lease", "0"),
    boolean("prev-kv"),
    boolean("ignore-value"),
    boolean("ignore-lease"),
];

/// `put [options] <key> <value>` (value from stdin when omitted).
pub const PUT: Command = Command {
    words: &["put"],
    flags: PUT_FLAGS,
    help: "put - Puts the given key into the store\n\nUSAGE:\n\toxcdctl put [options] <key> <value> (<value> can also be given from stdin)\n\nOPTIONS:\n  --ignore-lease  updates the key using its current lease\n  --ignore-value  updates the key using its current value\n  --lease=\"0\"  lease ID (in hexadecimal) to attach to the key\n  --prev-kv  return the previous key-value pair before modification\n",
    run: put,
};

const DEL_FLAGS: &[Spec] = &[boolean("prefix"), boolean("prev-kv"), boolean("from-key")];

/// `del [options] <key> [range_end]`.
pub const DEL: Command = Command {
    words: &["del"],
    flags: DEL_FLAGS,
    help: "del - Removes the specified key or range of keys [key, range_end)\n\nUSAGE:\n\toxcdctl del [options] <key> [range_end]\n\nOPTIONS:\n  --from-key  delete keys that are greater than or equal to the given key using byte compare\n  --prefix  delete keys with matching prefix\n  --prev-kv  return deleted key-value pairs\n",
    run: del,
};

/// `compaction [options] <revision>`.
pub const COMPACTION: Command = Command {
    words: &["compaction"],
    flags: &[boolean("physical")],
    help: "compaction - Compacts the event history in etcd\n\nUSAGE:\n\toxcdctl compaction [options] <revision>\n\nOPTIONS:\n  --physical  'true' to wait for compaction to physically remove all old revisions\n",
    run: compaction,
};

fn bad_args(msg: &str) -> Fail {
    Fail::new(exit::BAD_ARGS, msg)
}

fn int_flag(p: &Parsed, name: &str) -> Result<i64, Fail> {
    p.get(name).parse().map_err(|_| {
        bad_args(&format!(
            "invalid argument {:?} for \"--{name}\" flag",
            p.get(name)
        ))
    })
}

/// Builds a range request from get's arguments (also used by txn).
pub fn range_request(p: &Parsed) -> Result<RangeRequest, Fail> {
    let args = &p.args;
    if args.is_empty() {
        return Err(bad_args(
            "get command needs one argument as key and an optional argument as range_end",
        ));
    }
    let (prefix, from_key) = (p.flag("prefix"), p.flag("from-key"));
    if prefix && from_key {
        return Err(bad_args(
            "`--prefix` and `--from-key` cannot be set at the same time, choose one",
        ));
    }
    let mut r = RangeRequest {
        key: args[0].clone().into_bytes(),
        ..Default::default()
    };
    match p.get("consistency") {
        "s" => r.serializable = true,
        "l" => {}
        other => {
            return Err(Fail::new(
                exit::BAD_FEATURE,
                format!("unknown consistency flag {other:?}"),
            ));
        }
    }
    if args.len() > 1 {
        if prefix || from_key {
            return Err(bad_args(
                "too many arguments, only accept one argument when `--prefix` or `--from-key` is set.",
            ));
        }
        r.range_end = args[1].clone().into_bytes();
    }
    r.limit = int_flag(p, "limit")?;
    let rev = int_flag(p, "rev")?;
    if rev > 0 {
        r.revision = rev;
    }
    let order = match p.get("order").to_uppercase().as_str() {
        "ASCEND" => SortOrder::Ascend,
        "DESCEND" => SortOrder::Descend,
        "" => SortOrder::None,
        _ => {
            return Err(Fail::new(
                exit::BAD_FEATURE,
                format!("bad sort order {}", p.get("order")),
            ));
        }
    };
    let target = match p.get("sort-by").to_uppercase().as_str() {
        "CREATE" => SortTarget::Create,
        "KEY" | "" => SortTarget::Key,
        "MODIFY" => SortTarget::Mod,
        "VALUE" => SortTarget::Value,
        "VERSION" => SortTarget::Version,
        _ => {
            return Err(Fail::new(
                exit::BAD_FEATURE,
                format!("bad sort target {}", p.get("sort-by")),
            ));
        }
    };
    // As etcd's client: ascending by key is the server's natural order.
    let order = if target == SortTarget::Key && order == SortOrder::Ascend {
        SortOrder::None
    } else {
        order
    };
    r.sort_order = order as i32;
    r.sort_target = target as i32;
    apply_prefix_or_from_key(&mut r.key, &mut r.range_end, prefix, from_key);
    r.keys_only = p.flag("keys-only");
    r.count_only = p.flag("count-only");
    Ok(r)
}

fn apply_prefix_or_from_key(key: &mut Vec<u8>, end: &mut Vec<u8>, prefix: bool, from_key: bool) {
    if prefix {
        if key.is_empty() {
            *key = vec![0];
            *end = vec![0];
        } else {
            *end = prefix_end(key);
        }
    }
    if from_key {
        if key.is_empty() {
            *key = vec![0];
        }
        *end = vec![0];
    }
}

fn get(ctx: Ctx) -> Run {
    Box::pin(async move {
        let p = &ctx.flags;
        let r = range_request(p)?;
        let mut printer = ctx.printer;
        if p.flag("print-value-only") {
            if printer.format != Format::Simple {
                return Err(bad_args(
                    "print-value-only is only for `--write-out=simple`",
                ));
            }
            printer.value_only = true;
        }
        if r.count_only && printer.format != Format::Fields {
            return Err(bad_args("--count-only is only for `--write-out=fields`"));
        }
        let c = ctx.client().await?;
        let resp = ctx.timed(c.kv().range(r)).await?;
        printer
            .range(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

/// Builds a put request from put's arguments (also used by txn); `stdin` supplies the
/// value when it is not an argument.
pub fn put_request(p: &Parsed, stdin: Option<&mut dyn Read>) -> Result<PutRequest, Fail> {
    let args = &p.args;
    let needs = "put command needs 1 argument and input from stdin or 2 arguments";
    if args.is_empty() {
        return Err(bad_args(needs));
    }
    let ignore_value = p.flag("ignore-value");
    if ignore_value && args.len() > 1 {
        return Err(bad_args(
            "put command needs only 1 argument when 'ignore-value' is set",
        ));
    }
    let mut r = PutRequest {
        key: args[0].clone().into_bytes(),
        ..Default::default()
    };
    if !ignore_value {
        r.value = match (args.get(1), stdin) {
            (Some(v), _) => v.clone().into_bytes(),
            (None, Some(input)) => {
                let mut buf = Vec::new();
                input.read_to_end(&mut buf).map_err(|_| bad_args(needs))?;
                if buf.is_empty() {
                    return Err(bad_args(needs));
                }
                buf
            }
            (None, None) => return Err(bad_args(needs)),
        };
    }
    r.lease = i64::from_str_radix(p.get("lease"), 16)
        .map_err(|e| bad_args(&format!("bad lease ID ({e}), expecting ID in Hex")))?;
    r.prev_kv = p.flag("prev-kv");
    r.ignore_value = ignore_value;
    r.ignore_lease = p.flag("ignore-lease");
    Ok(r)
}

fn put(ctx: Ctx) -> Run {
    Box::pin(async move {
        let r = put_request(&ctx.flags, Some(&mut std::io::stdin()))?;
        let c = ctx.client().await?;
        let resp = ctx.timed(c.kv().put(r)).await?;
        ctx.printer
            .put(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

/// Builds a delete request from del's arguments (also used by txn).
pub fn delete_request(p: &Parsed) -> Result<DeleteRangeRequest, Fail> {
    let args = &p.args;
    if args.is_empty() || args.len() > 2 {
        return Err(bad_args(
            "del command needs one argument as key and an optional argument as range_end",
        ));
    }
    let (prefix, from_key) = (p.flag("prefix"), p.flag("from-key"));
    if prefix && from_key {
        return Err(bad_args(
            "`--prefix` and `--from-key` cannot be set at the same time, choose one",
        ));
    }
    let mut r = DeleteRangeRequest {
        key: args[0].clone().into_bytes(),
        ..Default::default()
    };
    if args.len() > 1 {
        if prefix || from_key {
            return Err(bad_args(
                "too many arguments, only accept one argument when `--prefix` or `--from-key` is set.",
            ));
        }
        r.range_end = args[1].clone().into_bytes();
    }
    apply_prefix_or_from_key(&mut r.key, &mut r.range_end, prefix, from_key);
    r.prev_kv = p.flag("prev-kv");
    Ok(r)
}

fn del(ctx: Ctx) -> Run {
    Box::pin(async move {
        let r = delete_request(&ctx.flags)?;
        let c = ctx.client().await?;
        let resp = ctx.timed(c.kv().delete_range(r)).await?;
        ctx.printer
            .del(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

fn compaction(ctx: Ctx) -> Run {
    Box::pin(async move {
        let p = &ctx.flags;
        if p.args.len() != 1 {
            return Err(bad_args("compaction command needs 1 argument"));
        }
        let rev: i64 = p.args[0].parse().map_err(|_| {
            Fail::new(
                exit::ERROR,
                format!("strconv.ParseInt: parsing {:?}: invalid syntax", p.args[0]),
            )
        })?;
        let c = ctx.client().await?;
        let req = CompactionRequest {
            revision: rev,
            physical: p.flag("physical"),
        };
        ctx.timed(c.kv().compact(req)).await?;
        Ok(ctx.printer.compaction(rev))
    })
}
