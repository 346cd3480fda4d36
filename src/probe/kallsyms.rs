//! Kernel addresses to symbol names through /proc/kallsyms (read once, binary search), so
//! a kworker's work function prints as `vmstat_update`.

use std::collections::HashMap;

pub struct Kallsyms {
    /// (address, where its name is in `names`), sorted by address.
    syms: Vec<(u64, NameAt)>,
    /// Every name, one after another: two allocations for some 100,000 symbols, not one
    /// each (freeing a String per symbol cost a run's end some 3 ms).
    names: String,
    cache: HashMap<u64, String>,
}

#[derive(Clone, Copy)]
struct NameAt {
    start: u32,
    len: u32,
}

impl Kallsyms {
    /// Loads the text symbols. Without root, kallsyms shows zero addresses: the table is then
    /// empty and addresses print as hex.
    pub fn load() -> Kallsyms {
        let text =
            crate::platform::input::read_proc("/proc/kallsyms", crate::platform::input::KALLSYMS)
                .unwrap_or_default();
        Kallsyms::parse(&text)
    }

    pub fn parse(text: &str) -> Kallsyms {
        let mut names = String::new();
        let mut syms: Vec<(u64, NameAt)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                if addr == 0 || !matches!(kind, "t" | "T" | "w" | "W") {
                    return None;
                }
                let at = NameAt {
                    start: u32::try_from(names.len()).ok()?,
                    len: u32::try_from(name.len()).ok()?,
                };
                names.push_str(name);
                Some((addr, at))
            })
            .collect();
        syms.sort_unstable_by_key(|s| s.0);
        Kallsyms {
            syms,
            names,
            cache: HashMap::new(),
        }
    }

    fn name_at(&self, at: NameAt) -> &str {
        let start = at.start as usize;
        self.names.get(start..start + at.len as usize).unwrap_or("")
    }

    /// True when /proc/kallsyms showed no addresses (no CAP_SYSLOG): names print as hex.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The address of a text symbol, None when absent or hidden. A linear scan: for the few
    /// addresses the probes are given before load.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.syms
            .iter()
            .find(|s| self.name_at(s.1) == name)
            .map(|s| s.0)
    }

    /// `vmstat_update`, `vmstat_update+0x12` inside a function, or the address in hex.
    pub fn name(&mut self, addr: u64) -> String {
        if addr == 0 {
            return String::new();
        }
        if let Some(n) = self.cache.get(&addr) {
            return n.clone();
        }
        let idx = self.syms.partition_point(|s| s.0 <= addr);
        let name = match idx.checked_sub(1).map(|i| self.syms[i]) {
            Some((a, n)) if a == addr => self.name_at(n).to_string(),
            Some((a, n)) if addr - a < 0x10_0000 => format!("{}+{:#x}", self.name_at(n), addr - a),
            _ => format!("{addr:#x}"),
        };
        self.cache.insert(addr, name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_exact_and_offset_addresses() {
        let mut k = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81234560 t vmstat_update\nffffffff81234600 T refresh_vm_stats\n0000000000000000 A fixed\n",
        );
        assert_eq!(k.name(0xffffffff81234560), "vmstat_update");
        assert_eq!(k.name(0xffffffff81234570), "vmstat_update+0x10");
        assert_eq!(k.name(0xffffffff81234600), "refresh_vm_stats");
        assert_eq!(k.name(0x1000), "0x1000");
        assert_eq!(k.name(0), "");
        assert_eq!(k.address_of("refresh_vm_stats"), Some(0xffffffff81234600));
        assert_eq!(k.address_of("fixed"), None);
        assert_eq!(k.address_of("hrtimer_wakeup"), None);
    }
}
