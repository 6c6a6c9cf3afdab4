//! get, put, del, compaction — with etcdctl's argument rules, messages and order of
//! checks (arguments first, then the client, then the request, then the printer).

use std::io::Read;

use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{DeleteRangeRequest, PutRequest, RangeRequest};
use oxcd_client::prefix_end;
use oxcd_go::strconv;

use crate::args::{Parsed, Spec, boolean, int64, string};
use crate::command::{Command, Run, bad_args};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::Format;

const GET_FLAGS: &[Spec] = &[
    string("consistency", "l", "Linearizable(l) or Serializable(s)"),
    string(
        "order",
        "",
        "Order of results; ASCEND or DESCEND (ASCEND by default)",
    ),
    string(
        "sort-by",
        "",
        "Sort target; CREATE, KEY, MODIFY, VALUE, or VERSION",
    ),
    int64("limit", "Maximum number of results"),
    boolean("prefix", "Get keys with matching prefix"),
    boolean(
        "from-key",
        "Get keys that are greater than or equal to the given key using byte compare",
    ),
    int64("rev", "Specify the kv revision"),
    boolean("keys-only", "Get only the keys"),
    boolean("count-only", "Get only the count"),
    boolean(
        "print-value-only",
        "Only write values when using the \"simple\" output format",
    ),
];

/// `get [options] <key> [range_end]`.
pub const GET: Command = Command {
    path: &["get"],
    use_: "get [options] <key> [range_end]",
    short: "Gets the key or a range of keys",
    long: "",
    flags: GET_FLAGS,
    persistent: &[],
    run: Some(get),
};

const PUT_FLAGS: &[Spec] = &[
    string(
        "lease",
        "0",
        "lease ID (in hexadecimal) to attach to the key",
    ),
    boolean(
        "prev-kv",
        "return the previous key-value pair before modification",
    ),
    boolean("ignore-value", "updates the key using its current value"),
    boolean("ignore-lease", "updates the key using its current lease"),
];

/// `put [options] <key> <value>` (value from stdin when omitted).
pub const PUT: Command = Command {
    path: &["put"],
    use_: "put [options] <key> <value> (<value> can also be given from stdin)",
    short: "Puts the given key into the store",
    long: "
Puts the given key into the store.

When <value> begins with '-', <value> is interpreted as a flag.
Insert '--' for workaround:

$ put <key> -- <value>
$ put -- <key> <value>

If <value> isn't given as a command line argument and '--ignore-value' is not specified,
this command tries to read the value from standard input.

If <lease> isn't given as a command line argument and '--ignore-lease' is not specified,
this command tries to read the value from standard input.

For example,
$ cat file | put <key>
will store the content of the file to <key>.
",
    flags: PUT_FLAGS,
    persistent: &[],
    run: Some(put),
};

const DEL_FLAGS: &[Spec] = &[
    boolean("prefix", "delete keys with matching prefix"),
    boolean("prev-kv", "return deleted key-value pairs"),
    boolean(
        "from-key",
        "delete keys that are greater than or equal to the given key using byte compare",
    ),
];

/// `del [options] <key> [range_end]`.
pub const DEL: Command = Command {
    path: &["del"],
    use_: "del [options] <key> [range_end]",
    short: "Removes the specified key or range of keys [key, range_end)",
    long: "",
    flags: DEL_FLAGS,
    persistent: &[],
    run: Some(del),
};

/// `compaction [options] <revision>`.
pub const COMPACTION: Command = Command {
    path: &["compaction"],
    use_: "compaction [options] <revision>",
    short: "Compacts the event history in etcd",
    long: "",
    flags: &[boolean(
        "physical",
        "'true' to wait for compaction to physically remove all old revisions",
    )],
    persistent: &[],
    run: Some(compaction),
};

const BOTH: &str = "`--prefix` and `--from-key` cannot be set at the same time, choose one";
const TOO_MANY: &str =
    "too many arguments, only accept one argument when `--prefix` or `--from-key` is set";

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
        return Err(bad_args(BOTH));
    }
    let mut r = RangeRequest {
        key: args[0].clone().into_bytes(),
        ..Default::default()
    };
    r.serializable = crate::command::serializable(p.get("consistency"))?;
    if args.len() > 1 {
        if prefix || from_key {
            return Err(bad_args(TOO_MANY));
        }
        r.range_end = args[1].clone().into_bytes();
    }
    r.limit = p.int("limit");
    let rev = p.int("rev");
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
    r.count_only = p.knows("count-only") && p.flag("count-only");
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

fn get(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let r = range_request(&ctx.flags)?;
        let s = ctx.session()?;
        let resp = s.client().await?.range(r).await?;
        let mut printer = s.printer;
        if ctx.flags.flag("count-only") && printer.format != Format::Fields {
            return Err(bad_args("--count-only is only for `--write-out=fields`"));
        }
        if ctx.flags.flag("print-value-only") {
            if printer.format != Format::Simple {
                return Err(bad_args(
                    "print-value-only is only for `--write-out=simple`",
                ));
            }
            printer.value_only = true;
        }
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
    r.lease = strconv::parse_int(p.get("lease"), 16, 64)
        .map_err(|e| bad_args(&format!("bad lease ID ({e}), expecting ID in Hex")))?;
    r.prev_kv = p.flag("prev-kv");
    r.ignore_value = ignore_value;
    r.ignore_lease = p.flag("ignore-lease");
    Ok(r)
}

fn put(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let r = put_request(&ctx.flags, Some(&mut std::io::stdin()))?;
        let s = ctx.session()?;
        let resp = s.client().await?.put_request(r).await?;
        s.printer
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
        return Err(bad_args(BOTH));
    }
    let mut r = DeleteRangeRequest {
        key: args[0].clone().into_bytes(),
        ..Default::default()
    };
    if args.len() > 1 {
        if prefix || from_key {
            return Err(bad_args(TOO_MANY));
        }
        r.range_end = args[1].clone().into_bytes();
    }
    apply_prefix_or_from_key(&mut r.key, &mut r.range_end, prefix, from_key);
    r.prev_kv = p.flag("prev-kv");
    Ok(r)
}

fn del(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let r = delete_request(&ctx.flags)?;
        let s = ctx.session()?;
        let resp = s.client().await?.delete_range(r).await?;
        s.printer
            .del(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

fn compaction(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        let p = &ctx.flags;
        if p.args.len() != 1 {
            return Err(bad_args("compaction command needs 1 argument"));
        }
        let rev = strconv::parse_int(&p.args[0], 10, 64)
            .map_err(|e| Fail::new(exit::ERROR, e.to_string()))?;
        let physical = p.flag("physical");
        let s = ctx.session()?;
        s.client().await?.compact(rev, physical).await?;
        Ok(s.printer.compaction(rev))
    })
}
