//! [`Ctx`]: what every command runs with, its parsed flags and the flags it inherits.
//! It knows no command and no connection: [`Ctx::session`], which reads the environment
//! and the global flags into client settings, is [`crate::session`]'s.

use crate::args::{Parsed, Spec};

/// A command about to run: its flags (and positional arguments).
pub struct Ctx {
    /// Parsed flags, global and the command's.
    pub flags: Parsed,
    /// The flags it inherits from the root and the groups above it: those `ETCDCTL_*`
    /// variables may set.
    pub inherited: Vec<Spec>,
}
