//! The kubelet's CPU manager: which container of which pod owns which CPUs exclusively.
//!
//! With `--cpu-manager-policy=static` the kubelet gives each container of a Guaranteed pod
//! with an integer CPU request CPUs of its own and takes them out of every other container's
//! cpuset. It keeps the assignment in its checkpoint, `/var/lib/kubelet/cpu_manager_state`:
//!
//! ```json
//! {"policyName":"static","defaultCpuSet":"0,3-7",
//!  "entries":{"<pod uid>":{"<container name>":"1-2"}},"checksum":1234567}
//! ```
//!
//! With the `none` policy there are no entries: every container runs on the default set.
//! Pods are named by the kubelet's log directories, `/var/log/pods/<namespace>_<name>_<uid>`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::Cpu;
use crate::system::config::parse_cpulist;

/// Where the kubelet keeps its CPU manager checkpoint.
pub const STATE_FILE: &str = "/var/lib/kubelet/cpu_manager_state";

/// Where the kubelet keeps one log directory per pod.
pub const POD_LOGS: &str = "/var/log/pods";

/// The largest checkpoint read. One entry is under 100 bytes and a node runs at most a few
/// hundred pods (the kubelet's default `--max-pods` is 110), so a real checkpoint is tens of
/// kB; a file past this is not one.
pub const MAX_STATE_BYTES: u64 = 1 << 20;

/// Pod log directories looked at, at most: a node's pods, with ample room.
const MAX_POD_DIRS: usize = 100_000;

/// One container's exclusive CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusive {
    pub pod_uid: String,
    pub container: String,
    pub cpus: Vec<Cpu>,
}

/// The CPU manager's checkpoint, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuManagerState {
    /// `static` or `none`.
    pub policy: String,
    /// The CPUs every container without exclusive CPUs shares.
    pub default_cpus: Vec<Cpu>,
    /// Containers with exclusive CPUs, by pod UID then container name.
    pub exclusive: Vec<Exclusive>,
    /// The kubelet's checksum of the checkpoint, as written (not verified).
    pub checksum: Option<u64>,
}

/// Why a checkpoint could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("{0}: cannot read it: {1}")]
    Unreadable(String, String),
    #[error(
        "{0}: larger than {MAX_STATE_BYTES} bytes, so not the kubelet's CPU manager checkpoint"
    )]
    Oversized(String),
    #[error("{0}: not the kubelet's CPU manager checkpoint: {1}")]
    Malformed(String, String),
}

fn cpus_of(text: &str, at: &str) -> Result<Vec<Cpu>, String> {
    parse_cpulist(text, None).ok_or_else(|| format!("{at}: {text:?} is not a CPU list"))
}

impl CpuManagerState {
    /// The checkpoint's JSON text; why it is not one, in words.
    pub fn parse(text: &str) -> Result<CpuManagerState, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        let policy = obj
            .get("policyName")
            .and_then(|p| p.as_str())
            .ok_or("no policyName")?
            .to_string();
        let default_cpus = match obj.get("defaultCpuSet") {
            None => Vec::new(),
            Some(d) => cpus_of(
                d.as_str().ok_or("defaultCpuSet is not a string")?,
                "defaultCpuSet",
            )?,
        };
        let mut exclusive = Vec::new();
        let entries = match obj.get("entries") {
            None | Some(serde_json::Value::Null) => serde_json::Map::new(),
            Some(e) => e.as_object().ok_or("entries is not an object")?.clone(),
        };
        // Sorted by pod UID then container name (serde_json's maps keep insertion order).
        let entries: BTreeMap<&String, &serde_json::Value> = entries.iter().collect();
        for (uid, containers) in entries {
            let containers = containers.as_object().ok_or_else(|| {
                format!("entries.{uid} is not an object of containers (a checkpoint by container id, from a kubelet before 1.13, is not read)")
            })?;
            let containers: BTreeMap<&String, &serde_json::Value> = containers.iter().collect();
            for (name, cpus) in containers {
                let at = format!("entries.{uid}.{name}");
                let list = cpus
                    .as_str()
                    .ok_or_else(|| format!("{at} is not a string"))?;
                exclusive.push(Exclusive {
                    pod_uid: uid.clone(),
                    container: name.clone(),
                    cpus: cpus_of(list, &at)?,
                });
            }
        }
        Ok(CpuManagerState {
            policy,
            default_cpus,
            exclusive,
            checksum: obj.get("checksum").and_then(|c| c.as_u64()),
        })
    }

    /// The checkpoint at `path`, read to at most `MAX_STATE_BYTES`.
    pub fn read(path: &Path) -> Result<CpuManagerState, StateError> {
        use std::io::Read;
        let shown = path.display().to_string();
        let file = std::fs::File::open(path)
            .map_err(|e| StateError::Unreadable(shown.clone(), e.to_string()))?;
        let mut bytes = Vec::new();
        file.take(MAX_STATE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| StateError::Unreadable(shown.clone(), e.to_string()))?;
        if bytes.len() as u64 > MAX_STATE_BYTES {
            return Err(StateError::Oversized(shown));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| StateError::Malformed(shown.clone(), "not UTF-8 text".into()))?;
        CpuManagerState::parse(&text).map_err(|why| StateError::Malformed(shown, why))
    }

    /// The container that owns `cpu` exclusively.
    pub fn owner(&self, cpu: Cpu) -> Option<&Exclusive> {
        self.exclusive.iter().find(|e| e.cpus.contains(&cpu))
    }

    /// Every exclusive CPU, sorted.
    pub fn exclusive_cpus(&self) -> Vec<Cpu> {
        let mut v: Vec<Cpu> = self
            .exclusive
            .iter()
            .flat_map(|e| e.cpus.iter().copied())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// `namespace/name` of each pod UID the kubelet's log directories name
/// (`<namespace>_<name>_<uid>`; neither a namespace nor a pod name may hold `_`).
pub fn pod_names(dir: &Path) -> HashMap<String, String> {
    let mut names = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return names;
    };
    for e in entries.flatten().take(MAX_POD_DIRS) {
        let f = e.file_name();
        let Some(f) = f.to_str() else { continue };
        let mut it = f.splitn(3, '_');
        if let (Some(ns), Some(name), Some(uid)) = (it.next(), it.next(), it.next()) {
            if !ns.is_empty() && !name.is_empty() && uid.len() == 36 {
                names.insert(uid.to_string(), format!("{ns}/{name}"));
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8f1b2c3d-4e5f-6789-abcd-ef0123456789";
    const UID2: &str = "11111111-2222-3333-4444-555555555555";

    #[test]
    fn a_static_checkpoint_gives_each_containers_exclusive_cpus() {
        let text = format!(
            r#"{{"policyName":"static","defaultCpuSet":"0,4-7","entries":{{"{UID2}":{{"sidecar":"3"}},"{UID}":{{"engine":"1-2"}}}},"checksum":3402938213}}"#
        );
        let s = CpuManagerState::parse(&text).unwrap();
        assert_eq!(s.policy, "static");
        assert_eq!(s.default_cpus, vec![0, 4, 5, 6, 7]);
        assert_eq!(s.checksum, Some(3402938213));
        assert_eq!(s.exclusive.len(), 2);
        assert_eq!(s.owner(2).unwrap().container, "engine");
        assert_eq!(s.owner(2).unwrap().pod_uid, UID);
        assert_eq!(s.owner(3).unwrap().pod_uid, UID2);
        assert_eq!(s.owner(0), None);
        assert_eq!(s.exclusive_cpus(), vec![1, 2, 3]);
    }

    #[test]
    fn the_none_policy_has_no_exclusive_cpus() {
        let s = CpuManagerState::parse(
            r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#,
        )
        .unwrap();
        assert_eq!(s.policy, "none");
        assert!(s.exclusive.is_empty());
        assert!(s.default_cpus.is_empty());
        assert!(s.exclusive_cpus().is_empty());
    }

    #[test]
    fn malformed_checkpoints_say_what_is_wrong() {
        for (text, why) in [
            ("", "not JSON"),
            ("[1,2]", "not a JSON object"),
            (r#"{"defaultCpuSet":"0"}"#, "no policyName"),
            (
                r#"{"policyName":"static","defaultCpuSet":"0-x"}"#,
                "defaultCpuSet",
            ),
            (
                r#"{"policyName":"static","entries":[]}"#,
                "entries is not an object",
            ),
            (
                r#"{"policyName":"static","entries":{"abc":"1"}}"#,
                "before 1.13",
            ),
            (
                r#"{"policyName":"static","entries":{"u":{"c":"1-"}}}"#,
                "entries.u.c",
            ),
            (
                r#"{"policyName":"static","entries":{"u":{"c":5}}}"#,
                "not a string",
            ),
        ] {
            let err = CpuManagerState::parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn reading_is_bounded_and_says_why_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        let mut text = String::from(r#"{"policyName":"none","x":""#);
        text.push_str(&" ".repeat(MAX_STATE_BYTES as usize));
        text.push_str(r#""}"#);
        std::fs::write(&big, text).unwrap();
        assert!(matches!(
            CpuManagerState::read(&big),
            Err(StateError::Oversized(_))
        ));
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "{").unwrap();
        let err = CpuManagerState::read(&bad).unwrap_err();
        assert!(matches!(err, StateError::Malformed(..)), "{err}");
        assert!(err.to_string().contains("not the kubelet's"), "{err}");
        assert!(matches!(
            CpuManagerState::read(&dir.path().join("none")),
            Err(StateError::Unreadable(..))
        ));
        let good = dir.path().join("good");
        std::fs::write(&good, r#"{"policyName":"static","defaultCpuSet":"0"}"#).unwrap();
        assert_eq!(CpuManagerState::read(&good).unwrap().default_cpus, vec![0]);
    }

    #[test]
    fn pod_names_come_from_the_kubelets_log_directories() {
        let dir = tempfile::tempdir().unwrap();
        for d in [
            format!("prod_trader-7d9f_{UID}"),
            format!("kube-system_kube-proxy-x2v4q_{UID2}"),
            "not-a-pod".to_string(),
            "a_b_short-uid".to_string(),
        ] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let names = pod_names(dir.path());
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[UID], "prod/trader-7d9f");
        assert_eq!(names[UID2], "kube-system/kube-proxy-x2v4q");
        assert!(pod_names(&dir.path().join("absent")).is_empty());
    }
}
