//! `txn`: reads compares, success requests and failure requests from stdin (each block
//! ends with a blank line), in etcdctl's syntax, e.g. `mod("k") > "5"` then `put k v`.

use std::io::BufRead;

use oxcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{Compare, RequestOp, TxnRequest};

use super::kv::{DEL, GET, PUT, delete_request, put_request, range_request};
use super::{Command, Run};
use crate::args::{self, Spec};
use crate::{Ctx, Fail, exit};

/// `txn [options]`.
pub const TXN: Command = Command {
    words: &["txn"],
    flags: &[Spec {
        name: "interactive",
        short: Some('i'),
        boolean: true,
        default: "false",
    }],
    help: "txn - Txn processes all the requests in one transaction\n\nUSAGE:\n\toxcdctl txn [options]\n\nOPTIONS:\n  -i, --interactive  Input transaction in interactive mode\n\nInput: compares, a blank line, success requests, a blank line, failure requests, a blank line.\n  compare:  <value|mod|create|version|lease>(\"<key>\") <=|!=|<|>> \"<value>\"\n  request:  get|put|del with their flags, e.g. put k v --prev-kv\n",
    run: txn,
};

fn invalid(msg: String) -> Fail {
    Fail::new(exit::INVALID_INPUT, msg)
}

/// Reads one line as Go's `ReadString('\n')` would: a line without its newline is EOF.
fn read_line(input: &mut dyn BufRead) -> Result<String, Fail> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .map_err(|e| invalid(e.to_string()))?;
    if !line.ends_with('\n') {
        return Err(invalid("EOF".into()));
    }
    Ok(line.trim().to_string())
}

/// Parses a Go double-quoted string at the start of `s`; returns it and the rest.
fn quoted(s: &str) -> Option<(String, &str)> {
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 2..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                o => out.push(o),
            },
            c => out.push(c),
        }
    }
    None
}

/// Parses `target("key") op "value"`.
pub fn parse_compare(line: &str) -> Result<Compare, Fail> {
    let malformed = || invalid(format!("malformed comparison: {line}"));
    let (target, rest) = line.split_once('(').ok_or_else(malformed)?;
    let (key, rest) = quoted(rest).ok_or_else(malformed)?;
    let rest = rest.strip_prefix(')').ok_or_else(malformed)?.trim_start();
    let (op, rest) = rest.split_once(' ').ok_or_else(malformed)?;
    let (val, _) = quoted(rest.trim_start()).ok_or_else(malformed)?;
    let result = match op {
        "=" => CompareResult::Equal,
        "!=" => CompareResult::NotEqual,
        ">" => CompareResult::Greater,
        "<" => CompareResult::Less,
        _ => {
            return Err(invalid(format!(
                "malformed comparison: {line} (unknown op {op})"
            )));
        }
    };
    let int = || {
        val.parse::<i64>()
            .map_err(|_| invalid(format!("invalid txn compare request: {line}")))
    };
    let (t, union) = match target {
        "ver" | "version" => (CompareTarget::Version, TargetUnion::Version(int()?)),
        "c" | "create" => (CompareTarget::Create, TargetUnion::CreateRevision(int()?)),
        "m" | "mod" => (CompareTarget::Mod, TargetUnion::ModRevision(int()?)),
        "val" | "value" => (
            CompareTarget::Value,
            TargetUnion::Value(val.clone().into_bytes()),
        ),
        "lease" => (CompareTarget::Lease, TargetUnion::Lease(int()?)),
        other => {
            return Err(invalid(format!(
                "malformed comparison: {line} (unknown target {other})"
            )));
        }
    };
    Ok(Compare {
        result: result as i32,
        target: t as i32,
        key: key.into_bytes(),
        target_union: Some(union),
        range_end: Vec::new(),
    })
}

/// Parses one request line as the get, put or del command would.
pub fn parse_request(line: &str) -> Result<RequestOp, Fail> {
    let words = args::argify(line);
    if words.len() < 2 {
        return Err(invalid(format!("invalid txn compare request: {line}")));
    }
    let bad = || invalid(format!("invalid txn request: {line}"));
    let request = match words[0].as_str() {
        "get" => Request::RequestRange(range_request(
            &args::parse(&words[1..], GET.flags).map_err(|_| bad())?,
        )?),
        "put" => Request::RequestPut(put_request(
            &args::parse(&words[1..], PUT.flags).map_err(|_| bad())?,
            None,
        )?),
        "del" => Request::RequestDeleteRange(delete_request(
            &args::parse(&words[1..], DEL.flags).map_err(|_| bad())?,
        )?),
        _ => return Err(bad()),
    };
    Ok(RequestOp {
        request: Some(request),
    })
}

/// Reads a whole txn from `input`, printing prompts to `prompt` when interactive.
pub fn read_txn(
    input: &mut dyn BufRead,
    interactive: bool,
    prompt: &mut dyn std::io::Write,
) -> Result<TxnRequest, Fail> {
    let mut say = |s: &str| {
        if interactive {
            let _ = writeln!(prompt, "{s}");
            let _ = prompt.flush();
        }
    };
    let mut r = TxnRequest::default();
    say("compares:");
    loop {
        let line = read_line(input)?;
        if line.is_empty() {
            break;
        }
        r.compare.push(parse_compare(&line)?);
    }
    for (title, ops) in [
        ("success requests (get, put, del):", &mut r.success),
        ("failure requests (get, put, del):", &mut r.failure),
    ] {
        say(title);
        loop {
            let line = read_line(input)?;
            if line.is_empty() {
                break;
            }
            ops.push(parse_request(&line)?);
        }
    }
    Ok(r)
}

fn txn(ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "txn command does not accept argument",
            ));
        }
        let interactive = ctx.flags.flag("interactive");
        let req = read_txn(
            &mut std::io::stdin().lock(),
            interactive,
            &mut std::io::stdout(),
        )?;
        let c = ctx.client().await?;
        let resp = ctx.timed(c.kv().txn(req)).await?;
        ctx.printer
            .txn(&resp)
            .map_err(|e| Fail::new(exit::BAD_FEATURE, e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_etcdctl_syntax() {
        let input =
            "mod(\"k\") > \"0\"\nvalue(\"a b\") = \"x\"\n\nput k v2\nget k --prefix\n\ndel k\n\n";
        let r = read_txn(&mut input.as_bytes(), false, &mut Vec::new()).expect("txn");
        assert_eq!(
            (r.compare.len(), r.success.len(), r.failure.len()),
            (2, 2, 1)
        );
        assert_eq!(r.compare[1].key, b"a b");
        let e = read_txn(&mut "bogus\n\n".as_bytes(), false, &mut Vec::new()).expect_err("error");
        assert_eq!(
            (e.code, e.msg.as_str()),
            (exit::INVALID_INPUT, "malformed comparison: bogus")
        );
        let e = read_txn(&mut "\nput k v".as_bytes(), false, &mut Vec::new()).expect_err("error");
        assert_eq!(e.msg, "EOF");
    }
}
