//! Thin OS primitives every layer may use: the one clock (CLOCK_MONOTONIC) and thread CPU
//! affinity (pinning).

pub mod affinity;
pub mod clock;
pub mod pace;
