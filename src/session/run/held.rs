//! Deciding at the end, the intervals held for the end: each consumer's interval histograms
//! wait until the workload stops, within the pool of boxes made before recording.

use std::collections::VecDeque;

use crate::workload::histograms::IntervalHistograms;

/// Deciding at the end, each consumer's interval histograms held until the workload stops,
/// oldest first, at most `up_to` each: the boxes made before recording beyond those the
/// consumer needs to rotate into (`workload::histograms::interval_pool_at_end`).
pub(super) struct HeldIntervals {
    queues: Vec<VecDeque<Box<IntervalHistograms>>>,
    /// 0: none held (deciding live, or the workload stopped).
    up_to: usize,
}

impl HeldIntervals {
    pub(super) fn new(consumers: usize, up_to: usize) -> Self {
        HeldIntervals {
            queues: (0..consumers)
                .map(|_| VecDeque::with_capacity(up_to + 1))
                .collect(),
            up_to,
        }
    }

    pub(super) fn holding(&self) -> bool {
        self.up_to > 0
    }

    /// Holds `consumer`'s interval `hists`; past `up_to`, gives back its oldest held one, to be
    /// taken now and its box returned to the consumer.
    pub(super) fn hold(
        &mut self,
        consumer: usize,
        hists: Box<IntervalHistograms>,
    ) -> Option<Box<IntervalHistograms>> {
        let queue = &mut self.queues[consumer];
        queue.push_back(hists);
        if queue.len() > self.up_to {
            queue.pop_front()
        } else {
            None
        }
    }

    /// Holds no more; then gives back what it held, every consumer's together in the order
    /// the intervals began (the interval log's lines stay in time order).
    pub(super) fn release(&mut self) -> Option<(usize, Box<IntervalHistograms>)> {
        self.up_to = 0;
        let (_, consumer) = (self.queues.iter().enumerate())
            .filter_map(|(c, q)| q.front().map(|h| (h.start_ns, c)))
            .min()?;
        Some((consumer, self.queues[consumer].pop_front()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_intervals_come_back_oldest_first_past_their_bound_and_in_time_order_at_the_end() {
        let boxed = |start_ns| {
            let mut h = IntervalHistograms::new();
            h.start_ns = start_ns;
            h
        };
        let mut held = HeldIntervals::new(2, 2);
        assert!(held.holding());
        assert!(held.hold(0, boxed(10)).is_none());
        assert!(held.hold(1, boxed(11)).is_none());
        assert!(held.hold(0, boxed(20)).is_none());
        // Past two for consumer 0: its oldest, to take now.
        assert_eq!(held.hold(0, boxed(30)).map(|h| h.start_ns), Some(10));
        assert!(held.hold(1, boxed(21)).is_none());
        assert_eq!(held.hold(1, boxed(31)).map(|h| h.start_ns), Some(11));
        // The rest at the end, both consumers' in the order they began.
        let mut order = Vec::new();
        while let Some((consumer, h)) = held.release() {
            order.push((consumer, h.start_ns));
        }
        assert_eq!(order, [(0, 20), (1, 21), (0, 30), (1, 31)]);
        assert!(!held.holding());
        // Deciding live, nothing is held.
        assert!(!HeldIntervals::new(1, 0).holding());
    }
}
