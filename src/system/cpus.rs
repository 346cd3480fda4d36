//! CPU lists in the kernel's notation (`0-3,8,10-11`): parsing, printing, and the machine's
//! present, online and allowed sets.

use crate::model::Cpu;
/// Formatting lives with the vocabulary; these names stay for the layers above.
pub use crate::units::{cpumask_hex, format_list};

/// Parses a kernel CPU list (`/sys/devices/system/cpu/online`). Empty text is an empty list.
pub fn parse_kernel_list(text: &str) -> Option<Vec<Cpu>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (Cpu, Cpu) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

fn read_list(path: &str) -> Option<Vec<Cpu>> {
    parse_kernel_list(&crate::platform::input::read_proc(
        path,
        crate::platform::input::PROC_FILE,
    )?)
}

/// The CPUs this machine has (`present`), and which of them are online.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub present: Vec<Cpu>,
    pub online: Vec<Cpu>,
    /// The CPUs this process may run on (affinity, shaped by its cpuset).
    pub allowed: Vec<Cpu>,
}

impl Topology {
    pub fn read() -> Topology {
        let online = read_list("/sys/devices/system/cpu/online").unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, |n| n.get()) as Cpu).collect()
        });
        let present =
            read_list("/sys/devices/system/cpu/present").unwrap_or_else(|| online.clone());
        let allowed = crate::platform::affinity::allowed_cpus().unwrap_or_else(|_| online.clone());
        Topology {
            present,
            online,
            allowed,
        }
    }

    /// Online CPUs that are not in `measured` (where helper threads belong).
    pub fn housekeeping(&self, measured: &[Cpu]) -> Vec<Cpu> {
        self.allowed
            .iter()
            .copied()
            .filter(|c| self.online.contains(c) && !measured.contains(c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_kernel_lists() {
        assert_eq!(parse_kernel_list("0-2,5\n"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_kernel_list(""), Some(vec![]));
        assert_eq!(parse_kernel_list("3-1"), None);
        assert_eq!(format_list(&[5, 0, 1, 2]), "0-2,5");
        assert_eq!(format_list(&[1, 3]), "1,3");
        assert_eq!(cpumask_hex(&[0]), "1");
        assert_eq!(cpumask_hex(&[0, 2]), "5");
        assert_eq!(cpumask_hex(&[0, 33]), "2,00000001");
    }
}
