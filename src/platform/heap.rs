//! Room in the allocator's heap made before the recording starts. Under
//! `mlockall(MCL_FUTURE)` every growth of a heap is populated by the kernel in the system call
//! that grows it: 100–150 µs for glibc's usual 128 KiB steps on a VM, in one piece on a CPU
//! the collector may share with the workload. Grown once, ahead, and left free in the heap
//! (the allocator never trims, see `system::hold_memory_in_place`), later allocations are
//! carved from that room instead.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_is_left_free_for_later_allocations() {
        reserve_heap(4 << 20);
        // Allocations after it fit in the room (nothing to check but that they work).
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.len(), 1000);
    }
}
