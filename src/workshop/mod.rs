//! The workshop's building blocks: known noise, injected on purpose, so that each tuning step
//! has a culprit to find and then remove.

pub mod noise;
pub mod steps;
