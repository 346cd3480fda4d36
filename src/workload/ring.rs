//! The message ring between the producer and its consumers: one producer, any number of
//! consumers that each see every message (the LMAX Disruptor's broadcast ring, reduced to
//! what the experiment needs). Sequence numbers and cursors sit on their own cache lines;
//! the producer waits (never overwrites) when the slowest consumer is a full ring behind.

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

struct Slot {
    seq: AtomicU64,
    publish_ns: AtomicU64,
}

struct Ring {
    mask: u64,
    slots: Box<[Slot]>,
    /// Number of messages published so far (the next sequence to publish).
    published: CachePadded<AtomicU64>,
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
                seq: AtomicU64::new(u64::MAX),
                publish_ns: AtomicU64::new(0),
            })
            .collect(),
        published: CachePadded(AtomicU64::new(0)),
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
        slot.seq.store(self.next, Ordering::Relaxed);
        slot.publish_ns.store(publish_ns, Ordering::Relaxed);
        self.next += 1;
        r.published.store(self.next, Ordering::Release);
        true
    }

    pub fn published(&self) -> u64 {
        self.next
    }
}

impl Subscriber {
    /// Number of messages published so far; everything below it may be read.
    #[inline]
    pub fn available(&self) -> u64 {
        self.ring.published.load(Ordering::Acquire)
    }

    /// The next sequence this consumer expects.
    #[inline]
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Reads the next message (call only while `next() < available()`), advancing the
    /// local cursor. The producer cannot overwrite it before `release`.
    #[inline]
    pub fn read_next(&mut self) -> Message {
        let slot = &self.ring.slots[(self.next & self.ring.mask) as usize];
        self.next += 1;
        Message {
            seq: slot.seq.load(Ordering::Relaxed),
            publish_ns: slot.publish_ns.load(Ordering::Relaxed),
        }
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
        for i in 0..4 {
            assert!(tx.try_publish(i));
        }
        assert!(!tx.try_publish(99));
        let m = subs[0].read_next();
        subs[0].release();
        assert_eq!(
            m,
            Message {
                seq: 0,
                publish_ns: 0
            }
        );
        assert!(!tx.try_publish(99), "second consumer still holds slot 0");
        subs[1].read_next();
        subs[1].release();
        assert!(tx.try_publish(4));
        assert_eq!(tx.published(), 5);
    }
}
