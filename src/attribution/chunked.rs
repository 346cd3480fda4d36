//! A queue kept sorted by the caller, stored in chunks of a fixed number of elements. The
//! engine holds a CPU's short kernel records in one: under a storm a `VecDeque` of them grew by
//! doubling, and one doubling (to 36 MiB) was a single `mmap` that the kernel populated under
//! `mlockall` — 29 ms of system call on the CPU the collector may share with the workload.
//! Here the queue grows a chunk (about 36 KiB) at a time, and chunks emptied at
//! the front are kept for reuse at the back: once a run has seen its largest backlog, it
//! allocates nothing more. No chunk grows past its allocation: one that an out-of-order
//! arrival finds full is split in two (growing it was a reallocation and a copy, and under the
//! hrtimer storm chunks that took arrivals again and again doubled to megabytes, populated
//! under `mlockall` in one system call).

use std::collections::VecDeque;

/// Elements per chunk (records are 72 bytes: a chunk is 36 KiB, which the kernel populates in
/// well under 100 µs when the heap must grow for it).
const CHUNK: usize = 512;

/// A position in a `Chunked`: the chunk, and the element in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    chunk: usize,
    at: usize,
}

#[derive(Debug, Clone)]
pub struct Chunked<T> {
    /// Never an empty chunk among them.
    chunks: VecDeque<VecDeque<T>>,
    /// Emptied chunks, their capacity kept.
    spare: Vec<VecDeque<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked::new()
    }
}

impl<T> Chunked<T> {
    pub const fn new() -> Self {
        Chunked {
            chunks: VecDeque::new(),
            spare: Vec::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn front(&self) -> Option<&T> {
        self.chunks.front().and_then(|c| c.front())
    }

    pub fn back(&self) -> Option<&T> {
        self.chunks.back().and_then(|c| c.back())
    }

    /// Drops elements from the front while `drop` says so, at most `limit`; returns how many.
    pub fn drop_front_while(&mut self, limit: usize, drop: impl Fn(&T) -> bool) -> usize {
        let mut n = 0;
        while n < limit {
            let Some(first) = self.chunks.front_mut() else {
                break;
            };
            while n < limit && first.front().is_some_and(&drop) {
                first.pop_front();
                n += 1;
            }
            if !first.is_empty() {
                break;
            }
            if let Some(empty) = self.chunks.pop_front() {
                self.spare.push(empty);
            }
        }
        self.len -= n;
        n
    }

    #[inline]
    pub fn push_back(&mut self, x: T) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => last.push_back(x),
            _ => {
                // A first chunk grows as it fills: thousands of these may hold a few
                // elements each (a watch's recent stalls per thread and CPU).
                let mut fresh = self
                    .spare
                    .pop()
                    .unwrap_or_else(|| match self.chunks.is_empty() {
                        true => VecDeque::new(),
                        false => VecDeque::with_capacity(CHUNK),
                    });
                fresh.push_back(x);
                self.chunks.push_back(fresh);
            }
        }
        self.len += 1;
    }

    /// Inserts `x` after every element whose `key` is not greater than its: at the back,
    /// without a search, when it goes last (as nearly every arrival does).
    pub fn insert_by_key<K: Ord>(&mut self, x: T, key: impl Fn(&T) -> K) {
        let k = key(&x);
        if self.back().is_none_or(|b| key(b) <= k) {
            self.push_back(x);
        } else {
            self.insert(x, |e| key(e) <= k);
        }
    }

    /// Removes the element at `at` (from `position`); an emptied chunk is kept for reuse.
    pub fn remove(&mut self, at: Pos) -> Option<T> {
        let c = self.chunks.get_mut(at.chunk)?;
        let x = c.remove(at.at)?;
        if c.is_empty() {
            if let Some(empty) = self.chunks.remove(at.chunk) {
                self.spare.push(empty);
            }
        }
        self.len -= 1;
        Some(x)
    }

    pub fn pop_front(&mut self) -> Option<T> {
        self.remove(Pos { chunk: 0, at: 0 })
    }

    /// The first position whose element is not `before` (the queue is partitioned by it:
    /// every `before` element precedes every other), as `slice::partition_point`.
    #[inline]
    pub fn position(&self, before: impl Fn(&T) -> bool) -> Pos {
        // The first chunk whose last element is not `before`.
        let chunk = self
            .chunks
            .partition_point(|c| c.back().is_some_and(&before));
        self.position_in(chunk, before)
    }

    /// The first position in `chunk` (the first whose last element is not `before`) whose
    /// element is not `before`.
    #[inline]
    fn position_in(&self, chunk: usize, before: impl Fn(&T) -> bool) -> Pos {
        let at = self
            .chunks
            .get(chunk)
            .map_or(0, |c| c.partition_point(&before));
        Pos { chunk, at }
    }

    /// `position`, its chunk searched for outward from `near`'s (where a search for a nearby
    /// key ended: stalls come nearly in time order, so each search is a few steps instead of
    /// a binary search over every chunk). Any `near` gives the same answer.
    #[inline]
    pub fn position_near(&self, near: Pos, before: impl Fn(&T) -> bool) -> Pos {
        let chunk_before = |i: usize| self.chunks[i].back().is_some_and(&before);
        let (lo, hi) = gallop(near.chunk, self.chunks.len(), chunk_before);
        let chunk = partition_between(lo, hi, chunk_before);
        self.position_in(chunk, before)
    }

    /// Calls `f` on each element from `from` on, in order, until it returns false.
    #[inline]
    pub fn for_each_from_while<'a>(&'a self, from: Pos, mut f: impl FnMut(&'a T) -> bool) {
        let first = from.chunk.min(self.chunks.len());
        for (i, c) in self.chunks.range(first..).enumerate() {
            let lo = if i == 0 { from.at.min(c.len()) } else { 0 };
            if !c.range(lo..).all(&mut f) {
                return;
            }
        }
    }

    /// Inserts `x` at `position(before)`: after every `before` element. A full chunk is split
    /// first, its upper half moved to a chunk of its own (a spare one when there is one).
    pub fn insert(&mut self, x: T, before: impl Fn(&T) -> bool) {
        let Pos { chunk, at } = self.position(before);
        let Some(c) = self.chunks.get_mut(chunk) else {
            self.push_back(x);
            return;
        };
        if c.len() < CHUNK {
            c.insert(at, x);
        } else {
            let mut upper = self
                .spare
                .pop()
                .unwrap_or_else(|| VecDeque::with_capacity(CHUNK));
            upper.extend(c.drain(CHUNK / 2..));
            match at.checked_sub(CHUNK / 2) {
                Some(i) => upper.insert(i, x),
                None => c.insert(at, x),
            }
            self.chunks.insert(chunk + 1, upper);
        }
        self.len += 1;
    }

    /// The elements before `to`, the last first.
    pub fn rev_before(&self, to: Pos) -> impl Iterator<Item = &T> + '_ {
        let whole = to.chunk.min(self.chunks.len());
        let part = self
            .chunks
            .get(to.chunk)
            .map(|c| c.range(..to.at.min(c.len())));
        part.into_iter().flat_map(|r| r.rev()).chain(
            self.chunks
                .range(..whole)
                .rev()
                .flat_map(|c| c.iter().rev()),
        )
    }

    /// Calls `f` on each element from `from` up to (not including) `to`, in order.
    #[inline]
    pub fn for_each_between<'a>(&'a self, from: Pos, to: Pos, mut f: impl FnMut(&'a T)) {
        let last = to.chunk.min(self.chunks.len().saturating_sub(1));
        for i in from.chunk..=last {
            let Some(c) = self.chunks.get(i) else {
                break;
            };
            let lo = if i == from.chunk {
                from.at.min(c.len())
            } else {
                0
            };
            let hi = if i == to.chunk {
                to.at.clamp(lo, c.len())
            } else {
                c.len()
            };
            let (a, b) = c.as_slices();
            let split = a.len();
            if lo < split {
                a[lo..hi.min(split)].iter().for_each(&mut f);
            }
            if hi > split {
                b[lo.max(split) - split..hi - split].iter().for_each(&mut f);
            }
        }
    }
}

/// Bounds `[lo, hi]` of the partition point of `before` over `0..n`, found by steps doubling
/// away from `near`.
#[inline]
fn gallop(near: usize, n: usize, before: impl Fn(usize) -> bool) -> (usize, usize) {
    let near = near.min(n);
    let mut step = 1;
    if near < n && before(near) {
        let mut lo = near + 1;
        while lo + step - 1 < n && before(lo + step - 1) {
            lo += step;
            step *= 2;
        }
        (lo, (lo + step - 1).min(n))
    } else {
        let mut hi = near;
        while hi >= step && !before(hi - step) {
            hi -= step;
            step *= 2;
        }
        (hi.saturating_sub(step - 1), hi)
    }
}

/// The partition point of `before` over `lo..hi` (true before it, false from it on).
#[inline]
fn partition_between(mut lo: usize, mut hi: usize, before: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random pushes (some out of order), pops and range reads against a sorted VecDeque; no
    /// pops in the first half, so that the queue spans many chunks and full ones are split.
    #[test]
    fn behaves_as_a_sorted_vecdeque() {
        let mut ours: Chunked<u64> = Chunked::default();
        let mut theirs: VecDeque<u64> = VecDeque::new();
        let mut x = 11u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut t = 0u64;
        for step in 0..60_000 {
            match next() % 10 {
                4 if step >= 30_000 => {
                    let v = t.saturating_sub(next() % 300);
                    let at = theirs.partition_point(|&e| e < v);
                    assert_eq!(
                        ours.remove(ours.position(|&e| e < v)),
                        theirs.remove(at),
                        "step {step}"
                    );
                }
                5 if step >= 30_000 && next() % 2 == 0 => {
                    assert_eq!(ours.pop_front(), theirs.pop_front(), "step {step}");
                }
                7 if step >= 30_000 => {
                    let (cut, limit) = (t.saturating_sub(next() % 400), (next() % 40) as usize);
                    let mut want = 0;
                    while want < limit && theirs.front().is_some_and(|&e| e < cut) {
                        theirs.pop_front();
                        want += 1;
                    }
                    assert_eq!(
                        ours.drop_front_while(limit, |&e| e < cut),
                        want,
                        "step {step}"
                    );
                }
                0..=5 => {
                    t += next() % 50;
                    let v = if next() % 8 == 0 {
                        t.saturating_sub(next() % 200)
                    } else {
                        t
                    };
                    if theirs.back().is_none_or(|&b| b <= v) {
                        ours.push_back(v);
                        theirs.push_back(v);
                    } else {
                        ours.insert(v, |&e| e <= v);
                        let at = theirs.partition_point(|&e| e <= v);
                        theirs.insert(at, v);
                    }
                }
                6 if step >= 30_000 => {
                    let n = usize::from(theirs.pop_front().is_some());
                    assert_eq!(ours.drop_front_while(1, |_| true), n, "step {step}");
                }
                _ => {
                    let (a, b) = (
                        t.saturating_sub(next() % 3000),
                        t.saturating_sub(next() % 500),
                    );
                    let (a, b) = (a.min(b), a.max(b));
                    let from = ours.position(|&e| e < a);
                    let to = ours.position(|&e| e < b);
                    let near = Pos {
                        chunk: (next() % 300) as usize,
                        at: 0,
                    };
                    assert_eq!(ours.position_near(near, |&e| e < a), from, "step {step}");
                    let mut got: Vec<u64> = Vec::new();
                    ours.for_each_between(from, to, |&e| got.push(e));
                    let mut upto_b: Vec<u64> = Vec::new();
                    ours.for_each_from_while(from, |&e| {
                        e < b && {
                            upto_b.push(e);
                            true
                        }
                    });
                    assert_eq!(upto_b, got, "step {step}: from {a} while below {b}");
                    let (fa, fb) = (
                        theirs.partition_point(|&e| e < a),
                        theirs.partition_point(|&e| e < b),
                    );
                    let want: Vec<u64> = theirs.range(fa..fb).copied().collect();
                    assert_eq!(got, want, "step {step}: [{a}, {b})");
                    let back: Vec<u64> = ours.rev_before(to).take(50).copied().collect();
                    let want: Vec<u64> = theirs.range(..fb).rev().take(50).copied().collect();
                    assert_eq!(back, want, "step {step}: before {b}");
                }
            }
            assert_eq!(ours.len(), theirs.len());
            assert_eq!(ours.front(), theirs.front());
            assert_eq!(ours.back(), theirs.back());
        }
    }

    #[test]
    fn emptied_chunks_are_reused_not_reallocated() {
        let mut q: Chunked<u32> = Chunked::default();
        for i in 0..(3 * CHUNK as u32) {
            q.push_back(i);
        }
        q.drop_front_while(usize::MAX, |_| true);
        assert_eq!((q.spare.len(), q.chunks.len(), q.len()), (3, 0, 0));
        for i in 0..(3 * CHUNK as u32) {
            q.push_back(i);
        }
        // The three kept chunks took the elements back: no new one was made.
        assert!(q.spare.is_empty());
        assert_eq!(q.chunks.len(), 3);
        assert!(q.chunks.iter().all(|c| c.len() == CHUNK));
    }

    #[test]
    fn a_full_chunk_is_split_never_grown() {
        let mut q: Chunked<u32> = Chunked::default();
        for i in 0..CHUNK as u32 {
            q.push_back(2 * i);
        }
        let cap = q.chunks[0].capacity();
        // Arrivals out of order, into the full chunk: in its lower half, then its upper one.
        q.insert(5, |&e| e <= 5);
        q.insert(2001, |&e| e <= 2001);
        assert_eq!(q.chunks.len(), 2);
        assert!(q
            .chunks
            .iter()
            .all(|c| c.capacity() == cap && c.len() <= CHUNK));
        let mut all = Vec::new();
        q.for_each_between(Pos { chunk: 0, at: 0 }, Pos { chunk: 9, at: 0 }, |&e| {
            all.push(e)
        });
        let mut want: Vec<u32> = (0..CHUNK as u32).map(|i| 2 * i).chain([5, 2001]).collect();
        want.sort();
        assert_eq!(all, want);
    }
}
