//! Build script: compiles the BPF programs under `bpf/` with clang and generates the
//! libbpf-rs skeleton into `OUT_DIR` (libbpf-bootstrap layout).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "bpf/jitterscope.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86_64",
        Ok(other) => panic!(
            "jitterscope's BPF programs are built for x86_64 only (target arch is {other}); \
             generate vmlinux/{other}/vmlinux.h with scripts/gen-vmlinux.sh and add the arch here"
        ),
        Err(_) => "x86_64",
    };
    let vmlinux = format!("-Ivmlinux/{arch}");

    if let Err(err) = SkeletonBuilder::new()
        .source(SRC)
        .clang_args([vmlinux.as_str(), "-Ibpf", "-mcpu=v3", "-Wall", "-Werror"])
        .build_and_generate(out.join("jitterscope.skel.rs"))
    {
        // A build script can only fail by panicking; give the whole chain and the fix.
        panic!(
            "cannot build the BPF programs from {SRC}: {err:#}\n\
             (needs clang, libelf-dev, zlib1g-dev, pkg-config, make and gcc: run scripts/deps.sh)"
        );
    }

    println!("cargo:rerun-if-changed=bpf");
    for entry in std::fs::read_dir("bpf").into_iter().flatten().flatten() {
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    println!("cargo:rerun-if-changed=vmlinux/{arch}/vmlinux.h");
}
