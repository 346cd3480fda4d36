//! The probes against the real kernel: load and attach, then inject known noise on a measured
//! CPU and find it in the records with the right class and name. Needs root; outside CI,
//! JITTERSCOPE_SKIP_BPF=1 skips each test by name.

mod common;

use std::mem::MaybeUninit;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use common::*;
use jitterscope::model::{CauseKind, CulpritClass, Interruption, SentFrom};
use jitterscope::probe::decode::{self, Record};
use jitterscope::probe::kallsyms::Kallsyms;
use jitterscope::probe::rings::{self, RingLayout};
use jitterscope::probe::{
    AttachState, JitterscopeSkel, JitterscopeSkelBuilder, ProbeBatch, ProbeConfig, ProbeSession,
    Reference, MANDATORY,
};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};

const CPU: u32 = 1;

fn start(cfg: ProbeConfig) -> (ProbeSession, Receiver<ProbeBatch>) {
    ProbeSession::start(cfg).unwrap_or_else(|e| panic!("probes did not start: {e}"))
}

fn config() -> ProbeConfig {
    let mut cfg = ProbeConfig::new(vec![CPU]);
    cfg.drain_cpus = vec![0];
    cfg
}

/// Everything the probes send until `until`.
fn collect(rx: &Receiver<ProbeBatch>, until: Instant) -> Vec<Record> {
    let mut out = Vec::new();
    while Instant::now() < until {
        if let Ok(b) = rx.recv_timeout(Duration::from_millis(20)) {
            out.extend(b);
        }
    }
    out
}

/// Every record the loaded `skel`'s rings hold, decoded.
fn drain_rings(skel: &mut JitterscopeSkel, layout: &RingLayout) -> Vec<Record> {
    let mut rings = rings::open(skel, layout).expect("map the rings");
    let mut syms = Kallsyms::parse("");
    let mut out = Vec::new();
    rings.consume(usize::MAX, &mut |r| {
        out.extend(decode::decode(&r, &mut syms))
    });
    out
}

/// The object with only its raw_tp seams loaded, CPU `CPU` measured and its ring holding
/// `ring_bytes`.
fn load_seams(
    storage: &mut MaybeUninit<libbpf_rs::OpenObject>,
    ring_bytes: u32,
) -> (JitterscopeSkel<'_>, RingLayout) {
    let mut open = JitterscopeSkelBuilder::default().open(storage).unwrap();
    open.maps.rodata_data.as_deref_mut().unwrap().target_cpus[0] = 1 << CPU;
    let layout = rings::size(&mut open, ring_bytes, &[CPU]).unwrap();
    for mut p in open.open_object_mut().progs_mut() {
        let raw = p.section().to_string_lossy().starts_with("raw_tp/");
        p.set_autoload(raw);
    }
    (open.load().expect("load the raw_tp seams"), layout)
}

/// Runs a raw_tp seam on CPU `CPU` with `args` as its tracepoint's arguments.
fn run_seam(prog: &libbpf_rs::ProgramMut, args: &[u64]) {
    let mut ctx: Vec<u8> = args.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let input = libbpf_rs::ProgramInput {
        context_in: Some(&mut ctx),
        cpu: CPU,
        flags: libbpf_sys::BPF_F_TEST_RUN_ON_CPU,
        ..Default::default()
    };
    prog.test_run(input).expect("BPF_PROG_TEST_RUN");
}

fn interruptions(records: &[Record]) -> Vec<&Interruption> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Interruption(i) => Some(i),
            _ => None,
        })
        .collect()
}

#[test]
fn every_program_loads_and_the_mandatory_ones_attach() {
    if skip_bpf("every_program_loads_and_the_mandatory_ones_attach") {
        return;
    }
    let _cpus = exclusive();
    let (session, _rx) = start(config());
    let report = session.attach_report().to_vec();
    for tp in MANDATORY {
        let s = report.iter().find(|a| a.tracepoint == tp);
        assert_eq!(
            s.map(|s| &s.state),
            Some(&AttachState::Attached),
            "{tp}: {report:?}"
        );
    }
    for a in &report {
        if let AttachState::Unavailable(why) = &a.state {
            println!("optional tracepoint not attached: {} ({why})", a.tracepoint);
        }
    }
    // On x86 with these tracepoints in BTF, the tick and the IPIs must attach too.
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    if btf.windows(26).any(|w| w == b"btf_trace_local_timer_entry") {
        assert!(report
            .iter()
            .any(|a| a.tracepoint == "local_timer_entry" && a.state == AttachState::Attached));
    }
    session.stop().unwrap();
}

#[test]
fn stat_refresh_shows_as_a_kworker_running_refresh_vm_stats_in_a_workload_gap() {
    if skip_bpf("stat_refresh_shows_as_a_kworker_running_refresh_vm_stats_in_a_workload_gap")
        || fewer_cpus_than(
            "stat_refresh_shows_as_a_kworker_running_refresh_vm_stats_in_a_workload_gap",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write("/proc/sys/vm/stat_refresh", "1").expect("write /proc/sys/vm/stat_refresh");
    let records = collect(&rx, Instant::now() + Duration::from_millis(400));
    let gaps = spinner.finish();
    session.stop().unwrap();
    let kworkers: Vec<_> = interruptions(&records)
        .into_iter()
        .filter(|i| {
            i.cpu == CPU && i.class == CulpritClass::Kworker && &*i.detail() == "refresh_vm_stats"
        })
        .collect();
    assert!(
        !kworkers.is_empty(),
        "no refresh_vm_stats kworker on CPU {CPU}: {records:#?}"
    );
    let k = kworkers[0];
    assert!(k.name().starts_with("kworker/"), "{k:?}");
    assert!(k.pid > 0);
    // The kworker replaced the spinning thread: its run lies inside one of the thread's gaps.
    assert!(
        gaps.iter().any(|&(s, e)| s <= k.start_ns && k.end_ns <= e),
        "kworker {k:?} not inside a workload gap {gaps:?}"
    );
}

/// jitterscope's own IPIs are its own noise: the probes mark an IPI sent by one of its
/// threads (from task context) as the sender's own, and no other process's. Both are caused
/// here on purpose — this process's expedited membarrier IPIs the CPU its spinning thread runs
/// on; another process's write to `stat_refresh` queues work there, waking its kworker — and
/// each send is found among the causes by the sending thread's id, which the kernel stamps.
#[test]
fn an_ipi_sent_by_this_process_is_marked_its_own_and_another_process_is_not() {
    let test = "an_ipi_sent_by_this_process_is_marked_its_own_and_another_process_is_not";
    if skip_bpf(test) || fewer_cpus_than(test, 2) {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 8;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 16;
    let membarrier = |cmd: libc::c_long| unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
    assert_eq!(
        membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED),
        0,
        "membarrier register: {}",
        std::io::Error::last_os_error()
    );
    let sender = std::thread::spawn(move || {
        pin(0, 0);
        for _ in 0..20 {
            assert_eq!(
                membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED),
                0,
                "membarrier: {}",
                std::io::Error::last_os_error()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        (unsafe { libc::gettid() }) as u32
    })
    .join()
    .unwrap();
    let other = std::process::Command::new("sh")
        .args(["-c", "echo 1 > /proc/sys/vm/stat_refresh"])
        .spawn()
        .expect("start sh");
    let other_pid = other.id();
    assert!(other.wait_with_output().unwrap().status.success());
    let records = collect(&rx, Instant::now() + Duration::from_millis(300));
    drop(spinner);
    session.stop().unwrap();
    let causes = |pid: u32| -> Vec<&jitterscope::model::Cause> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Cause(c) if c.target_cpu == CPU && c.sender_pid == pid => Some(c),
                _ => None,
            })
            .collect()
    };
    let own = causes(sender);
    let own_ipis = own.iter().filter(|c| c.kind == CauseKind::Ipi).count();
    assert!(
        own_ipis >= 10,
        "{own_ipis} IPIs to CPU {CPU} from this process's thread {sender} after 20 expedited membarriers: {own:#?}"
    );
    assert!(
        own.iter().all(|c| c.sender_is_self),
        "an IPI this process sent is not marked as its own: {own:#?}"
    );
    let theirs = causes(other_pid);
    assert!(
        !theirs.is_empty(),
        "no cause for CPU {CPU} from sh[{other_pid}], which wrote stat_refresh: {records:#?}"
    );
    assert!(
        theirs.iter().all(|c| !c.sender_is_self),
        "another process's send is marked as jitterscope's own: {theirs:#?}"
    );
}

#[test]
fn a_competing_task_is_named_with_its_comm_and_pid() {
    if skip_bpf("a_competing_task_is_named_with_its_comm_and_pid")
        || fewer_cpus_than("a_competing_task_is_named_with_its_comm_and_pid", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    let hog = Competitor::start(CPU as usize);
    let records = collect(&rx, Instant::now() + Duration::from_millis(1100));
    let pid = hog.pid();
    drop(hog);
    drop(spinner);
    session.stop().unwrap();
    // Its first episodes may predate exec (the comm is still the test's): take the longest.
    let found = interruptions(&records)
        .into_iter()
        .filter(|i| i.class == CulpritClass::Task && i.pid == pid && i.cpu == CPU)
        .max_by_key(|i| i.duration_ns());
    let t = found.unwrap_or_else(|| panic!("no task record for sh[{pid}]"));
    assert_eq!(&*t.name(), format!("sh[{pid}]"));
    assert_eq!(&*t.detail(), "SCHED_OTHER", "{t:?}");
    assert!(t.duration_ns() >= 100_000, "CFS slices are long: {t:?}");
}

#[test]
fn a_steered_device_irq_is_recorded_with_its_number_and_name() {
    if skip_bpf("a_steered_device_irq_is_recorded_with_its_number_and_name") {
        return;
    }
    let test = "a_steered_device_irq_is_recorded_with_its_number_and_name";
    if fewer_cpus_than(test, 2) {
        return;
    }
    let Some((irq, name)) = steerable_irq_or_skip(test) else {
        return;
    };
    let _cpus = exclusive();
    let _affinity = Restore::set(
        &format!("/proc/irq/{irq}/smp_affinity_list"),
        &CPU.to_string(),
    )
    .expect("steer the virtio-rng IRQ");
    let (session, rx) = start(config());
    let mut rng = std::fs::File::open("/dev/hwrng").expect("open /dev/hwrng");
    let mut buf = [0u8; 64];
    for _ in 0..20 {
        use std::io::Read;
        let _ = rng.read(&mut buf);
    }
    let mut records = collect(&rx, Instant::now() + Duration::from_millis(200));
    session.stop().unwrap();
    records.extend(rx.try_iter().flatten());
    let found = interruptions(&records)
        .into_iter()
        .find(|i| i.class == CulpritClass::Irq && i.id == irq as u64);
    let r = found.unwrap_or_else(|| {
        let irqs: Vec<_> = interruptions(&records)
            .into_iter()
            .filter(|i| i.class == CulpritClass::Irq)
            .collect();
        panic!("no IRQ {irq} record on CPU {CPU}; IRQ records: {irqs:?}")
    });
    assert_eq!(r.cpu, CPU);
    assert_eq!(&*r.name(), format!("{irq} {name}"));
    // The programs copy an action's name only when another action runs than last time on
    // the CPU: every IRQ record, whichever device came before it, bears its own action's
    // name as /proc/interrupts lists it.
    let listed = proc_interrupt_names();
    let mut seen = std::collections::BTreeSet::new();
    for i in interruptions(&records)
        .into_iter()
        .filter(|i| i.class == CulpritClass::Irq)
    {
        let Some(names) = listed.get(&i.id) else {
            continue; // freed since, or not a numbered line
        };
        let action = match &i.who {
            jitterscope::model::Who::Irq { action, .. } => action.to_string(),
            other => panic!("an IRQ record names {other:?}"),
        };
        assert!(
            names.split(", ").any(|n| n == action),
            "IRQ {} recorded as {:?}; /proc/interrupts lists {names:?}",
            i.id,
            i.name()
        );
        seen.insert(i.id);
    }
    println!("IRQ numbers seen on CPU {CPU}: {seen:?}");
}

/// Action names per IRQ number, as /proc/interrupts lists them (the last column).
fn proc_interrupt_names() -> std::collections::BTreeMap<u64, String> {
    let text = std::fs::read_to_string("/proc/interrupts").expect("read /proc/interrupts");
    let cpus = text
        .lines()
        .next()
        .map_or(0, |h| h.split_whitespace().count());
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (nr, rest) = l.trim_start().split_once(':')?;
            let nr: u64 = nr.parse().ok()?;
            // the counts, the chip, the hardware IRQ with its trigger (`5-edge`), the names
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let names = fields.get(cpus + 2..)?.join(" ");
            Some((nr, names))
        })
        .collect()
}

#[test]
fn the_reference_programs_run_beside_the_probes_and_stay_out_of_their_costs() {
    if skip_bpf("the_reference_programs_run_beside_the_probes_and_stay_out_of_their_costs") {
        return;
    }
    let _cpus = exclusive();
    for place in [Reference::AfterProbes, Reference::BeforeProbes] {
        reference_programs_beside_the_probes(place);
    }
    // Not loaded unless asked for.
    let (session, _rx) = start(config());
    assert!(session.stop().unwrap().floor.is_empty());
}

fn reference_programs_beside_the_probes(place: Reference) {
    let mut cfg = config();
    cfg.floor = place;
    let (session, rx) = start(cfg);
    let report = session.attach_report().to_vec();
    // Switches on the measured CPU: a thread there sleeping in short steps.
    let t = std::thread::spawn(|| {
        pin(0, CPU as usize);
        for _ in 0..200 {
            std::thread::sleep(Duration::from_micros(200));
        }
    });
    let _ = collect(&rx, Instant::now() + Duration::from_millis(300));
    t.join().unwrap();
    let summary = session.stop().unwrap();
    assert_eq!(
        report
            .iter()
            .filter(|a| a.tracepoint == "sched_switch")
            .count(),
        1,
        "the reference programs are not reported as probes: {report:?}"
    );
    let names: Vec<&str> = summary.floor.iter().map(|c| c.program.as_str()).collect();
    let references = ["empty", "clock", "timer_empty", "timer_clock"];
    assert_eq!(names, references, "{place:?}: {summary:?}");
    assert_eq!(summary.floor_place, place);
    assert!(summary.costs.iter().any(|c| c.program == "sched_switch"));
    assert!(
        !summary
            .costs
            .iter()
            .any(|c| references.contains(&c.program.as_str())),
        "{place:?}: {summary:?}"
    );
    if summary.stats_enabled {
        for c in &summary.floor {
            // Two run on every switch of every CPU, the measured one's 400 among them; the
            // other two on every timer interrupt of every CPU (the tick's, at least).
            let least = if c.program.starts_with("timer_") {
                10
            } else {
                400
            };
            assert!(
                c.run_count >= least && c.run_time_ns > 0,
                "{place:?}: {c:?}"
            );
        }
    }
}

#[test]
fn a_busy_cpu_takes_timer_ticks() {
    if skip_bpf("a_busy_cpu_takes_timer_ticks")
        || fewer_cpus_than("a_busy_cpu_takes_timer_ticks", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    let records = collect(&rx, Instant::now() + Duration::from_secs(1));
    drop(spinner);
    session.stop().unwrap();
    let ticks = interruptions(&records)
        .into_iter()
        .filter(|i| i.class == CulpritClass::TimerTick && i.cpu == CPU)
        .count();
    // HZ is 100 to 1000; a busy CPU takes a tick every 1–10 ms.
    assert!(ticks >= 50, "only {ticks} timer ticks in 1 s on a busy CPU");
}

#[test]
fn a_collector_waiting_on_the_drain_wakes_with_that_drains_records() {
    if skip_bpf("a_collector_waiting_on_the_drain_wakes_with_that_drains_records")
        || fewer_cpus_than(
            "a_collector_waiting_on_the_drain_wakes_with_that_drains_records",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let mut cfg = config();
    cfg.drain_interval = Duration::from_millis(300);
    let (session, rx) = start(cfg);
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    // The first beat may be of a drain from before the spinner ran.
    assert!(
        session.wait_drained(Duration::from_secs(5)),
        "no drain in 5 s"
    );
    while rx.try_recv().is_ok() {}
    for turn in 0..3 {
        assert!(
            session.wait_drained(Duration::from_secs(5)),
            "turn {turn}: no drain in 5 s"
        );
        let beat_ns = jitterscope::platform::clock::monotonic_ns();
        // Each drain sends its records before its beat: they are there when the beat is, up
        // to the ticks of the last few ms (a busy CPU takes one every 1–10 ms). A beat sent
        // before the drain would find only the last drain's, 300 ms old.
        let mut newest = None;
        while let Ok(batch) = rx.try_recv() {
            newest = interruptions(&batch)
                .iter()
                .filter(|i| i.class == CulpritClass::TimerTick && i.cpu == CPU)
                .map(|i| i.end_ns)
                .chain(newest)
                .max();
        }
        let newest = newest.unwrap_or_else(|| panic!("turn {turn}: the beat came without ticks"));
        let age_ms = beat_ns.saturating_sub(newest) / 1_000_000;
        assert!(
            age_ms < 100,
            "turn {turn}: the newest tick at the beat was {age_ms} ms old: not this drain's"
        );
    }
    drop(spinner);
    session.stop().unwrap();
}

#[test]
fn the_probes_learn_this_process_and_each_registering_thread_in_kernel_numbers() {
    if skip_bpf("the_probes_learn_this_process_and_each_registering_thread_in_kernel_numbers") {
        return;
    }
    let (session, _rx) = start(config());
    // The tests run in the init PID namespace, where the local ids are the kernel's
    // (tests/pid_namespace.rs covers the other case).
    assert_eq!(session.kernel_pid(), std::process::id());
    let registrar = session.registrar();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let r = registrar.clone();
            std::thread::spawn(move || {
                let mine = unsafe { libc::gettid() } as u32;
                (mine, r.register_current_thread().expect("register"))
            })
        })
        .collect();
    for t in threads {
        let (mine, kernel) = t.join().unwrap();
        assert_eq!(kernel, mine, "a thread was told another thread's id");
    }
    session.stop().unwrap();
}

#[test]
fn a_thread_registered_while_its_run_is_open_is_never_recorded_as_an_interruption() {
    if skip_bpf("a_thread_registered_while_its_run_is_open_is_never_recorded_as_an_interruption")
        || fewer_cpus_than(
            "a_thread_registered_while_its_run_is_open_is_never_recorded_as_an_interruption",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    // The spinner is switched in on CPU 1 before anyone knows its tid: a task run opens for
    // it there and stays open while it spins.
    let spinner = Spinner::start(CPU as usize);
    std::thread::sleep(Duration::from_millis(100));
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    let registered = jitterscope::workload::clock::monotonic_ns();
    // A competitor switches it out, which closes that run.
    let hog = Competitor::start(CPU as usize);
    let mut records = collect(&rx, Instant::now() + Duration::from_millis(400));
    let hog_pid = hog.pid();
    drop(hog);
    let tid = spinner.tid();
    drop(spinner);
    session.stop().unwrap();
    records.extend(rx.try_iter().flatten());
    let own: Vec<_> = interruptions(&records)
        .into_iter()
        .filter(|i| i.pid == tid && i.end_ns > registered)
        .collect();
    assert!(
        own.is_empty(),
        "the workload thread {tid} is its own interruption: {own:?}"
    );
    // The switch did happen: the competitor's run is there.
    assert!(
        interruptions(&records)
            .iter()
            .any(|i| i.pid == hog_pid && i.cpu == CPU),
        "the competitor never ran on CPU {CPU}"
    );
}

#[test]
fn cpu_frequency_records_old_and_new_khz_through_the_raw_tp_seam() {
    if skip_bpf("cpu_frequency_records_old_and_new_khz_through_the_raw_tp_seam") {
        return;
    }
    let mut storage = MaybeUninit::uninit();
    let mut open = JitterscopeSkelBuilder::default()
        .open(&mut storage)
        .unwrap();
    let layout = rings::size(&mut open, 1 << 20, &[1]).unwrap();
    for mut p in open.open_object_mut().progs_mut() {
        let raw = p.section().to_string_lossy().starts_with("raw_tp/");
        p.set_autoload(raw);
    }
    let mut skel = open.load().expect("load the raw_tp seam");
    let drive = |khz: u64, cpu_id: u64| {
        let mut ctx: Vec<u8> = [khz, cpu_id].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx),
            cpu: 1,
            flags: libbpf_sys::BPF_F_TEST_RUN_ON_CPU,
            ..Default::default()
        };
        skel.progs
            .js_cpu_frequency_raw
            .test_run(input)
            .expect("BPF_PROG_TEST_RUN");
    };
    drive(3_000_000, 1);
    drive(1_200_000, 1);
    let recs = drain_rings(&mut skel, &layout);
    let freq: Vec<(String, String)> = interruptions(&recs)
        .into_iter()
        .filter(|i| i.class == CulpritClass::FreqChange)
        .map(|i| (i.name().to_string(), i.detail().to_string()))
        .collect();
    assert_eq!(
        freq,
        [
            ("cpu 1".to_string(), "?→3000000 kHz".to_string()),
            ("cpu 1".to_string(), "3000000→1200000 kHz".to_string())
        ]
    );
}

#[test]
fn a_tiny_ring_buffer_under_a_switch_storm_reports_drops() {
    if skip_bpf("a_tiny_ring_buffer_under_a_switch_storm_reports_drops")
        || fewer_cpus_than("a_tiny_ring_buffer_under_a_switch_storm_reports_drops", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let mut cfg = config();
    cfg.ringbuf_bytes = 4096;
    cfg.drain_interval = Duration::from_millis(200);
    let (session, rx) = start(cfg);
    // Two threads pinned to the CPU yielding to each other: a context-switch storm.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let storm: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                pin(0, CPU as usize);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    let records = collect(&rx, Instant::now() + Duration::from_millis(600));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in storm {
        t.join().unwrap();
    }
    let summary = session.stop().unwrap();
    assert!(
        summary.total_drops() > 0,
        "no drops with 4 KiB of record rings: {summary:?}"
    );
    assert!(summary.drops.iter().all(|(cpu, _)| *cpu == CPU));
    assert!(
        records
            .iter()
            .any(|r| matches!(r, Record::Lost { cpu, count, .. } if *cpu == CPU && *count > 0)),
        "the lost window was not reported"
    );
}

#[test]
fn the_probes_send_no_irq_work_or_call_function_ipis_to_the_measured_cpu() {
    if skip_bpf("the_probes_send_no_irq_work_or_call_function_ipis_to_the_measured_cpu")
        || fewer_cpus_than(
            "the_probes_send_no_irq_work_or_call_function_ipis_to_the_measured_cpu",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let window = Duration::from_secs(2);
    let spinner = Spinner::start(CPU as usize);
    let count = || {
        (
            interrupts("IWI", CPU as usize),
            interrupts("CAL", CPU as usize),
        )
    };
    // Without probes.
    let (iwi0, cal0) = count();
    std::thread::sleep(window);
    let (iwi1, cal1) = count();
    // With probes attached and draining (attach and detach themselves patch kernel text,
    // which IPIs every CPU; only the steady state is compared).
    let (session, rx) = start(config());
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (iwi2, cal2) = count();
    let records = collect(&rx, Instant::now() + window);
    let (iwi3, cal3) = count();
    session.stop().unwrap();
    drop(spinner);
    let (without_iwi, with_iwi) = (iwi1 - iwi0, iwi3 - iwi2);
    let (without_cal, with_cal) = (cal1 - cal0, cal3 - cal2);
    println!("CPU {CPU} over {window:?}: IWI {without_iwi} → {with_iwi}, CAL {without_cal} → {with_cal}, {} records", records.len());
    assert!(
        with_iwi <= without_iwi + 2,
        "irq_work IPIs grew with the probes: {without_iwi} → {with_iwi}"
    );
    assert!(
        with_cal <= without_cal + 5,
        "call-function IPIs grew with the probes: {without_cal} → {with_cal}"
    );
}

#[test]
fn a_work_item_keeps_its_name_when_its_worker_is_preempted_inside_it() {
    if skip_bpf("a_work_item_keeps_its_name_when_its_worker_is_preempted_inside_it")
        || fewer_cpus_than(
            "a_work_item_keeps_its_name_when_its_worker_is_preempted_inside_it",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    // A SCHED_FIFO thread waking every 10 µs preempts the kworker (SCHED_OTHER) where it is:
    // now and then inside its work item, which then resumes after a switch.
    let preempter = Sleeper::start("js-preempter", CPU as usize, 10_000, true);
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..20 {
        std::fs::write("/proc/sys/vm/stat_refresh", "1").expect("write /proc/sys/vm/stat_refresh");
        std::thread::sleep(Duration::from_millis(10));
    }
    let records = collect(&rx, Instant::now() + Duration::from_millis(300));
    drop(preempter);
    drop(spinner);
    session.stop().unwrap();
    let kworkers: Vec<_> = interruptions(&records)
        .into_iter()
        .filter(|i| i.cpu == CPU && i.class == CulpritClass::Kworker)
        .collect();
    let unnamed: Vec<_> = kworkers
        .iter()
        .filter(|i| &*i.detail() == jitterscope::report::culprit::WORK_UNREADABLE)
        .collect();
    assert!(
        unnamed.is_empty(),
        "kworker runs without a name: {unnamed:#?}"
    );
    let item = |i: &&&Interruption| {
        i.parent == Some(CulpritClass::Kworker) && &*i.detail() == "refresh_vm_stats"
    };
    assert!(
        kworkers.iter().any(|i| item(&i)),
        "no refresh_vm_stats item on CPU {CPU}: {kworkers:#?}"
    );
    // The case this is about happened: a run that began inside refresh_vm_stats, whose
    // continuation slice starts with the run and carries the item's name.
    let resumed = kworkers.iter().filter(|r| r.parent.is_none()).find(|run| {
        &*run.detail() == "refresh_vm_stats"
            && kworkers
                .iter()
                .any(|i| item(&i) && i.pid == run.pid && i.start_ns == run.start_ns)
    });
    assert!(
        resumed.is_some(),
        "no worker was switched back in inside refresh_vm_stats: {kworkers:#?}"
    );
}

#[test]
fn the_local_timer_is_split_into_the_scheduler_tick_and_sleepers_wakeups() {
    if skip_bpf("the_local_timer_is_split_into_the_scheduler_tick_and_sleepers_wakeups")
        || fewer_cpus_than(
            "the_local_timer_is_split_into_the_scheduler_tick_and_sleepers_wakeups",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    let other = SleepLoop::start(CPU as usize);
    let own = Sleeper::start("js-own-sleep", CPU as usize, 1_000_000, false);
    let records = collect(&rx, Instant::now() + Duration::from_secs(1));
    drop(other);
    let slept = own.finish();
    drop(spinner);
    session.stop().unwrap();
    let timers: Vec<_> = interruptions(&records)
        .into_iter()
        .filter(|i| i.cpu == CPU && &*i.name() == "local timer")
        .collect();
    let callbacks: Vec<_> = timers
        .iter()
        .filter(|i| i.parent == Some(CulpritClass::TimerTick))
        .collect();
    let vectors: Vec<_> = timers
        .iter()
        .filter(|i| i.class == CulpritClass::TimerTick && i.parent != Some(CulpritClass::TimerTick))
        .collect();
    assert!(
        callbacks
            .iter()
            .any(|i| i.class == CulpritClass::TimerTick && &*i.detail() == "scheduler tick"),
        "no scheduler tick under the local timer on a busy CPU: {timers:#?}"
    );
    let wake = callbacks
        .iter()
        .find(|i| {
            i.class == CulpritClass::TimerTick && i.detail().starts_with("hrtimer_wakeup of sleep[")
        })
        .unwrap_or_else(|| panic!("no hrtimer_wakeup of the sleep loop: {timers:#?}"));
    assert!(wake.pid > 0, "{wake:?}");
    assert_eq!(
        &*wake.detail(),
        format!("hrtimer_wakeup of sleep[{}]", wake.pid)
    );
    assert!(
        callbacks.iter().any(|i| i.class == CulpritClass::SelfNoise
            && &*i.detail() == "hrtimer_wakeup of js-own-sleep (jitterscope's own sleep)"),
        "none of {slept} sleeps of jitterscope's own thread shows as its own: {timers:#?}"
    );
    assert!(vectors
        .iter()
        .any(|v| &*v.detail() == "timer interrupt outside callbacks"));
    // Each callback lies inside a timer interrupt, where it takes its own time. The interrupt's
    // record is written at its exit, after the callback's: a callback at the very end of the
    // collection may have its interrupt in a batch collected no more, and is left out.
    let last_exit = vectors.iter().map(|v| v.end_ns).max().unwrap_or(0);
    let (inside, after): (Vec<&&&Interruption>, Vec<&&&Interruption>) =
        callbacks.iter().partition(|c| c.end_ns <= last_exit);
    assert!(
        after.iter().all(|c| c.start_ns > last_exit),
        "a callback across the last timer interrupt's exit: {after:#?}"
    );
    for c in inside {
        assert!(
            vectors
                .iter()
                .any(|v| v.start_ns <= c.start_ns && c.end_ns <= v.end_ns),
            "callback {c:?} outside every timer interrupt"
        );
    }
}

/// CPU `cpu`'s steal time in /proc/stat, in ns (it counts in USER_HZ ticks).
fn proc_stat_steal_ns(cpu: u32) -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap();
    let ticks: u64 = text
        .lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse().ok())
        .expect("a steal column in /proc/stat");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000_000 / hz
}

#[test]
fn the_steal_clock_is_reported_and_reads_what_proc_stat_counts() {
    let test = "the_steal_clock_is_reported_and_reads_what_proc_stat_counts";
    if skip_bpf(test) || fewer_cpus_than(test, 2) {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let (on, note) = (
        session.steal_clock(),
        session.steal_clock_note().map(str::to_string),
    );
    // A busy CPU takes probe events (ticks, switches), each of which reads the clock; the
    // window compared with /proc/stat opens once the probes have read it.
    let spinner = Spinner::start(CPU as usize);
    std::thread::sleep(Duration::from_millis(100));
    let stat_before = proc_stat_steal_ns(CPU);
    let from = jitterscope::workload::clock::monotonic_ns();
    let mut records = collect(&rx, Instant::now() + Duration::from_secs(2));
    let to = jitterscope::workload::clock::monotonic_ns();
    let stat_after = proc_stat_steal_ns(CPU);
    drop(spinner);
    let summary = session.stop().unwrap();
    records.extend(rx.try_iter().flatten());
    assert_eq!(
        (summary.steal_clock, &summary.steal_clock_note),
        (on, &note)
    );
    let kvm = std::fs::read_to_string(
        "/sys/devices/system/clocksource/clocksource0/available_clocksource",
    )
    .unwrap_or_default()
    .contains("kvm-clock");
    if !on {
        let note = note.expect("a reason when there is no steal clock");
        assert!(note.starts_with("no KVM steal clock ("), "{note}");
        assert!(
            !(kvm && stat_after > 0),
            "a KVM guest with steal in /proc/stat, yet: {note}"
        );
        skip(test, "no KVM steal clock to compare", Lack::Hardware);
        return;
    }
    assert_eq!(note, None);
    steal_samples_agree_with_proc_stat(&records, (from, to), (stat_before, stat_after));
    // The value read is the kernel's: /proc/stat accounts it at ticks, in USER_HZ units.
    let unit = proc_stat_unit_ns();
    let read = summary.steal_clock_ns.iter().find(|c| c.0 == CPU);
    if stat_after >= unit {
        let read = read.map(|c| c.1).unwrap_or_else(|| {
            panic!("the steal clock of CPU {CPU} was never read ({stat_after} ns in /proc/stat)")
        });
        assert!(
            read.abs_diff(stat_after) <= 50_000_000,
            "steal clock read {read} ns, /proc/stat says {stat_after} ns"
        );
    }
}

/// The steal clock's growth the probes saw on CPU inside the window `(from, to)` against
/// /proc/stat's steal column read at its two ends (`stat`): each growth record positive,
/// the records in time order without overlap, and the two sums apart by no more than one
/// USER_HZ unit (/proc/stat's resolution), plus one scheduler tick at each end (the kernel
/// accounts steal at its ticks: 10 ms at most, CONFIG_HZ being 100 or more), plus the growth
/// of the records straddling an end. No steal in the window is no steal in both.
fn steal_samples_agree_with_proc_stat(
    records: &[Record],
    (from, to): (u64, u64),
    stat: (u64, u64),
) {
    let mut samples: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Steal(s) => Some(*s),
            _ => None,
        })
        .collect();
    samples.sort_by_key(|s| s.from_ns);
    for s in &samples {
        assert_eq!(s.cpu, CPU, "{s:?}");
        assert!(s.steal_ns > 0 && s.from_ns < s.to_ns, "{s:?}");
        // Steal found between two reads happened between them (the host updates the
        // clock before it lets the vCPU run again).
        assert!(s.steal_ns <= s.to_ns - s.from_ns + 50_000, "{s:?}");
    }
    for w in samples.windows(2) {
        assert!(w[0].to_ns <= w[1].from_ns, "overlapping reads: {w:?}");
    }
    let inside: u64 = samples
        .iter()
        .filter(|s| s.from_ns >= from && s.to_ns <= to)
        .map(|s| s.steal_ns)
        .sum();
    let straddling: u64 = samples
        .iter()
        .filter(|s| s.from_ns < to && s.to_ns > from && !(s.from_ns >= from && s.to_ns <= to))
        .map(|s| s.steal_ns)
        .sum();
    let counted = stat.1 - stat.0;
    let unit = proc_stat_unit_ns();
    const TICK_NS: u64 = 10_000_000;
    let tolerance = unit + 2 * TICK_NS + straddling;
    let note = format!(
        "steal on CPU {CPU} in {} ms: probes {inside} ns (+{straddling} ns across an end), /proc/stat {counted} ns",
        (to - from) / 1_000_000
    );
    assert!(
        inside.abs_diff(counted) <= tolerance,
        "{note}: apart by more than {tolerance} ns"
    );
    if inside + straddling == 0 {
        // Only a USER_HZ unit filling up with steal from before the window may show.
        assert!(counted <= unit, "{note}");
    }
    if counted == 0 {
        assert!(inside < unit + 2 * TICK_NS, "{note}");
    }
    println!("{note}");
}

/// One unit of /proc/stat's CPU columns (USER_HZ), in ns.
fn proc_stat_unit_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64
}

#[test]
fn unbound_work_is_a_cause_for_each_measured_cpu_it_may_run_on() {
    if skip_bpf("unbound_work_is_a_cause_for_each_measured_cpu_it_may_run_on")
        || fewer_cpus_than(
            "unbound_work_is_a_cause_for_each_measured_cpu_it_may_run_on",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    // Unbound work may run on CPU only where the workqueue cpumask allows it: widened to
    // take it for the test where it does not, and put back on drop.
    let path = jitterscope::system::actions::WORKQUEUE_CPUMASK;
    let mask = std::fs::read_to_string(path).unwrap();
    let mask = u64::from_str_radix(mask.trim().rsplit(',').next().unwrap(), 16).unwrap();
    let _mask = (mask & (1 << CPU) == 0)
        .then(|| Restore::set(path, &format!("{:x}", mask | (1 << CPU))).unwrap());
    let (session, rx) = start(config());
    // Dirty data on a disk filesystem, then sync from CPU 0: the flusher's work (wb_workfn)
    // goes to the unbound writeback workqueue.
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("unbound-work");
    std::thread::spawn(move || {
        pin(0, 0);
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        // SAFETY: plain syscall.
        unsafe { libc::sync() };
        let _ = std::fs::remove_file(&path);
    })
    .join()
    .unwrap();
    let records = collect(&rx, Instant::now() + Duration::from_millis(300));
    session.stop().unwrap();
    let causes: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Cause(c) if c.kind == CauseKind::QueueWork => Some(c),
            _ => None,
        })
        .collect();
    assert!(
        causes
            .iter()
            .any(|c| c.target_cpu == CPU && c.what == "wb_workfn"),
        "no unbound wb_workfn queued for CPU {CPU}: {causes:#?}"
    );
}

#[test]
fn an_episode_whose_end_was_missed_is_not_the_parent_of_the_next() {
    if skip_bpf("an_episode_whose_end_was_missed_is_not_the_parent_of_the_next")
        || fewer_cpus_than(
            "an_episode_whose_end_was_missed_is_not_the_parent_of_the_next",
            2,
        )
    {
        return;
    }
    let _cpus = exclusive();
    let mut storage = MaybeUninit::uninit();
    let (mut skel, layout) = load_seams(&mut storage, 1 << 16);
    // A softirq whose exit was missed (as when the exit program attaches a moment after the
    // entry one), then a whole one: softirqs do not nest, so the open one is forgotten.
    run_seam(&skel.progs.js_softirq_entry_raw, &[1]);
    run_seam(&skel.progs.js_softirq_entry_raw, &[3]);
    run_seam(&skel.progs.js_softirq_exit_raw, &[3]);
    let softirqs: Vec<_> = drain_rings(&mut skel, &layout)
        .into_iter()
        .filter_map(|r| match r {
            Record::Interruption(i) if i.class == CulpritClass::Softirq => Some(i),
            _ => None,
        })
        .collect();
    assert_eq!(softirqs.len(), 1, "{softirqs:#?}");
    assert_eq!(&*softirqs[0].name(), "NET_RX");
    assert_eq!(softirqs[0].parent, None, "{softirqs:#?}");
}

#[test]
fn records_dropped_where_no_state_is_kept_still_open_a_lost_window() {
    if skip_bpf("records_dropped_where_no_state_is_kept_still_open_a_lost_window")
        || fewer_cpus_than(
            "records_dropped_where_no_state_is_kept_still_open_a_lost_window",
            2,
        )
    {
        return;
    }
    // Each test run is a call-function IPI to the CPU: not while another test counts them.
    let _cpus = exclusive();
    let mut storage = MaybeUninit::uninit();
    // The smallest ring for the measured CPU: 43 records, rounded up to 64.
    let (mut skel, layout) = load_seams(&mut storage, 4096);

    // Frequency records are reserved without the CPU's state (they may come from any CPU):
    // more than a 4 KiB ring holds.
    for khz in 0..100u64 {
        run_seam(
            &skel.progs.js_cpu_frequency_raw,
            &[1_000_000 + khz, CPU as u64],
        );
    }
    let kept = drain_rings(&mut skel, &layout);
    let drops = skel.maps.bss_data.as_deref().unwrap().counters[CPU as usize].rb_drops;
    assert!(
        drops > 0 && kept.len() as u64 + drops == 100,
        "{} kept, {drops} dropped",
        kept.len()
    );
    assert!(!kept.iter().any(|r| matches!(r, Record::Lost { .. })));
    // The next record reserved on the CPU in normal context reports them.
    run_seam(&skel.progs.js_softirq_entry_raw, &[3]);
    run_seam(&skel.progs.js_softirq_exit_raw, &[3]);
    let after = drain_rings(&mut skel, &layout);
    let lost: Vec<_> = after
        .iter()
        .filter_map(|r| match r {
            Record::Lost {
                cpu,
                start_ns,
                end_ns,
                count,
            } => Some((*cpu, *start_ns, *end_ns, *count)),
            _ => None,
        })
        .collect();
    assert_eq!(lost.len(), 1, "{after:#?}");
    let (cpu, start_ns, end_ns, count) = lost[0];
    assert_eq!((cpu, count), (CPU, drops));
    assert!(0 < start_ns && start_ns <= end_ns, "{lost:?}");
    let last_kept = kept
        .iter()
        .filter_map(|r| match r {
            Record::Interruption(i) => Some(i.end_ns),
            _ => None,
        })
        .max()
        .unwrap();
    assert!(
        start_ns >= last_kept,
        "the window starts before the first drop: {lost:?}"
    );
    assert!(
        after
            .iter()
            .any(|r| matches!(r, Record::Interruption(i) if &*i.name() == "NET_RX")),
        "{after:#?}"
    );
}

#[test]
fn delayed_work_queued_from_the_timer_softirq_names_the_softirq_not_the_task_it_interrupted() {
    if skip_bpf(
        "delayed_work_queued_from_the_timer_softirq_names_the_softirq_not_the_task_it_interrupted",
    ) || fewer_cpus_than(
        "delayed_work_queued_from_the_timer_softirq_names_the_softirq_not_the_task_it_interrupted",
        2,
    ) {
        return;
    }
    let _cpus = exclusive();
    let (session, rx) = start(config());
    let spinner = Spinner::start(CPU as usize);
    session.set_workload_tids(&[spinner.tid()]).unwrap();
    // A thread on the measured CPU that changes its VM statistics (page allocations and
    // frees): vmstat_update then re-arms its deferrable timer there every vm.stat_interval,
    // and the timer queues the work from the TIMER softirq while this thread or the spinner
    // is current.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            pin(0, CPU as usize);
            // SAFETY: plain syscall.
            let tid = unsafe { libc::gettid() } as u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut v = vec![1u8; 4 << 20];
                v[4096] = 2;
                std::hint::black_box(&v);
                std::thread::sleep(Duration::from_millis(5));
            }
            tid
        })
    };
    let records = collect(&rx, Instant::now() + Duration::from_millis(3_500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let churner = churn.join().unwrap();
    let spinner_tid = spinner.tid();
    drop(spinner);
    session.stop().unwrap();
    let queued: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Cause(c) if c.kind == CauseKind::QueueWork && c.target_cpu == CPU => Some(c),
            _ => None,
        })
        .collect();
    assert!(
        queued
            .iter()
            .any(|c| c.sender_cpu == CPU && c.sent_from == SentFrom::Softirq { vector: Some(1) }),
        "no work queued for CPU {CPU} from its TIMER softirq: {queued:#?}"
    );
    // Neither thread queues work itself: whatever was queued while one was current came from
    // an interrupt, and says so.
    let credited: Vec<_> = queued
        .iter()
        .filter(|c| {
            c.sent_from == SentFrom::Task
                && (c.sender_pid == churner || c.sender_pid == spinner_tid)
        })
        .collect();
    assert!(
        credited.is_empty(),
        "work credited to a thread that only spun or allocated: {credited:#?}"
    );
}

/// The idle time of `cpu` in /proc/stat (USER_HZ ticks).
fn idle_ticks(cpu: u32) -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap();
    text.lines()
        .find(|l| l.starts_with(&format!("cpu{cpu} ")))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|v| v.parse().ok())
        .expect("an idle column in /proc/stat")
}

/// The tick's stops on CPU `CPU` over a probe session of `secs` seconds, `spinning` with a
/// busy thread pinned there (None: the tracepoint was not attached).
fn tick_stops_over(secs: u64, spinning: bool) -> Option<jitterscope::model::TickStops> {
    let (session, rx) = start(config());
    let traced = session
        .attach_report()
        .iter()
        .any(|a| a.tracepoint == "tick_stop" && a.state == AttachState::Attached);
    let spinner = spinning.then(|| Spinner::start(CPU as usize));
    if let Some(s) = &spinner {
        session.set_workload_tids(&[s.tid()]).unwrap();
    }
    collect(&rx, Instant::now() + Duration::from_secs(secs));
    drop(spinner);
    let summary = session.stop().unwrap();
    assert_eq!(
        summary.tick_stops.iter().map(|t| t.cpu).collect::<Vec<_>>(),
        if traced { vec![CPU] } else { vec![] },
        "the tick's stops are read for the measured CPU exactly when tick_stop is attached"
    );
    summary.tick_stops.into_iter().next()
}

#[test]
fn an_idle_cpu_stops_its_tick_and_a_busy_one_keeps_it() {
    if skip_bpf("an_idle_cpu_stops_its_tick_and_a_busy_one_keeps_it")
        || fewer_cpus_than("an_idle_cpu_stops_its_tick_and_a_busy_one_keeps_it", 2)
    {
        return;
    }
    let _cpus = exclusive();
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    if !btf.windows(19).any(|w| w == b"btf_trace_tick_stop") {
        // A kernel without NO_HZ_COMMON: nothing attached, nothing read.
        assert_eq!(tick_stops_over(1, false), None);
        return;
    }
    // Idle: nothing of this test on the CPU. Other work (compilers, other tests) may keep it
    // busy, or wake it more often than the tick (an idle entry with a timer due within a
    // tick keeps the tick), so sessions are repeated until it stopped its tick a few times.
    let mut idle = None;
    let mut idled = Vec::new();
    for _ in 0..15 {
        let before = idle_ticks(CPU);
        let t = tick_stops_over(2, false).expect("tick_stop is in BTF: attached");
        idled.push(idle_ticks(CPU) - before);
        if t.stopped >= 5 {
            idle = Some(t);
            break;
        }
    }
    let idle = idle.unwrap_or_else(|| {
        panic!("CPU {CPU} never stopped its tick 5 times in 2 s (15 tries; idle ticks of 10 ms in each: {idled:?})")
    });
    // Busy: a thread spinning there never lets it idle.
    let busy = tick_stops_over(2, true).unwrap();
    println!("idle: {idle:?}; busy: {busy:?}");
    assert!(
        busy.stopped * 10 <= idle.stopped,
        "a spinning CPU still stopped its tick {}× (idle: {}×)",
        busy.stopped,
        idle.stopped
    );
    // Only a nohz_full CPU tries to stop the tick while a task runs: elsewhere it is never
    // kept on a dependency.
    let nohz_full =
        std::fs::read_to_string("/sys/devices/system/cpu/nohz_full").unwrap_or_default();
    if nohz_full.trim().is_empty() || nohz_full.trim() == "(null)" {
        assert!(
            idle.kept.is_empty() && busy.kept.is_empty(),
            "{idle:?} {busy:?}"
        );
    }
}

#[test]
fn the_tick_stop_program_attaches_in_run_and_watch_sessions_alike() {
    if skip_bpf("the_tick_stop_program_attaches_in_run_and_watch_sessions_alike") {
        return;
    }
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    let present = btf.windows(19).any(|w| w == b"btf_trace_tick_stop");
    let _cpus = exclusive();
    for watch in [false, true] {
        let mut cfg = config();
        cfg.watch = watch;
        let (session, _rx) = start(cfg);
        let state = session
            .attach_report()
            .iter()
            .find(|a| a.tracepoint == "tick_stop")
            .map(|a| a.state.clone());
        let summary = session.stop().unwrap();
        if present {
            assert_eq!(state, Some(AttachState::Attached), "watch: {watch}");
            assert_eq!(summary.tick_stops.len(), 1, "watch: {watch}");
            assert!(summary.costs.iter().any(|c| c.program == "tick_stop"));
        } else {
            // Left out and said so; the session went on without it.
            assert!(matches!(state, Some(AttachState::Unavailable(_))));
            assert!(summary.tick_stops.is_empty());
        }
    }
}
