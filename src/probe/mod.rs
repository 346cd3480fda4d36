//! The kernel half's user-space side: loads the BPF skeleton, attaches it, reads it back.

#[allow(clippy::all, dead_code, unused_imports)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/jitterscope.skel.rs"));
}
pub use skel::*;
