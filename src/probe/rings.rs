//! The per-CPU record rings (`rings` in the BPF object; the protocol is told in
//! `bpf/jitterscope.h`, at `struct js_cpu_counters`): plain memory shared with the programs,
//! where a record costs them a compare-and-swap and a few stores instead of the BPF ring
//! buffer's two helper calls, its lock and its interrupt masking (`scripts/bench.sh` prints the
//! per-event cost of each program).
//!
//! The reader takes committed records from every CPU's ring, earliest end first: each ring is
//! in the order its CPU wrote it, and every record ends when it is written, so the records
//! reach the engine in time order across CPUs (the BPF ring buffer gave the order of its
//! reserves). A slot taken but not yet committed (a program interrupted while it fills one)
//! holds its ring back until it is; nothing is read past it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use std::os::fd::AsFd;

use super::load;
use super::skel::types::{js_cpu_counters, js_record};
use super::{JitterscopeSkel, OpenJitterscopeSkel, ProbeError};
use crate::model::Cpu;

/// The size of a record in the rings.
pub const RECORD_BYTES: usize = std::mem::size_of::<js_record>();

/// Where `commit` lies in a record (its last field).
const COMMIT_OFFSET: usize = RECORD_BYTES - 4;

/// How the rings are laid out: each CPU's slots (a power of two), its ring after the previous
/// CPU's in the `rings` map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingLayout {
    pub slots: Vec<u32>,
}

impl RingLayout {
    /// A ring for each of `cpus` CPUs: a measured CPU's holds at least `bytes` of records
    /// (`--ringbuf-size`), rounded up to a power of two records; any other CPU writes only the
    /// causes it sends to a measured one, in a ring a sixteenth of that size (at least 8).
    pub fn new(bytes: u32, cpus: u32, measured: &[Cpu]) -> Self {
        let big = (bytes as usize)
            .div_ceil(RECORD_BYTES)
            .clamp(8, 1 << 30)
            .next_power_of_two() as u32;
        let small = (big / 16).max(8);
        RingLayout {
            slots: (0..cpus)
                .map(|c| if measured.contains(&c) { big } else { small })
                .collect(),
        }
    }

    /// Entries of the `rings` array map.
    pub fn entries(&self) -> u32 {
        self.slots.iter().fold(0u32, |a, &s| a.saturating_add(s))
    }

    pub fn bytes(&self) -> usize {
        self.entries() as usize * RECORD_BYTES
    }

    /// Each CPU's first entry and slots.
    fn rings(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.slots.iter().scan(0u32, |base, &slots| {
            let at = *base;
            *base = base.saturating_add(slots);
            Some((at, slots))
        })
    }
}

/// Lays out a record ring for every possible CPU (`RingLayout::new`, the `measured` CPUs'
/// holding `bytes`), told to the programs (each CPU's `counters` line) and to the `rings` map
/// of `open`, before load.
pub fn size(
    open: &mut OpenJitterscopeSkel,
    bytes: u32,
    measured: &[Cpu],
) -> Result<RingLayout, ProbeError> {
    const SIZE: &str = "size the per-CPU record rings";
    let cpus = libbpf_rs::num_possible_cpus().map_err(load::other(SIZE))?;
    let bss = open.maps.bss_data.as_deref_mut().ok_or(ProbeError::Other {
        action: SIZE.into(),
        cause: "the BPF object's .bss is not memory-mapped".into(),
    })?;
    // The programs keep rings for the first JS_MAX_CPUS CPUs (the `counters` lines).
    let layout = RingLayout::new(bytes, cpus.min(bss.counters.len()) as u32, measured);
    for (line, (base, slots)) in bss.counters.iter_mut().zip(layout.rings()) {
        line.ring_base = base;
        line.ring_mask = slots - 1;
    }
    open.maps
        .rings
        .set_max_entries(layout.entries())
        .map_err(load::other(SIZE))?;
    Ok(layout)
}

/// Maps the loaded `skel`'s rings (laid out by `size` as `layout`), their positions in the
/// .bss the skeleton maps. Drop the value before the skeleton.
pub fn open(skel: &mut JitterscopeSkel, layout: &RingLayout) -> Result<Rings, ProbeError> {
    let bss = skel.maps.bss_data.as_deref_mut().ok_or(ProbeError::Other {
        action: "map the per-CPU record rings".into(),
        cause: "the BPF object's .bss is not memory-mapped".into(),
    })?;
    let at = positions_in(bss.counters.as_mut_ptr());
    let noted = bss.lost_pending.as_ptr();
    // SAFETY: the .bss mapping lives as long as the skeleton, which the caller keeps longer
    // than the rings; `counters` has a line for each CPU of `layout` (capped by `size`).
    let mut rings = unsafe { Rings::map(skel.maps.rings.as_fd(), layout, at) }?;
    for (cpu, ring) in rings.rings.iter_mut().enumerate() {
        // SAFETY: `lost_pending` has as many slots as `counters` has lines, in the same
        // mapping; `since` is an aligned u64.
        ring.noted =
            Some(unsafe { std::ptr::addr_of!((*noted.add(cpu)).since) } as *const AtomicU64);
    }
    Ok(rings)
}

/// One CPU's ring as the reader sees it: its positions are in the `counters` line of the CPU
/// (the programs' .bss), its slots in the rings' mapping.
struct Ring {
    slots: *mut u8,
    /// Its slots less one.
    mask: u64,
    head: *const AtomicU64,
    tail: *const AtomicU64,
    /// The start of the CPU's lost window not yet reported in a record, 0 when none.
    lost_open: *const AtomicU64,
    /// The CPU's drops noted from elsewhere (`lost_pending`): their first one's time, 0 when
    /// none. None where the programs' .bss is not there (tests).
    noted: Option<*const AtomicU64>,
    /// The reader's position (what it last stored in `tail`, plus what it has taken since).
    next: u64,
    /// The first position not yet glanced at (`Rings::glance`): records between `next` and
    /// it were seen and left in place.
    seen: u64,
}

/// Where the rings' positions are: the programs' `counters` array (.bss), a line per CPU,
/// with head and tail at these byte offsets into each line.
#[derive(Debug, Clone, Copy)]
pub struct Positions {
    pub base: *mut u8,
    pub line: usize,
    pub head: usize,
    pub tail: usize,
    pub lost_open: usize,
}

/// Reads the rings. Owns its mapping of the `rings` map (when made by `map`); the counters'
/// lines belong to the skeleton's .bss mapping, which must outlive it.
pub struct Rings {
    /// The mapping to undo on drop (address, length), None when the memory is lent.
    mapping: Option<(*mut u8, usize)>,
    rings: Vec<Ring>,
    /// Rings seen holding a committed record at the last look, their next record's end.
    ready: Vec<(usize, u64)>,
}

// SAFETY: the raw pointers are into shared mappings that every thread of the process sees;
// `Rings` is used by one thread at a time (it is not Sync).
unsafe impl Send for Rings {}

impl Rings {
    /// Maps the `rings` map (`fd`, laid out as `layout`) and reads it with the positions at
    /// `at`. The mapping is populated now, so that the process's memory shows the rings'
    /// whole size from the start (their pages were allocated when the map was created).
    ///
    /// # Safety
    /// `at` must describe a line for each CPU of `layout`, in a mapping that outlives the
    /// returned value.
    pub unsafe fn map(
        fd: std::os::fd::BorrowedFd<'_>,
        layout: &RingLayout,
        at: Positions,
    ) -> Result<Self, ProbeError> {
        use std::os::fd::AsRawFd;
        let len = layout.bytes();
        // SAFETY: a shared mapping of a BPF_F_MMAPABLE array map of `len` bytes of values.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(ProbeError::Other {
                action: "map the per-CPU record rings".into(),
                cause: format!(
                    "mmap of {len} bytes failed: {}",
                    std::io::Error::last_os_error()
                ),
            });
        }
        // SAFETY: the mapping holds `layout`'s slots; `at` is the caller's promise.
        let mut rings = unsafe { Self::over(map as *mut u8, layout, at) };
        rings.mapping = Some((map as *mut u8, len));
        Ok(rings)
    }

    /// Reads rings laid out as `layout` at `slots`, with the positions at `at`.
    ///
    /// # Safety
    /// `slots` must hold `layout.bytes()` bytes, 8-aligned, and `at` describe a line for each
    /// CPU of `layout`, both live (and shared only with ring writers) while the value lives.
    pub unsafe fn over(slots: *mut u8, layout: &RingLayout, at: Positions) -> Self {
        let rings = layout
            .rings()
            .enumerate()
            .map(|(cpu, (base, n))| {
                // SAFETY (all): inside the slots and the lines, per the caller's promise.
                let line = unsafe { at.base.add(cpu * at.line) };
                let tail = unsafe { line.add(at.tail) } as *const AtomicU64;
                Ring {
                    slots: unsafe { slots.add(base as usize * RECORD_BYTES) },
                    mask: n as u64 - 1,
                    head: unsafe { line.add(at.head) } as *const AtomicU64,
                    lost_open: unsafe { line.add(at.lost_open) } as *const AtomicU64,
                    noted: None,
                    next: unsafe { (*tail).load(Ordering::Acquire) },
                    seen: 0,
                    tail,
                }
            })
            .collect();
        Rings {
            mapping: None,
            rings,
            ready: Vec::new(),
        }
    }

    /// The slot of `ring` at its reader's position.
    fn slot(&self, ring: &Ring) -> *mut u8 {
        // SAFETY: the position is masked into the ring's slots.
        unsafe {
            ring.slots
                .add((ring.next & ring.mask) as usize * RECORD_BYTES)
        }
    }

    /// The end time of the record at `ring`'s position when it is committed.
    fn peek(&self, ring: &Ring) -> Option<u64> {
        let slot = self.slot(ring);
        // SAFETY: an aligned u32 of a live slot; Acquire pairs with the writer's ordered
        // stores (the record's fields before its commit).
        let commit = unsafe { &*(slot.add(COMMIT_OFFSET) as *const AtomicU32) };
        if commit.load(Ordering::Acquire) == 0 {
            return None;
        }
        // SAFETY: the committed record is not written again before the reader hands it
        // back; end_ns is an aligned u64 at a fixed offset.
        Some(unsafe { std::ptr::read_volatile(slot.add(END_OFFSET) as *const u64) })
    }

    /// Takes the committed record at `ring`'s position and hands its slot back; with it,
    /// whether `glance` had shown it already.
    fn take(&mut self, i: usize) -> (js_record, bool) {
        let slot = self.slot(&self.rings[i]);
        // SAFETY: committed (peeked), so complete and stable until handed back below.
        let rec = unsafe { std::ptr::read_volatile(slot as *const js_record) };
        let ring = &mut self.rings[i];
        let glanced = ring.next < ring.seen;
        ring.next += 1;
        // SAFETY: aligned atomics in live mappings. The commit mark is cleared before the
        // tail moves past the slot, so a writer that takes it again finds it clear.
        unsafe {
            (*(slot.add(COMMIT_OFFSET) as *const AtomicU32)).store(0, Ordering::Relaxed);
            (*ring.tail).store(ring.next, Ordering::Release);
        }
        (rec, glanced)
    }

    /// Finds the rings holding a committed record.
    fn look(&mut self) {
        self.ready.clear();
        for i in 0..self.rings.len() {
            if let Some(end) = self.peek(&self.rings[i]) {
                self.ready.push((i, end));
            }
        }
    }

    /// Hands `take` up to `max` committed records, earliest end first among the rings that
    /// held some at the last look (looked again when none is left); returns how many. Fewer
    /// than `max`: the rings are empty, or wait for a slot being written.
    pub fn consume(&mut self, max: usize, take: &mut dyn FnMut(js_record)) -> usize {
        self.consume_glanced(max, &mut |r, _| take(r))
    }

    /// Like `consume`, telling `take` with each record whether `glance` showed it already.
    pub fn consume_glanced(&mut self, max: usize, take: &mut dyn FnMut(js_record, bool)) -> usize {
        let mut n = 0;
        while n < max {
            if self.ready.is_empty() {
                self.look();
                if self.ready.is_empty() {
                    break;
                }
            }
            let (at, &(i, _)) = self
                .ready
                .iter()
                .enumerate()
                .min_by_key(|(_, (_, end))| *end)
                .expect("ready is not empty");
            let (rec, glanced) = self.take(i);
            take(rec, glanced);
            n += 1;
            match self.peek(&self.rings[i]) {
                Some(end) => self.ready[at].1 = end,
                None => {
                    self.ready.swap_remove(at);
                }
            }
        }
        n
    }

    /// Shows `each` up to `max` committed records not shown before, ring by ring in the
    /// order each CPU wrote them, and leaves them in place (they are taken later, by
    /// `consume`); returns how many. A ring's glance stops at a slot still being written.
    pub fn glance(&mut self, max: usize, each: &mut dyn FnMut(&js_record)) -> usize {
        let mut n = 0;
        for ring in &mut self.rings {
            // SAFETY: the line is live while `self` is (see `over`).
            let head = unsafe { (*ring.head).load(Ordering::Acquire) };
            let mut at = ring.seen.max(ring.next);
            while at < head && n < max {
                // SAFETY: the position is masked into the ring's slots.
                let slot = unsafe { ring.slots.add((at & ring.mask) as usize * RECORD_BYTES) };
                // Only slots already taken: a free one fetched here would cost the program
                // that writes it next a miss on the measured CPU.
                if at + PREFETCH_AHEAD < head {
                    prefetch(ring, at + PREFETCH_AHEAD);
                }
                // SAFETY: as in `peek`: an aligned u32 of a live slot, Acquire pairing with
                // the writer's commit.
                let commit = unsafe { &*(slot.add(COMMIT_OFFSET) as *const AtomicU32) };
                if commit.load(Ordering::Acquire) == 0 {
                    break;
                }
                // SAFETY: committed and not handed back (the tail is behind it), so complete
                // and stable: no writer takes the slot again before `consume` frees it.
                let rec = unsafe { std::ptr::read_volatile(slot as *const js_record) };
                each(&rec);
                at += 1;
                n += 1;
            }
            ring.seen = at;
        }
        n
    }

    /// The share of its slots that the fullest ring holds (reserved by the programs, not yet
    /// taken by the reader): 0 when empty, 1 when full.
    pub fn fullest(&self) -> f64 {
        self.rings
            .iter()
            .map(|r| {
                // SAFETY: the line is live while `self` is (see `over`).
                let head = unsafe { (*r.head).load(Ordering::Acquire) };
                head.saturating_sub(r.next) as f64 / (r.mask + 1) as f64
            })
            .fold(0.0, f64::max)
    }

    /// The CPUs whose records are being lost in a window not yet reported in a record, with
    /// the window's start, into `out`. Its record comes once the CPU's ring has room again,
    /// after a drain made it: a drain that asks before it reads knows of every window whose
    /// record it will not find, so that the stalls in it are not decided as having no kernel
    /// event (`Record::Lost` with no count yet).
    pub fn open_lost(&self, out: &mut Vec<(Cpu, u64)>) {
        for (cpu, r) in self.rings.iter().enumerate() {
            // The noted slot first: the programs move its time into `lost_open` before they
            // clear it, and clear `lost_open` only after committing the window's record.
            // SAFETY (both): aligned u64s in live mappings.
            let noted = r
                .noted
                .map_or(0, |p| unsafe { (*p).load(Ordering::Acquire) });
            let own = unsafe { (*r.lost_open).load(Ordering::Acquire) };
            if let Some(since) = [noted, own].into_iter().filter(|&t| t != 0).min() {
                out.push((cpu as Cpu, since));
            }
        }
    }

    /// Slots taken by writers and not yet handed back, over all rings (what a drain left).
    pub fn pending(&self) -> u64 {
        self.rings
            .iter()
            // SAFETY: an aligned u64 in a live mapping.
            .map(|r| unsafe { (*r.head).load(Ordering::Acquire) }.saturating_sub(r.next))
            .sum()
    }
}

/// Records ahead of the one read that a glance asks the CPU to fetch: a second's records
/// were written long before (a glance over 1,300 of them took 168 µs, 41 µs fetching ahead).
const PREFETCH_AHEAD: u64 = 6;

/// Asks the CPU to fetch the slot at `at` of `ring` (both its cache lines) into its cache.
fn prefetch(ring: &Ring, at: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: the position is masked into the ring's slots; a prefetch reads nothing.
        let slot = unsafe { ring.slots.add((at & ring.mask) as usize * RECORD_BYTES) };
        // SAFETY: a hint, on addresses inside the slot (a record is 96 bytes).
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(slot as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(slot.add(64) as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ring, at);
}

/// Where `end_ns` lies in a record.
const END_OFFSET: usize = std::mem::offset_of!(js_record, end_ns);

/// The positions of the programs' `counters` array starting at `base`.
pub fn positions_in(base: *mut js_cpu_counters) -> Positions {
    Positions {
        base: base as *mut u8,
        line: std::mem::size_of::<js_cpu_counters>(),
        head: std::mem::offset_of!(js_cpu_counters, head),
        tail: std::mem::offset_of!(js_cpu_counters, tail),
        lost_open: std::mem::offset_of!(js_cpu_counters, lost_open),
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        if let Some((map, len)) = self.mapping {
            // SAFETY: the mapping made in `map`, not used after this.
            unsafe { libc::munmap(map as *mut libc::c_void, len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_cpu_holds_the_size_asked_and_the_others_a_sixteenth() {
        // 8 MiB: 87,382 records, rounded up.
        let l = RingLayout::new(8 << 20, 4, &[1, 3]);
        assert_eq!(l.slots, [8192, 131072, 8192, 131072]);
        assert_eq!(
            l.rings().collect::<Vec<_>>(),
            [(0, 8192), (8192, 131072), (139264, 8192), (147456, 131072)]
        );
        assert_eq!(l.entries(), 278528);
        assert_eq!(l.bytes(), 278528 * RECORD_BYTES);
        // The smallest rings: 8 records.
        assert_eq!(RingLayout::new(4096, 2, &[1]).slots, [8, 64]);
        assert_eq!(RingLayout::new(1, 1, &[0]).slots, [8]);
    }

    /// Rings in heap memory, written as the programs write them (`ring_take`, `ring_commit`).
    struct Fake {
        slots: *mut u8,
        lines: *mut js_cpu_counters,
        layout: RingLayout,
        _mem: (Vec<u64>, Vec<js_cpu_counters>),
    }

    impl Fake {
        fn new(layout: RingLayout) -> Fake {
            let mut words = vec![0u64; layout.bytes() / 8];
            let mut lines = vec![js_cpu_counters::default(); layout.slots.len()];
            for (line, (base, slots)) in lines.iter_mut().zip(layout.rings()) {
                line.ring_base = base;
                line.ring_mask = slots - 1;
            }
            Fake {
                slots: words.as_mut_ptr() as *mut u8,
                lines: lines.as_mut_ptr(),
                layout,
                _mem: (words, lines),
            }
        }

        fn reader(&self) -> Rings {
            // SAFETY: the memory lives in `self`, which the tests keep beside the reader.
            unsafe { Rings::over(self.slots, &self.layout, positions_in(self.lines)) }
        }

        /// Takes a slot of `cpu`'s ring and fills it with a record ending at `end`; commits it
        /// when asked. None when the ring is full.
        fn write(&self, cpu: usize, end: u64, commit: bool) -> Option<*mut js_record> {
            // SAFETY: inside the fake's memory, which only these tests and the reader touch.
            unsafe {
                let line = self.lines.add(cpu);
                let (head, mask) = ((*line).head, (*line).ring_mask as u64);
                if head - (*line).tail > mask {
                    return None;
                }
                (*line).head = head + 1;
                let at = (*line).ring_base as usize + (head & mask) as usize;
                let r = (self.slots as *mut js_record).add(at);
                (*r).kind = 1;
                (*r).cpu = cpu as u32;
                (*r).end_ns = end;
                if commit {
                    (*r).commit = 1;
                }
                Some(r)
            }
        }
    }

    fn drain(rings: &mut Rings, max: usize) -> Vec<(u32, u64)> {
        let mut got = Vec::new();
        rings.consume(max, &mut |r| got.push((r.cpu, r.end_ns)));
        got
    }

    #[test]
    fn a_glance_shows_each_record_once_and_leaves_it_for_the_reader() {
        let fake = Fake::new(RingLayout::new(4096, 2, &[]));
        for (cpu, end) in [(0, 10), (1, 5), (0, 20)] {
            fake.write(cpu, end, true).unwrap();
        }
        let mut rings = fake.reader();
        let glance = |rings: &mut Rings, max: usize| {
            let mut got = Vec::new();
            rings.glance(max, &mut |r| got.push((r.cpu, r.end_ns)));
            got
        };
        // Ring by ring, in each CPU's order; a bound stops it where the next glance goes on.
        assert_eq!(glance(&mut rings, 2), [(0, 10), (0, 20)]);
        assert_eq!(glance(&mut rings, 100), [(1, 5)]);
        assert!(glance(&mut rings, 100).is_empty());
        assert_eq!(rings.pending(), 3, "nothing taken");
        // A slot being written holds its ring's glance back, and the records after it.
        let open = fake.write(1, 30, false).unwrap();
        fake.write(1, 40, true).unwrap();
        fake.write(0, 25, true).unwrap();
        assert_eq!(glance(&mut rings, 100), [(0, 25)]);
        // SAFETY: the fake's slot, no other writer.
        unsafe { (*open).commit = 1 };
        assert_eq!(glance(&mut rings, 100), [(1, 30), (1, 40)]);
        // The reader takes them all, each told whether a glance showed it.
        let mut taken = Vec::new();
        rings.consume_glanced(100, &mut |r, glanced| taken.push((r.end_ns, glanced)));
        assert_eq!(
            taken,
            [
                (5, true),
                (10, true),
                (20, true),
                (25, true),
                (30, true),
                (40, true)
            ]
        );
        // Written after the last glance: taken unseen, and never shown by a later glance.
        fake.write(0, 50, true).unwrap();
        let mut taken = Vec::new();
        rings.consume_glanced(100, &mut |r, glanced| taken.push((r.end_ns, glanced)));
        assert_eq!(taken, [(50, false)]);
        fake.write(0, 60, true).unwrap();
        assert_eq!(glance(&mut rings, 100), [(0, 60)]);
    }

    #[test]
    fn records_of_every_cpu_come_out_earliest_end_first() {
        let fake = Fake::new(RingLayout::new(4096, 3, &[]));
        for (cpu, end) in [(0, 10), (1, 5), (0, 20), (2, 15), (1, 30), (2, 16)] {
            fake.write(cpu, end, true).unwrap();
        }
        let mut rings = fake.reader();
        assert_eq!(rings.pending(), 6);
        assert_eq!(drain(&mut rings, 4), [(1, 5), (0, 10), (2, 15), (2, 16)]);
        assert_eq!(drain(&mut rings, 100), [(0, 20), (1, 30)]);
        assert_eq!(rings.pending(), 0);
        assert!(drain(&mut rings, 100).is_empty());
        // Every slot handed back: commit cleared, tail at head.
        // SAFETY: the fake's memory, no writer running.
        unsafe {
            for cpu in 0..3 {
                let line = &*fake.lines.add(cpu);
                assert_eq!(line.tail, line.head, "CPU {cpu}");
            }
            let n = fake.layout.entries() as usize;
            assert!((0..n).all(|i| (*(fake.slots as *const js_record).add(i)).commit == 0));
        }
    }

    #[test]
    fn the_fullest_ring_is_the_share_of_its_own_slots_taken_and_not_read() {
        // CPU 0 measured (64 slots), CPU 1 not (8 slots).
        let fake = Fake::new(RingLayout::new(64 * 96, 2, &[0]));
        let mut rings = fake.reader();
        assert_eq!(rings.fullest(), 0.0);
        for end in 0..16 {
            fake.write(0, end, true).unwrap();
        }
        assert_eq!(rings.fullest(), 0.25);
        // Two of CPU 1's eight: its own share, though it holds fewer records.
        fake.write(1, 100, true).unwrap();
        fake.write(1, 101, true).unwrap();
        assert_eq!(rings.fullest(), 0.25);
        fake.write(1, 102, false).unwrap();
        assert_eq!(
            rings.fullest(),
            3.0 / 8.0,
            "a slot taken counts before its commit"
        );
        assert_eq!(drain(&mut rings, 17).len(), 17);
        assert_eq!(rings.fullest(), 2.0 / 8.0, "what was read no longer counts");
    }

    #[test]
    fn a_slot_being_written_holds_its_ring_back_and_no_other() {
        let fake = Fake::new(RingLayout::new(4096, 2, &[1]));
        let open = fake.write(0, 1, false).unwrap();
        fake.write(0, 2, true).unwrap();
        fake.write(1, 3, true).unwrap();
        let mut rings = fake.reader();
        assert_eq!(drain(&mut rings, 100), [(1, 3)]);
        assert_eq!(rings.pending(), 2);
        // SAFETY: the slot taken above, in the fake's memory.
        unsafe { (*open).commit = 1 };
        assert_eq!(drain(&mut rings, 100), [(0, 1), (0, 2)]);
    }

    #[test]
    fn open_lost_windows_are_read_from_the_cpus_line_and_its_noted_slot() {
        let fake = Fake::new(RingLayout::new(4096, 3, &[1, 2]));
        let rings = fake.reader();
        let open = |rings: &Rings| {
            let mut got = Vec::new();
            rings.open_lost(&mut got);
            got
        };
        assert!(open(&rings).is_empty());
        // SAFETY (all): the fake's memory, no writer running.
        unsafe { (*fake.lines.add(2)).lost_open = 700 };
        assert_eq!(open(&rings), [(2, 700)]);
        // The programs' slot for drops noted from elsewhere: the earlier start wins.
        let mut noted = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(650)];
        let mut rings = rings;
        for (ring, slot) in rings.rings.iter_mut().zip(&mut noted) {
            ring.noted = Some(slot as *const AtomicU64);
        }
        assert_eq!(open(&rings), [(2, 650)]);
        noted[1].store(900, Ordering::Relaxed);
        assert_eq!(open(&rings), [(1, 900), (2, 650)]);
        noted[2].store(0, Ordering::Relaxed);
        unsafe { (*fake.lines.add(2)).lost_open = 0 };
        assert_eq!(open(&rings), [(1, 900)]);
    }

    #[test]
    fn a_full_ring_refuses_records_until_the_reader_hands_slots_back() {
        let fake = Fake::new(RingLayout::new(1, 1, &[0]));
        let mut rings = fake.reader();
        let mut end = 0;
        let mut seen = Vec::new();
        // Several laps around the ring, the reader taking 3 at a time.
        for _ in 0..10 {
            while fake.write(0, end + 1, true).is_some() {
                end += 1;
            }
            seen.extend(drain(&mut rings, 3).into_iter().map(|(_, e)| e));
        }
        seen.extend(drain(&mut rings, 100).into_iter().map(|(_, e)| e));
        assert_eq!(seen, (1..=end).collect::<Vec<_>>());
        assert_eq!(end, 8 + 9 * 3, "the ring holds 8; each look freed 3");
    }
}
