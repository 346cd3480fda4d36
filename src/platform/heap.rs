//! Room in the allocator's heap made before the recording starts, and kept while it records.
//! Under `mlockall(MCL_FUTURE)` every growth of a heap is populated by the kernel in the
//! system call that grows it — microseconds a page — in one piece on a
//! CPU the collector may share with the workload. Grown once, ahead, and left free in the heap
//! (the allocator never trims, see `system::hold_memory_in_place`), later allocations are
//! carved from that room instead. When a storm's backlog outgrows it, the collector's
//! `HeapKeeper` grows the heap again a few pages at a time, each step a piece of its own
//! between the pacer's looks, before the allocations need it.

use super::pace::Pacer;

/// Room the collector makes in its heap right before it records: more than a quiet run's
/// collector grows by over minutes.
pub const COLLECTOR_ROOM: usize = 16 << 20;

/// Grows the calling thread's allocator heap by about `bytes` and leaves them free there.
/// Below glibc's mmap threshold (set to 32 MiB by `hold_memory_in_place`), the allocation
/// comes from the heap itself.
pub fn reserve_heap(bytes: usize) {
    let room: Vec<u8> = Vec::with_capacity(bytes);
    // Kept from being optimised away: an allocation nobody looks at can be elided.
    drop(std::hint::black_box(room));
}

/// Room the keeper keeps free at the top of the heap: more than a turn of the hrtimer storm's
/// backlog allocates (about 1.2 MiB).
pub const KEPT_ROOM: usize = 4 << 20;
/// One step of growth: two pages (`STEP_NS` of populating at most under a storm).
pub const STEP: usize = 8 << 10;
/// What a step takes in one piece, for the pacer (`Pacer::before`).
const STEP_NS: u64 = 30_000;
/// What reading the heap's top takes in one piece at most (`mallinfo2` walks every free
/// list).
const LOOK_NS: u64 = 25_000;
/// Turns the keeper goes on looking at the top after its last step, then it waits for the
/// heap to grow on its own again.
const WATCH_TURNS: u32 = 120;

/// The heap as the keeper sees it: its end, the free room at its top, and a way to grow it.
pub trait Heap {
    /// The end of the heap (the program break).
    fn end(&self) -> usize;
    /// Free bytes at its top.
    fn top(&self) -> usize;
    /// Asks for `bytes` and frees them again: past the top's size, the heap grows by the
    /// difference and the freed block merges back into the top.
    fn ask(&mut self, bytes: usize);
}

/// glibc's main arena: the heap of the process's main thread.
#[derive(Debug, Default)]
pub struct MainArena;

impl Heap for MainArena {
    fn end(&self) -> usize {
        // SAFETY: sbrk(0) only reads the current break.
        unsafe { libc::sbrk(0) as usize }
    }

    fn top(&self) -> usize {
        #[cfg(target_env = "gnu")]
        {
            // SAFETY: mallinfo2 takes no arguments and returns a plain struct.
            unsafe { libc::mallinfo2() }.keepcost
        }
        #[cfg(not(target_env = "gnu"))]
        {
            usize::MAX
        }
    }

    fn ask(&mut self, bytes: usize) {
        reserve_heap(bytes);
    }
}

/// Keeps `KEPT_ROOM` free at the top of the main thread's heap (glibc's main arena) once a
/// backlog has outgrown the room made before recording.
///
/// It looks only when the heap grew by itself since its last look (its end moved: an
/// allocation found no room, and was populated in one piece) or in the turns after its own
/// last step; a quiet run never grows its heap, so it costs a read of the program break a
/// turn (glibc's `sbrk(0)` answers from its own copy, no system call). Each step asks
/// the allocator for more than the top holds and frees it again: the heap grows by about
/// `STEP` (no top pad, see `system::keep_allocations_in_place`) and the freed block merges
/// back into the top.
#[derive(Debug)]
pub struct HeapKeeper<H: Heap = MainArena> {
    heap: H,
    enabled: bool,
    room: usize,
    step: usize,
    /// The heap's end at the keeper's last look.
    end_seen: usize,
    /// Turns left to look after the last step.
    watching: u32,
    /// Steps taken.
    pub steps: u64,
}

impl HeapKeeper<MainArena> {
    /// Enabled only on the process's main thread (the main arena is the heap whose top
    /// `mallinfo2` reports) with glibc's allocator, and only where slices matter (the
    /// collector shares a measured CPU).
    pub fn new(enabled: bool) -> Self {
        HeapKeeper::with(MainArena, enabled && on_main_arena(), KEPT_ROOM, STEP)
    }
}

impl<H: Heap> HeapKeeper<H> {
    pub fn with(heap: H, enabled: bool, room: usize, step: usize) -> Self {
        HeapKeeper {
            end_seen: heap.end(),
            heap,
            enabled,
            room,
            step,
            watching: 0,
            steps: 0,
        }
    }

    /// Once a turn, between two pieces of work: tops the room up, one step a piece. Whatever
    /// the budget: the backlog's allocations populate that memory anyway, in larger pieces.
    pub fn keep(&mut self, pacer: &mut Pacer) {
        if !self.enabled || (self.watching == 0 && self.heap.end() == self.end_seen) {
            return;
        }
        pacer.before(LOOK_NS);
        let mut top = self.heap.top();
        let mut grew = false;
        while top < self.room {
            pacer.before(STEP_NS);
            let before = self.heap.end();
            self.heap.ask(top + self.step);
            let moved = self.heap.end().saturating_sub(before);
            if moved == 0 {
                // Served from a free block, not the top: there is room, if not at the top.
                break;
            }
            top += moved;
            self.steps += 1;
            grew = true;
        }
        self.watching = if grew {
            WATCH_TURNS
        } else {
            self.watching.saturating_sub(1)
        };
        self.end_seen = self.heap.end();
    }
}

/// The calling thread allocates from glibc's main arena: it is the process's main thread.
fn on_main_arena() -> bool {
    cfg!(target_env = "gnu")
        // SAFETY: getpid and gettid take no arguments.
        && unsafe { libc::getpid() as libc::c_long == libc::syscall(libc::SYS_gettid) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A heap whose top the test uses up, growing by what is asked past it (as glibc's main
    /// arena with no top pad), or not at all when `free_block` can serve the ask.
    #[derive(Debug, Default)]
    struct FakeHeap {
        end: usize,
        top: usize,
        free_block: usize,
        asks: Vec<usize>,
        looks: std::cell::Cell<u32>,
    }

    impl Heap for FakeHeap {
        fn end(&self) -> usize {
            self.end
        }
        fn top(&self) -> usize {
            self.looks.set(self.looks.get() + 1);
            self.top
        }
        fn ask(&mut self, bytes: usize) {
            self.asks.push(bytes);
            if bytes <= self.free_block {
                return;
            }
            if bytes > self.top {
                self.end += bytes - self.top;
                self.top = bytes;
            }
        }
    }

    impl FakeHeap {
        /// The program allocates `bytes`: from the top, growing the heap past it.
        fn allocate(&mut self, bytes: usize) {
            if bytes > self.top {
                self.end += bytes - self.top;
                self.top = 0;
            } else {
                self.top -= bytes;
            }
        }
    }

    fn keeper(top: usize) -> HeapKeeper<FakeHeap> {
        let heap = FakeHeap {
            end: 1 << 30,
            top,
            ..FakeHeap::default()
        };
        HeapKeeper::with(heap, true, 64 << 10, 8 << 10)
    }

    fn keep(k: &mut HeapKeeper<FakeHeap>) {
        k.keep(&mut Pacer::new(false));
    }

    #[test]
    fn it_looks_only_once_the_heap_grew_by_itself() {
        let mut k = keeper(100 << 10);
        // The room is used, but the heap has not grown: no look at its top.
        k.heap.allocate(90 << 10);
        keep(&mut k);
        assert_eq!((k.heap.looks.get(), k.steps), (0, 0));
        // An allocation outgrew the top: the keeper tops it up to the room, a step at a time.
        k.heap.allocate(20 << 10);
        keep(&mut k);
        assert_eq!(k.heap.looks.get(), 1);
        assert_eq!(k.heap.top, 64 << 10);
        assert_eq!(k.steps, 8);
        assert!(
            k.heap.asks.iter().all(|&a| a <= 64 << 10),
            "{:?}",
            k.heap.asks
        );
    }

    #[test]
    fn it_goes_on_looking_for_a_while_after_its_last_step() {
        let mut k = keeper(0);
        k.heap.allocate(4 << 10);
        keep(&mut k);
        assert_eq!(k.steps, 8);
        // The backlog goes on growing within the room: topped up again, the heap never
        // growing by itself.
        for _ in 0..10 {
            k.heap.allocate(24 << 10);
            let steps = k.steps;
            keep(&mut k);
            assert_eq!(k.steps, steps + 3);
            assert_eq!(k.heap.top, 64 << 10);
        }
        // Then quiet: it looks for WATCH_TURNS turns more, and then only when the heap grows.
        let looks = k.heap.looks.get();
        for _ in 0..WATCH_TURNS + 10 {
            keep(&mut k);
        }
        assert_eq!(k.heap.looks.get(), looks + WATCH_TURNS);
    }

    #[test]
    fn it_stops_when_the_heap_does_not_grow() {
        let mut k = keeper(0);
        k.heap.allocate(4 << 10);
        // A free block serves the ask: the top cannot grow this way, and it stops.
        k.heap.free_block = 1 << 20;
        keep(&mut k);
        assert_eq!(k.steps, 0);
        assert_eq!(k.heap.asks, vec![8 << 10]);
    }

    #[test]
    fn each_step_is_a_piece_the_pacer_is_asked_about() {
        let mut k = keeper(0);
        k.heap.allocate(4 << 10);
        // A pacer whose slice is shorter than a step: a pause before each step and the look.
        let mut pacer = Pacer::with(true, 1, std::time::Duration::ZERO);
        k.keep(&mut pacer);
        assert_eq!(k.steps, 8);
        assert_eq!(pacer.pauses, 9);
    }

    #[test]
    fn a_disabled_keeper_does_nothing() {
        let mut k = keeper(0);
        k.enabled = false;
        k.heap.allocate(4 << 10);
        keep(&mut k);
        assert_eq!((k.heap.looks.get(), k.steps), (0, 0));
    }

    #[test]
    fn the_room_is_left_free_for_later_allocations() {
        reserve_heap(4 << 20);
        // Allocations after it fit in the room (nothing to check but that they work).
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.len(), 1000);
    }
}
