//! Go's texts for I/O errors, which etcd's tools print as they come: a syscall errno
//! is its lower-case text ("no such file or directory"), an `*os.PathError` is
//! `<op> <path>: <errno text>`.
//!
//! Invariant: Rust's text of an OS error minus its " (os error N)", first letter lower
//! case, is Go's errno text (both come from the C library's `strerror` table).

use std::path::Path;

/// The errno text of `e` as Go prints it ("no such file or directory").
pub fn errno_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Go's `*os.PathError` text: `<op> <path>: <errno text>`.
pub fn path_error(op: &str, path: impl AsRef<Path>, e: &std::io::Error) -> String {
    format!("{op} {}: {}", path.as_ref().display(), errno_text(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_go() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(
            path_error("open", Path::new("nope.db"), &e),
            "open nope.db: no such file or directory"
        );
        assert_eq!(
            path_error("open", "dir/x.part", &e),
            "open dir/x.part: no such file or directory"
        );
        let e = std::io::Error::from_raw_os_error(22);
        assert_eq!(
            path_error("seek", Path::new("tiny.db"), &e),
            "seek tiny.db: invalid argument"
        );
        let e = std::io::Error::from_raw_os_error(28);
        assert_eq!(errno_text(&e), "no space left on device");
        let e = std::io::Error::other("");
        assert_eq!(errno_text(&e), "");
    }
}
