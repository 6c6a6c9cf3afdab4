//! `txn`: reads compares, success requests and failure requests from stdin (each block
//! ends with a blank line), in etcdctl's syntax ([`super::txn_syntax`]), e.g.
//! `mod("k") > "5"` then `put k v`; prompts for each block with `-i`.

use std::io::BufRead;

use oxcd_api::etcdserverpb::TxnRequest;

use super::txn_syntax::{parse_compare, parse_request};
use crate::args::boolean;
use crate::command::{Command, Run};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};

/// `txn [options]`.
pub const TXN: Command = Command {
    path: &["txn"],
    use_: "txn [options]",
    short: "Txn processes all the requests in one transaction",
    long: "",
    flags: &[boolean("interactive", "Input transaction in interactive mode").short('i')],
    persistent: &[],
    run: Some(txn),
};

/// Reads one line as Go's `ReadString('\n')` would: a line without its newline is EOF.
fn read_line(input: &mut dyn BufRead) -> Result<String, Fail> {
    let mut line = Vec::new();
    input
        .read_until(b'\n', &mut line)
        .map_err(|e| Fail::new(exit::INVALID_INPUT, e.to_string()))?;
    if line.last() != Some(&b'\n') {
        return Err(Fail::new(exit::INVALID_INPUT, "EOF"));
    }
    Ok(String::from_utf8_lossy(&line).trim().to_string())
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

fn txn(mut ctx: Ctx) -> Run {
    Box::pin(async move {
        if !ctx.flags.args.is_empty() {
            return Err(Fail::new(
                exit::BAD_ARGS,
                "txn command does not accept argument",
            ));
        }
        // etcdctl sets up its client (environment, output format) before reading stdin.
        let s = ctx.session()?;
        let interactive = ctx.flags.flag("interactive");
        let req = read_txn(
            &mut std::io::stdin().lock(),
            interactive,
            &mut std::io::stdout(),
        )?;
        let resp = s.client().await?.txn(req).await?;
        s.printer
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
            (e.code, e.msg.as_deref()),
            (exit::INVALID_INPUT, Some("malformed comparison: bogus"))
        );
        let e = read_txn(&mut "\nput k v".as_bytes(), false, &mut Vec::new()).expect_err("error");
        assert_eq!(e.msg.as_deref(), Some("EOF"));
        let mut prompts = Vec::new();
        read_txn(&mut "\n\n\n".as_bytes(), true, &mut prompts).expect("empty txn");
        assert_eq!(
            String::from_utf8_lossy(&prompts),
            "compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\n"
        );
    }
}
