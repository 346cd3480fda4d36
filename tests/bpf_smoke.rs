//! The BPF build end to end: the skeleton compiled by build.rs opens, takes its CPU filter
//! in rodata, loads into this kernel, attaches, and counts real context switches on the
//! measured CPU only. Needs root; outside CI `JITTERSCOPE_SKIP_BPF=1` skips it by name.

use std::mem::MaybeUninit;

use jitterscope::probe::JitterscopeSkelBuilder;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::MapCore;

fn skip(test: &str) -> bool {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if !ci && std::env::var("JITTERSCOPE_SKIP_BPF").is_ok_and(|v| v == "1") {
        eprintln!("skipped (JITTERSCOPE_SKIP_BPF=1): {test}");
        return true;
    }
    false
}

fn switches(skel: &jitterscope::probe::JitterscopeSkel, cpu: u32) -> u64 {
    let v = skel
        .maps
        .counters
        .lookup(&cpu.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .expect("lookup")
        .expect("array slot");
    u64::from_ne_bytes(v[0..8].try_into().unwrap())
}

#[test]
fn sched_switch_counts_only_the_measured_cpu() {
    if skip("sched_switch_counts_only_the_measured_cpu") {
        return;
    }
    let mut obj = MaybeUninit::uninit();
    let mut open = JitterscopeSkelBuilder::default()
        .open(&mut obj)
        .expect("open the BPF object");
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("rodata is mmapped");
    rodata.target_cpus[0] = 1 << 0; // CPU 0 only
    let mut skel = open
        .load()
        .expect("load (needs root or CAP_BPF+CAP_PERFMON)");
    skel.attach().expect("attach tp_btf/sched_switch");

    // Force context switches on CPU 0 and on CPU 1.
    for cpu in [0usize, 1] {
        std::thread::spawn(move || {
            // SAFETY: plain cpu_set_t and a syscall on the calling thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
            }
            for _ in 0..200 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
        .join()
        .unwrap();
    }
    assert!(
        switches(&skel, 0) >= 200,
        "switches on CPU 0: {}",
        switches(&skel, 0)
    );
    assert_eq!(
        switches(&skel, 1),
        0,
        "CPU 1 is not measured, its events are filtered in the kernel"
    );
}
