//! Asking for a password on the terminal, as etcdctl does for `--user name` without one.
//!
//! Invariant: echo is turned off only when stdin is a terminal, and always turned back on.

use std::io::{self, BufRead, IsTerminal, Write};

/// Writes `Password: ` to `prompt_to`, reads a line from stdin without echo when stdin is a
/// terminal, ends the prompt's line and returns the answer with spaces trimmed.
pub fn ask_password(prompt_to: &mut dyn Write) -> io::Result<String> {
    ask_secret("Password: ", prompt_to)
}

/// [`ask_password`] with another prompt.
pub fn ask_secret(prompt: &str, prompt_to: &mut dyn Write) -> io::Result<String> {
    write!(prompt_to, "{prompt}")?;
    prompt_to.flush()?;
    let tty = io::stdin().is_terminal();
    let stty = |arg: &str| {
        if tty {
            let _ = std::process::Command::new("stty")
                .arg(arg)
                .stdin(std::process::Stdio::inherit())
                .status();
        }
    };
    stty("-echo");
    let mut line = String::new();
    let read = io::stdin().lock().read_line(&mut line);
    stty("echo");
    writeln!(prompt_to)?;
    read?;
    Ok(line.trim().to_string())
}
