//! Real containers for the tests, offline: podman with the runc runtime, started from a root
//! file system directory holding a static busybox (no image, no registry), removed on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A podman set-up this machine can run: a busybox root file system and a `containers.conf`
/// whose default rlimits stay within the hard limits here (podman's own defaults exceed them).
pub struct Podman {
    dir: tempfile::TempDir,
}

impl Podman {
    /// The set-up, or why there is none (podman, runc or busybox missing: `scripts/deps.sh`
    /// installs them).
    pub fn new() -> Result<Podman, String> {
        for tool in ["podman", "runc"] {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if !found {
                return Err(format!(
                    "{tool} is not installed (scripts/deps.sh installs it)"
                ));
            }
        }
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("busybox is not installed (scripts/deps.sh installs busybox-static)")?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let root = dir.path().join("rootfs");
        for d in ["bin", "proc", "sys", "dev", "etc", "tmp"] {
            std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
        }
        std::fs::copy(busybox, root.join("bin/busybox")).map_err(|e| e.to_string())?;
        for applet in ["sh", "sleep", "cat", "grep", "true"] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet))
                .map_err(|e| e.to_string())?;
        }
        std::fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]\n",
        )
        .map_err(|e| e.to_string())?;
        Ok(Podman { dir })
    }

    pub fn rootfs(&self) -> PathBuf {
        self.dir.path().join("rootfs")
    }

    /// `podman` with this set-up's configuration.
    pub fn command(&self) -> Command {
        let mut c = Command::new("podman");
        c.env("CONTAINERS_CONF", self.dir.path().join("containers.conf"));
        c.args(["--runtime", "runc"]);
        c
    }

    /// Starts `script` under busybox `sh -c` in a detached container named `name` on `cpus`
    /// (`--cpuset-cpus`); the container is removed when the value is dropped.
    pub fn start(&self, name: &str, cpus: &str, script: &str) -> Result<Container<'_>, String> {
        // A container of that name left by an earlier, killed test run.
        let _ = self.command().args(["rm", "-f", "-t", "0", name]).output();
        let out = self
            .command()
            .args([
                "run",
                "-d",
                "--cpuset-cpus",
                cpus,
                "--name",
                name,
                "--rootfs",
            ])
            .arg(self.rootfs())
            .args(["/bin/sh", "-c", script])
            .output()
            .map_err(|e| format!("cannot run podman: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "podman run {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let c = Container {
            podman: self,
            name: name.to_string(),
            id,
        };
        c.pid()?;
        Ok(c)
    }
}

/// A running container this test started.
pub struct Container<'a> {
    podman: &'a Podman,
    pub name: String,
    /// The full id podman gave it.
    pub id: String,
}

impl Container<'_> {
    /// The host pid of its first process.
    pub fn pid(&self) -> Result<u32, String> {
        let out = self
            .podman
            .command()
            .args(["inspect", "--format", "{{.State.Pid}}", &self.name])
            .output()
            .map_err(|e| format!("cannot run podman inspect: {e}"))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| {
                format!(
                    "container {} has no running process: {}",
                    self.name,
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }

    /// Runs `script` in the running container (`podman exec`, detached): a process that
    /// joins the container's cgroup after it started.
    pub fn exec_detached(&self, script: &str) -> Result<(), String> {
        let out = self
            .podman
            .command()
            .args(["exec", "-d", &self.name, "/bin/sh", "-c", script])
            .output()
            .map_err(|e| format!("cannot run podman exec: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "podman exec in {} failed: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        // `-t 0`: busybox sh as pid 1 ignores SIGTERM; SIGKILL at once instead of after 10 s.
        let _ = self
            .podman
            .command()
            .args(["rm", "-f", "-t", "0", &self.name])
            .output();
    }
}
