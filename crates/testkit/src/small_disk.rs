//! A small disk for tests of what happens when it fills: a tmpfs of a few MiB mounted on
//! a directory, grown on demand, unmounted when dropped. Mounting needs root (CI runs
//! the suite as root; `scripts/test.sh` says so).

use std::path::PathBuf;
use std::process::Command;

/// A tmpfs mounted at `path`.
pub struct SmallDisk {
    /// Where it is mounted.
    pub path: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `6m`) at `path`, created if missing.
    /// Panics, saying why, when it cannot (not root).
    pub fn mount(path: PathBuf, size: &str) -> SmallDisk {
        std::fs::create_dir_all(&path).expect("mkdir");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        SmallDisk { path }
    }

    /// Gives it `size` in all, keeping its files.
    pub fn grow(&self, size: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.path)
            .status()
            .expect("run mount");
        assert!(st.success(), "remount {} to {size}", self.path.display());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
