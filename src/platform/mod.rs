//! Thin OS primitives every layer may use: the one clock (CLOCK_MONOTONIC), thread CPU
//! affinity (pinning), work in short slices, room in the heap made ahead.

pub mod affinity;
pub mod clock;
pub mod fast_hash;
pub mod heap;
pub mod input;
pub mod pace;
