//! A bounded, lock-free single-producer single-consumer queue. The spinning threads push
//! stalls and finished interval histograms through it to the collector without a lock,
//! an allocation or a syscall; a full queue refuses the push and the caller counts the loss.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Keeps each index on its own cache line so producer and consumer do not false-share.
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct Shared<T> {
    /// Next slot the consumer reads; written by the consumer only.
    head: CachePadded<AtomicUsize>,
    /// Next slot the producer writes; written by the producer only.
    tail: CachePadded<AtomicUsize>,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: a slot is accessed by exactly one side at a time: the producer owns
// slots in [tail, head + cap), the consumer owns [head, tail); ownership moves through
// the Release/Acquire pairs on `tail` and `head`.
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        for i in head..tail {
            // SAFETY: slots in [head, tail) hold initialised values not yet popped.
            unsafe { (*self.slots[i & self.mask].get()).assume_init_drop() };
        }
    }
}

pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    /// Producer-local copy of `head`, refreshed only when the queue looks full.
    cached_head: usize,
}

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// Creates a queue holding at least `capacity` items (rounded up to a power of two).
pub fn channel<T: Send>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let shared = Arc::new(Shared {
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
        mask: cap - 1,
        slots,
    });
    (
        Sender {
            shared: shared.clone(),
            cached_head: 0,
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    /// Pushes `value`, or gives it back when the queue is full.
    #[inline]
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let s = &*self.shared;
        let tail = s.tail.load(Ordering::Relaxed);
        if tail.wrapping_sub(self.cached_head) > s.mask {
            self.cached_head = s.head.load(Ordering::Acquire);
            if tail.wrapping_sub(self.cached_head) > s.mask {
                return Err(value);
            }
        }
        // SAFETY: the slot at `tail` is outside [head, tail), so only the producer touches it.
        unsafe { (*s.slots[tail & s.mask].get()).write(value) };
        s.tail.store(tail.wrapping_add(1), Ordering::Release);
        Ok(())
    }
}

impl<T> Receiver<T> {
    /// How many items the queue holds now.
    pub fn held(&self) -> usize {
        let s = &*self.shared;
        s.tail
            .load(Ordering::Acquire)
            .wrapping_sub(s.head.load(Ordering::Relaxed))
    }

    /// The share of its slots the queue holds now (0 empty, 1 full).
    pub fn filled(&self) -> f64 {
        self.held() as f64 / (self.shared.mask + 1) as f64
    }

    /// Shows `each` the items pushed since the last look (`seen`: where that look stopped,
    /// updated), leaving them queued. Items popped meanwhile are not shown.
    pub fn peek_new(&self, seen: &mut usize, each: &mut dyn FnMut(&T)) {
        let s = &*self.shared;
        let tail = s.tail.load(Ordering::Acquire);
        let head = s.head.load(Ordering::Relaxed);
        // Indices wrap: `seen` before `head` (popped since) starts at `head`.
        let mut i = if seen.wrapping_sub(head) > tail.wrapping_sub(head) {
            head
        } else {
            *seen
        };
        while i != tail {
            // SAFETY: slots in [head, tail) hold initialised values; only this receiver pops
            // (moves `head`), so none of them is read out or overwritten while `&self` is held.
            each(unsafe { (*s.slots[i & s.mask].get()).assume_init_ref() });
            i = i.wrapping_add(1);
        }
        *seen = tail;
    }

    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let s = &*self.shared;
        let head = s.head.load(Ordering::Relaxed);
        if head == s.tail.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: the slot at `head` is in [head, tail): initialised and owned by the consumer.
        let value = unsafe { (*s.slots[head & s.mask].get()).assume_init_read() };
        s.head.store(head.wrapping_add(1), Ordering::Release);
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peek_shows_each_new_item_once_and_leaves_it_queued() {
        let (mut tx, mut rx) = channel::<u32>(4);
        let mut seen = 0usize;
        let peek = |rx: &Receiver<u32>, seen: &mut usize| {
            let mut got = Vec::new();
            rx.peek_new(seen, &mut |&v| got.push(v));
            got
        };
        assert!(peek(&rx, &mut seen).is_empty());
        tx.push(1).unwrap();
        tx.push(2).unwrap();
        assert_eq!(peek(&rx, &mut seen), vec![1, 2]);
        assert!(peek(&rx, &mut seen).is_empty(), "each once");
        tx.push(3).unwrap();
        assert_eq!(peek(&rx, &mut seen), vec![3]);
        assert_eq!(rx.pop(), Some(1), "still queued");
        // Popped past what was seen (and the queue wrapped): the peek starts at the head.
        let mut stale = 0usize;
        assert_eq!(rx.pop(), Some(2));
        tx.push(4).unwrap();
        tx.push(5).unwrap();
        tx.push(6).unwrap();
        assert_eq!(peek(&rx, &mut stale), vec![3, 4, 5, 6]);
        assert_eq!(peek(&rx, &mut seen), vec![4, 5, 6]);
    }

    #[test]
    fn full_queue_refuses_and_gives_the_value_back() {
        let (mut tx, mut rx) = channel::<u32>(4);
        for i in 0..4 {
            tx.push(i).unwrap();
        }
        assert_eq!(tx.push(9), Err(9));
        assert_eq!(rx.pop(), Some(0));
        tx.push(4).unwrap();
        assert_eq!(
            (1..5).map(|_| rx.pop().unwrap()).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(rx.pop(), None);
    }

    #[test]
    fn held_and_filled_count_what_waits() {
        let (mut tx, mut rx) = channel::<u32>(8);
        assert_eq!((rx.held(), rx.filled()), (0, 0.0));
        for i in 0..6 {
            tx.push(i).unwrap();
        }
        assert_eq!((rx.held(), rx.filled()), (6, 0.75));
        rx.pop();
        assert_eq!((rx.held(), rx.filled()), (5, 0.625));
    }

    #[test]
    fn drops_unpopped_values() {
        let marker = Arc::new(());
        let (mut tx, rx) = channel(8);
        tx.push(marker.clone()).unwrap();
        tx.push(marker.clone()).unwrap();
        drop((tx, rx));
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn concurrent_transfer_is_lossless_and_ordered() {
        let (mut tx, mut rx) = channel::<u64>(64);
        const N: u64 = 1_000_000;
        let producer = std::thread::spawn(move || {
            for i in 0..N {
                let mut v = i;
                while let Err(back) = tx.push(v) {
                    v = back;
                    std::hint::spin_loop();
                }
            }
        });
        let mut expect = 0;
        while expect < N {
            if let Some(v) = rx.pop() {
                assert_eq!(v, expect);
                expect += 1;
            }
        }
        producer.join().unwrap();
        assert_eq!(rx.pop(), None);
    }
}
