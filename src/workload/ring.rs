//! The message ring between the producer and its consumers: one producer, any number of
//! consumers that each see every message (the LMAX Disruptor's broadcast ring, reduced to
//! what the experiment needs).
//!
//! Each slot carries its own sequence stamp and sits on its own cache line, so a consumer
//! spins on the very line the producer writes next: one cache-line transfer per message,
//! the physical floor (a separate "published" cursor would cost a second transfer). The
//! consumers' cursors, on their own lines, are read by the producer only when the ring looks
//! full; it waits rather than overwrite an unread slot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::spsc::CachePadded;
use crate::model::Nanos;

/// What travels from the producer to the consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    pub seq: u64,
    /// CLOCK_MONOTONIC time at which the producer published it.
    pub publish_ns: Nanos,
}

#[repr(align(64))]
struct Slot {
    /// `seq + 1` of the message in the slot, 0 while never written.
    stamp: AtomicU64,
    publish_ns: AtomicU64,
}

struct Ring {
    mask: u64,
    slots: Box<[Slot]>,
    /// Per consumer: the next sequence it will read; everything below is released.
    consumed: Box<[CachePadded<AtomicU64>]>,
}

pub struct Publisher {
    ring: Arc<Ring>,
    next: u64,
    /// Producer-local copy of the slowest consumer's cursor, refreshed only when needed.
    min_consumed: u64,
}

pub struct Subscriber {
    ring: Arc<Ring>,
    index: usize,
    next: u64,
}

/// A ring of at least `capacity` slots (power of two) with `consumers` subscribers.
pub fn ring(capacity: usize, consumers: usize) -> (Publisher, Vec<Subscriber>) {
    let cap = capacity.max(2).next_power_of_two() as u64;
    let ring = Arc::new(Ring {
        mask: cap - 1,
        slots: (0..cap)
            .map(|_| Slot {
                stamp: AtomicU64::new(0),
                publish_ns: AtomicU64::new(0),
            })
            .collect(),
        consumed: (0..consumers)
            .map(|_| CachePadded(AtomicU64::new(0)))
            .collect(),
    });
    let subs = (0..consumers)
        .map(|index| Subscriber {
            ring: ring.clone(),
            index,
            next: 0,
        })
        .collect();
    (
        Publisher {
            ring,
            next: 0,
            min_consumed: 0,
        },
        subs,
    )
}

impl Publisher {
    /// Publishes one message stamped `publish_ns`; false when the ring is full (a consumer
    /// is a whole ring behind), in which case nothing was written.
    #[inline]
    pub fn try_publish(&mut self, publish_ns: Nanos) -> bool {
        let r = &*self.ring;
        if self.next - self.min_consumed > r.mask {
            self.min_consumed = r
                .consumed
                .iter()
                .map(|c| c.load(Ordering::Acquire))
                .min()
                .unwrap_or(self.next);
            if self.next - self.min_consumed > r.mask {
                return false;
            }
        }
        let slot = &r.slots[(self.next & r.mask) as usize];
        slot.publish_ns.store(publish_ns, Ordering::Relaxed);
        // The stamp is the publication: a consumer that sees it also sees the payload.
        slot.stamp.store(self.next + 1, Ordering::Release);
        self.next += 1;
        true
    }

    pub fn published(&self) -> u64 {
        self.next
    }
}

impl Subscriber {
    /// The next message if it has been published. A message whose `seq` is not the one this
    /// consumer expected means the ring was overrun (it cannot be, by construction; the
    /// consumer counts it as a sequence error if it ever happens).
    #[inline]
    pub fn poll(&mut self) -> Option<Message> {
        let slot = &self.ring.slots[(self.next & self.ring.mask) as usize];
        let stamp = slot.stamp.load(Ordering::Acquire);
        if stamp <= self.next {
            return None;
        }
        let msg = Message {
            seq: stamp - 1,
            publish_ns: slot.publish_ns.load(Ordering::Relaxed),
        };
        self.next += 1;
        Some(msg)
    }

    /// The next sequence this consumer expects.
    #[inline]
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Hands every slot read so far back to the producer.
    #[inline]
    pub fn release(&self) {
        self.ring.consumed[self.index].store(self.next, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_ring_refuses_until_every_consumer_releases() {
        let (mut tx, mut subs) = ring(4, 2);
        assert_eq!(subs[0].poll(), None);
        for i in 0..4 {
            assert!(tx.try_publish(i));
        }
        assert!(!tx.try_publish(99));
        let m = subs[0].poll().unwrap();
        subs[0].release();
        assert_eq!(
            m,
            Message {
                seq: 0,
                publish_ns: 0
            }
        );
        assert!(!tx.try_publish(99), "second consumer still holds slot 0");
        subs[1].poll().unwrap();
        subs[1].release();
        assert!(tx.try_publish(4));
        assert_eq!(tx.published(), 5);
        let seqs: Vec<u64> = std::iter::from_fn(|| subs[0].poll())
            .map(|m| m.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
    }
}
