//! The live view: rendering against ratatui's TestBackend (golden buffers), and the real
//! thing under tmux with injected noise.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use jitterscope::live::model::ConsumerView;
use jitterscope::live::{view, CulpritRow, LiveModel, SortKey};
use jitterscope::model::CulpritClass;
use jitterscope::report::runfile::RunFile;
use jitterscope::report::seed::Summary;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::Terminal;

fn summary(p50: u64, max: u64) -> Summary {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
    for _ in 0..1000 {
        h.record(p50).unwrap();
    }
    h.record(max).unwrap();
    Summary::brief(&h)
}

fn model() -> LiveModel {
    LiveModel {
        label: "live".into(),
        producer_cpu: 1,
        consumer_cpus: vec![3],
        kernel: "6.18.0".into(),
        elapsed_ns: 12_000_000_000,
        planned_ns: 30_000_000_000,
        messages_per_s: 99_500.0,
        stalls: 1234,
        awaiting: None,
        at_end: false,
        lost: 0,
        kernel_total_ns: None,
        kernel_unseen: 0,
        bpf_cost: Some((175.0, 0.0004)),
        probes: true,
        consumers: vec![ConsumerView {
            name: "accumulator".into(),
            cpu: 3,
            interval: Some(summary(110, 182_400)),
            total: Some(summary(105, 1_200_000)),
            max_history: [2_000, 180_000, 3_000, 1_200_000, 2_500].into_iter().collect(),
        }],
        culprits: vec![
            CulpritRow {
                class: CulpritClass::Kworker,
                inferred: false,
                name: "kworker/3:1".into(),
                detail: "refresh_vm_stats".into(),
                count: 40,
                total_ns: 6_800_000,
                max_ns: 182_400,
                last_seen_ns: 11_500_000_000,
                share: 0.61,
            },
            CulpritRow {
                class: CulpritClass::TimerTick,
                inferred: false,
                name: "local timer".into(),
                detail: String::new(),
                count: 3000,
                total_ns: 3_000_000,
                max_ns: 20_000,
                last_seen_ns: 11_990_000_000,
                share: 0.27,
            },
            CulpritRow {
                class: CulpritClass::TimerTick,
                inferred: true,
                name: "local timer — entry/exit".into(),
                detail: String::new(),
                count: 3000,
                total_ns: 1_200_000,
                max_ns: 20_000,
                last_seen_ns: 11_990_000_000,
                share: 0.11,
            },
        ],
        feed: ["+11.500000s  accumulator message 191.0µs in transit: consumer CPU 3 stalled 182.4µs: kworker/3:1 refresh_vm_stats 171.0µs (90%)".to_string()]
            .into_iter()
            .collect(),
        sort: SortKey::Total,
        paused: false,
        help: false,
        note: None,
        watch: false,
        target: String::new(),
    }
}

fn render(m: &LiveModel, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, m)).unwrap();
    t.backend().buffer().clone()
}

fn text(b: &Buffer) -> String {
    let mut s = String::new();
    for y in 0..b.area.height {
        for x in 0..b.area.width {
            s.push_str(b[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

#[test]
fn the_main_layout_matches_its_golden_screen() {
    golden("live_main.txt", &text(&render(&model(), 120, 36)));
}

#[test]
fn a_narrow_terminal_gets_the_minimal_layout() {
    let b = text(&render(&model(), 50, 12));
    golden("live_narrow.txt", &b);
    assert!(b.contains("kworker measured 6.80ms kworker/3:1"), "{b}");
    assert!(b.contains("q quit"));
}

/// A watch's header names what is watched, and neither it nor the minimal layout shows a
/// workload's figures (producer, message rate).
#[test]
fn a_watch_header_names_its_target_and_no_workload() {
    let mut m = model();
    m.watch = true;
    m.target = "--pid 4121".into();
    let main = text(&render(&m, 120, 36));
    let header = main.lines().next().unwrap();
    assert!(
        header
            .starts_with("jitterscope watch --pid 4121  1 thread  12.0s  interruptions seen 1234"),
        "{main}"
    );
    let narrow = text(&render(&m, 50, 12));
    assert!(
        narrow.starts_with("watch --pid 4121 12s interruptions seen 1234"),
        "{narrow}"
    );
    for screen in [&main, &narrow] {
        assert!(
            !screen.contains("producer") && !screen.contains("msg/s"),
            "{screen}"
        );
    }
}

#[test]
fn an_inferred_row_says_so_before_the_name_a_narrow_terminal_cuts() {
    let b = text(&render(&model(), 50, 12));
    let rows: Vec<&str> = b.lines().filter(|l| l.starts_with("timer_tick")).collect();
    assert_eq!(rows.len(), 2, "{b}");
    assert!(
        rows[0].starts_with("timer_tick measured 3.00ms local timer"),
        "{b}"
    );
    assert!(
        rows[1].starts_with("timer_tick inferred 1.20ms local timer"),
        "{b}"
    );
    assert!(
        !b.contains("entry/exit"),
        "the name is cut, the marker is not: {b}"
    );
    // The full layout: a column of its own.
    let t = text(&render(&model(), 120, 36));
    let row = t.lines().find(|l| l.contains("local timer — entry/exit"));
    let words: Vec<&str> = row.expect("the inferred row").split_whitespace().collect();
    assert_eq!(words[..3], ["│timer_tick", "inferred", "local"], "{t}");
}

#[test]
fn lost_events_show_in_red() {
    let mut m = model();
    m.lost = 17;
    let b = render(&m, 120, 36);
    let t = text(&b);
    let line = t.lines().next().unwrap();
    let col = line.find("lost 17").expect("lost count in the header");
    let x = line[..col].chars().count() as u16;
    assert_eq!(b[(x, 0)].bg, Color::Red);
    // Zero lost is not red.
    let b = render(&model(), 120, 36);
    let line = text(&b).lines().next().unwrap().to_string();
    let x = line[..line.find("lost 0").unwrap()].chars().count() as u16;
    assert_ne!(b[(x, 0)].bg, Color::Red);
}

#[test]
fn sorting_and_help_change_the_screen() {
    let mut m = model();
    m.sort = SortKey::Count;
    let t = text(&render(&m, 120, 36));
    let tick = t.find("local timer").unwrap();
    let kw = t.find("kworker/3:1 refresh_vm_stats").unwrap();
    assert!(tick < kw, "by count the tick comes first");
    assert!(t.contains("culprits by count"));
    m.help = true;
    assert!(text(&render(&m, 120, 36)).contains("pause / resume the display"));
}

#[test]
fn the_plain_line_carries_the_key_figures() {
    let line = model().plain_line();
    assert!(
        line.starts_with("[  12.0s/30s] 99.5k msg/s | accumulator: transit p50 110ns"),
        "{line}"
    );
    assert!(
        line.contains("top culprit: kworker kworker/3:1 refresh_vm_stats 6.80ms"),
        "{line}"
    );
    assert!(line.contains("| stalls 1234 |"), "{line}");
}

/// Under a storm the attribution can fall behind the histograms (its records wait for the
/// collector's budget): the plain line and the header say by how much, rather than show an
/// old stall count as if it were current.
#[test]
fn stalls_awaiting_attribution_are_shown_with_how_far_behind_it_is() {
    let mut m = model();
    m.awaiting = Some((24_310, 2_400_000_000));
    let line = m.plain_line();
    assert!(
        line.contains("| stalls 1234 (+24310 awaiting attribution, 2.400s behind) |"),
        "{line}"
    );
    let t = text(&render(&m, 160, 36));
    assert!(
        t.contains("stalls 1234 (+24310 awaiting attribution, 2.400s behind)"),
        "{t}"
    );
}

/// Deciding at the end (`--attribution end`), the line and the header say how many stalls
/// wait for the end, not how far behind an attribution is that is not meant to keep up.
#[test]
fn stalls_waiting_for_the_end_are_counted_as_such() {
    let mut m = model();
    m.stalls = 0;
    m.culprits.clear();
    m.at_end = true;
    m.awaiting = Some((9_149, 0));
    let line = m.plain_line();
    assert!(
        line.contains("| stalls 0 (+9149 to attribute at the end)") && !line.contains("behind"),
        "{line}"
    );
    let t = text(&render(&m, 160, 36));
    assert!(
        t.contains("stalls 0 (+9149 to attribute at the end)"),
        "{t}"
    );
    // The seconds' percentiles are shown as when deciding live (read from the held second).
    assert!(line.contains("| accumulator: transit p50 "), "{line}");
    // The culprits meanwhile: the kernel's time on the measured CPUs so far, said as such.
    m.culprits = model().culprits;
    m.kernel_total_ns = Some(9_800_000);
    let line = m.plain_line();
    assert!(
        line.ends_with("| top kernel time: kworker kworker/3:1 refresh_vm_stats 6.80ms")
            && !line.contains("top culprit"),
        "{line}"
    );
    let t = text(&render(&m, 160, 36));
    assert!(
        t.contains(
            "kernel time on the measured CPUs by total (9.80ms so far; stalls decided at the end)"
        ) && t.contains("kworker/3:1 refresh_vm_stats"),
        "{t}"
    );
    // Task runs whose closing switch the kernel never reported are left out, and said so.
    m.kernel_unseen = 3;
    let t = text(&render(&m, 200, 36));
    assert!(
        t.contains("(9.80ms so far, 3 task runs without a closing switch left out; stalls decided at the end)"),
        "{t}"
    );
    // The spikes: the feed's title says they are shown by the kernel's time in their window.
    assert!(
        t.contains("latest spikes, by the kernel's time in each one's window"),
        "{t}"
    );
    // Deciding live, the feed is the decided spikes'.
    let t = text(&render(&model(), 200, 36));
    assert!(
        t.contains("latest spikes") && !t.contains("each one's window"),
        "{t}"
    );
}

/// The real terminal: the culprits table names the injected kworker while it runs; at the end
/// the terminal is back (no alternate screen) and the report is printed.
#[test]
fn under_tmux_the_live_view_names_the_injected_kworker_and_restores_the_terminal() {
    if skip_bpf("under_tmux_the_live_view_names_the_injected_kworker_and_restores_the_terminal")
        || fewer_cpus_than(
            "under_tmux_the_live_view_names_the_injected_kworker_and_restores_the_terminal",
            2,
        )
    {
        return;
    }
    live_view_names_the_injected_kworker(
        "--attribution live",
        "culprits by total",
        "latest spikes",
    );
}

/// The same by default: where every CPU is measured (`--cpus 0,1` on two CPUs) the culprits
/// are decided at the end, and the table meanwhile names the kworker by its kernel time.
#[test]
fn under_tmux_the_default_live_view_names_the_injected_kworker() {
    if skip_bpf("under_tmux_the_default_live_view_names_the_injected_kworker")
        || fewer_cpus_than(
            "under_tmux_the_default_live_view_names_the_injected_kworker",
            2,
        )
    {
        return;
    }
    let (title, feed) = if nproc() == 2 {
        (
            "kernel time on the measured CPUs by total",
            KERNEL_WINDOW_FEED,
        )
    } else {
        ("culprits by total", "latest spikes")
    };
    live_view_names_the_injected_kworker("", title, feed);
}

/// A SCHED_FIFO thread named `js-test-burst` pinned to a CPU, spinning `busy_ns` then
/// sleeping `idle_ns`, again and again until dropped: a spike of known cause on that CPU.
struct Bursts {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Bursts {
    fn start(cpu: usize, busy_ns: u64, idle_ns: u64) -> Bursts {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("js-test-burst".into())
            .spawn(move || {
                pin(0, cpu);
                let p = libc::sched_param { sched_priority: 10 };
                // SAFETY: sets this thread's own policy; 0 means the calling thread.
                let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
                assert_eq!(rc, 0, "SCHED_FIFO needs root");
                while !s.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_nanos(busy_ns) {}
                    std::thread::sleep(Duration::from_nanos(idle_ns));
                }
            })
            .expect("spawn the burst thread");
        Bursts {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Bursts {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The feed's title while the culprits wait for the end.
const KERNEL_WINDOW_FEED: &str = "latest spikes, by the kernel's time in each one's window";

/// Runs `jitterscope --cpus 0,1 {flags}` under tmux while `stat_refresh` is written from CPU
/// 0: the table titled `title` must name the kworker, the feed titled `feed` list spikes, and
/// the run must end cleanly. Deciding at the end, the spikes the feed showed are held against
/// the decisions made at the end (`spikes_shown_live_are_what_the_decisions_found`).
fn live_view_names_the_injected_kworker(flags: &str, title: &str, feed: &str) {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this test (scripts/deps.sh installs it)");
    }
    let _cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // Wide and tall: whole feed lines, and more of them.
    let tmux = Tmux::sized(
        dir.path(),
        &format!(
            "{} --cpus 0,1 {flags} --duration 8s --warmup 300ms --output {}; echo EXITED $?; sleep 60",
            env!("CARGO_BIN_EXE_jitterscope"),
            dir.path().display()
        ),
        (300, 60),
    );
    let mut spikes: Vec<String> = Vec::new();
    let mut keep_spikes = |pane: &str| {
        for l in pane.lines().filter(|l| l.contains(" in transit: ")) {
            let l = l
                .trim_matches(|c: char| c == '│' || c.is_whitespace())
                .to_string();
            if !spikes.contains(&l) {
                spikes.push(l);
            }
        }
    };
    std::thread::sleep(Duration::from_millis(1500));
    pin(0, 0);
    let mut seen = String::new();
    for _ in 0..40 {
        for _ in 0..20 {
            std::fs::write("/proc/sys/vm/stat_refresh", "1").unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let pane = tmux.screen();
        keep_spikes(&pane);
        let shown = pane.contains(feed) && pane.contains(" in transit: ");
        if pane.contains("refresh_vm_stats") && pane.contains(title) && shown {
            seen = pane;
            break;
        }
    }
    // The rest of the run's spikes, until it ends. Meanwhile a SCHED_FIFO thread takes the
    // consumer's CPU 20 ms in every 50: spikes among the worst the run file keeps (some
    // 100 of its 200), with that thread the culprit of nearly all their transit, and one in
    // every few the feed lists at each look — a turn may be 3 s, so they last past the next
    // one — so that the comparison below has spikes to compare whatever else runs on the
    // machine.
    let bursts = Bursts::start(1, 20_000_000, 30_000_000);
    for _ in 0..200 {
        let pane = tmux.screen();
        if !pane.contains(feed) {
            break;
        }
        keep_spikes(&pane);
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(bursts);
    assert!(
        seen.contains("kworker") && seen.contains("refresh_vm_stats"),
        "the table `{title}` never showed refresh_vm_stats with spikes under `{feed}`:\n{}",
        tmux.screen()
    );
    // The transit since the start is shown however the culprits are decided.
    let since = since_start_max(&seen);
    assert!(
        !since.is_empty() && since.iter().all(|v| v != "–"),
        "the consumers' \"since start\" max is not shown ({since:?}):\n{seen}"
    );
    // Wait for the end of the run and the report.
    let end = tmux.wait_for("EXITED");
    assert!(
        end.contains("EXITED 0"),
        "jitterscope did not end cleanly:\n{end}"
    );
    assert!(
        end.contains("== Accumulator Message Transit Latency (ns) =="),
        "no report:\n{end}"
    );
    assert_eq!(
        tmux.var("alternate_on"),
        "0",
        "the terminal was left in the alternate screen"
    );
    if feed == KERNEL_WINDOW_FEED {
        let run = RunFile::read(&run_file_in(dir.path())).unwrap();
        spikes_shown_live_are_what_the_decisions_found(&run, &spikes);
    }
}

/// The "since start" cell of each consumer table's `max` row on a screen
/// (`│max          4.2µs      1.1ms │`).
fn since_start_max(pane: &str) -> Vec<String> {
    pane.lines()
        .filter_map(|l| {
            let i = l.find("│max ")?;
            let cell = l[i + "│max ".len()..].split('│').next()?;
            cell.split_whitespace().nth(1).map(str::to_string)
        })
        .collect()
}

/// Deciding at the end, the feed shows each spike by the kernel time in its window
/// (`+1.551549s  accumulator message 943.8µs in transit: kernel on consumer CPU 1 937.7µs:
/// kdamond.0 931.0µs (99%), …`). Where the decisions at the end give that spike (one of the
/// worst the run file keeps) one culprit of most of its transit on the consumer's side (not
/// the host), the line named it first, with the same time to within a tenth (the same kernel
/// records, read twice) — or, when that culprit's record came after the glance, said that
/// what it lacks was in no kernel record yet. Which other spikes come is the
/// host's doing: the count of each kind is printed; at least one spike must have been
/// compared (the competing task injected makes them).
fn spikes_shown_live_are_what_the_decisions_found(run: &RunFile, lines: &[String]) {
    let from = run.run.record_from_ns;
    let mut pending = 0;
    let mut compared = Vec::new();
    assert!(!lines.is_empty(), "the feed showed no spike");
    for line in lines {
        let at_us = (line
            .trim_start_matches('+')
            .split('s')
            .next()
            .unwrap_or_default())
        .parse::<f64>()
        .map(|s| (s * 1e6).round() as u64)
        .unwrap_or_else(|e| panic!("no time in `{line}`: {e}"));
        let Some(decided) = (run.spikes.iter())
            .find(|s| ((s.publish_ns - from) as f64 / 1e3).round() as u64 == at_us)
        else {
            continue;
        };
        // The host's time is spread over a steal record's span in the live view, and
        // placed by the decisions.
        let top = decided
            .consumer_culprits
            .iter()
            .filter(|c| {
                !matches!(
                    c.class,
                    CulpritClass::Unexplained | CulpritClass::Lost | CulpritClass::Hypervisor
                )
            })
            .max_by_key(|c| c.measured_ns)
            .filter(|c| c.share >= 0.5);
        let Some(top) = top else {
            continue;
        };
        let (_, causes) = line
            .split_once(&format!("kernel on consumer CPU {}", decided.consumer_cpu))
            .and_then(|(_, rest)| rest.split_once(": "))
            .unwrap_or_else(|| panic!("no consumer side in `{line}`"));
        let what = match top.detail.is_empty() {
            true => top.name.clone(),
            false => format!("{} {}", top.name, top.detail),
        };
        // A record may come after the glance that showed the spike (a task run whose
        // closing switch the probes missed comes with the next switch they see): the line
        // then says how much of the wait no record covered yet, and what the culprit lacks
        // live is within that.
        let not_yet = causes
            .split_once("no kernel record (yet) ")
            .map_or(0, |(_, t)| {
                parse_ns(t.split([',', ';', ' ']).next().unwrap_or("0ns"))
            });
        let tolerance = top.measured_ns / 10 + 1_000;
        let shown_ns = |cause: &str| parse_ns(cause.rsplit(' ').next().unwrap_or_default());
        let live_ns = (causes.split(';').next().unwrap_or_default())
            .split(", ")
            .map(|c| c.split(" (").next().unwrap_or_default())
            .find(|c| c.starts_with(&format!("{what} ")))
            .map_or(0, shown_ns);
        let short_ns = top.measured_ns.saturating_sub(live_ns);
        if not_yet > 0 && short_ns > tolerance && short_ns <= not_yet + tolerance {
            pending += 1;
            continue;
        }
        let first = causes.split(" (").next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("{what} ")),
            "the feed named `{first}` first, the decisions {what}:\n{line}"
        );
        assert!(
            live_ns.abs_diff(top.measured_ns) <= tolerance,
            "{what}: {live_ns} ns shown live, {} ns decided:\n{line}",
            top.measured_ns
        );
        compared.push(what);
    }
    let note = format!(
        "{} spikes shown live: {} named as decided ({compared:?}), {pending} whose record came later",
        lines.len(),
        compared.len()
    );
    assert!(
        !compared.is_empty(),
        "no spike shown live was compared with the decisions: {note}\n{}",
        lines.join("\n")
    );
    eprintln!("{note}");
}

#[test]
fn under_tmux_a_watch_shows_its_threads_and_names_the_injected_kworker() {
    if skip_bpf("under_tmux_a_watch_shows_its_threads_and_names_the_injected_kworker")
        || fewer_cpus_than(
            "under_tmux_a_watch_shows_its_threads_and_names_the_injected_kworker",
            2,
        )
    {
        return;
    }
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this test (scripts/deps.sh installs it)");
    }
    let _cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let spinner = Spinner::start(1);
    let tmux = Tmux::session(
        dir.path(),
        &format!(
            "{} watch --tid {} --cpus 1 --duration 6s --output {}; echo EXITED $?; sleep 60",
            env!("CARGO_BIN_EXE_jitterscope"),
            spinner.tid(),
            dir.path().display()
        ),
    );
    std::thread::sleep(Duration::from_millis(1500));
    pin(0, 0);
    let mut seen = String::new();
    let header = format!("jitterscope watch --tid {}  1 thread  ", spinner.tid());
    for _ in 0..40 {
        for _ in 0..20 {
            std::fs::write("/proc/sys/vm/stat_refresh", "1").unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let pane = tmux.screen();
        if pane.contains("refresh_vm_stats") && pane.contains(&header) {
            seen = pane;
            break;
        }
    }
    assert!(
        seen.contains("interrupt") && seen.contains("refresh_vm_stats"),
        "the watch's live view never showed the thread and refresh_vm_stats:\n{seen}"
    );
    let end = tmux.wait_for("EXITED");
    drop(spinner);
    assert!(
        end.contains("EXITED 0"),
        "the watch did not end cleanly:\n{end}"
    );
    assert!(end.contains("== Watch of `--tid"), "no report:\n{end}");
    assert_eq!(
        tmux.var("alternate_on"),
        "0",
        "the terminal was left in the alternate screen"
    );
}

/// SIGTERM while the live view is up: the terminal comes back (no alternate screen, cooked
/// mode), the report is printed, the files are written, and the exit code is 128 + 15.
#[test]
fn sigterm_during_the_live_view_restores_the_terminal_and_writes_the_files() {
    let Some((_cpus, _dir, runs, tmux)) = long_live_view(
        "sigterm_during_the_live_view_restores_the_terminal_and_writes_the_files",
        "stty -a; ",
    ) else {
        return;
    };
    let shell: u32 = tmux.var("pane_pid").parse().unwrap();
    let alternate = || tmux.var("alternate_on");
    let mut js_pid = None;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .unwrap_or_default();
        js_pid = children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<i32>().ok());
        if js_pid.is_some() && alternate() == "1" {
            break;
        }
    }
    let js_pid = js_pid.expect("jitterscope never started under tmux");
    assert_eq!(alternate(), "1", "the live view never took the screen");
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: signalling the jitterscope this test started, by its pid.
    unsafe { libc::kill(js_pid, libc::SIGTERM) };
    // `stty -a` prints "speed" first: wait until it has run too.
    let end = tmux.wait_for("speed");
    assert!(end.contains("EXITED 143"), "{end}");
    assert!(end.contains("SIGTERM: stopping early"), "{end}");
    assert!(
        end.contains("== Accumulator Message Transit Latency (ns) =="),
        "{end}"
    );
    assert_eq!(
        alternate(),
        "0",
        "the terminal was left in the alternate screen"
    );
    // Cooked mode again: canonical input and echo on (raw mode clears both).
    let stty = end.split("EXITED").nth(1).unwrap_or("");
    assert!(
        stty.contains(" icanon") && stty.contains(" echo ") && !stty.contains("-icanon"),
        "the terminal was left in raw mode:\n{stty}"
    );
    let run = jitterscope::report::runfile::RunFile::read(&run_file_in(&runs)).unwrap();
    assert_eq!(run.run.ended, jitterscope::model::Ended::Interrupted);
}

/// Keys reach the live view from the terminal: `?` shows the help over it and `q` ends the
/// run early, with the report and the run file written (the view looks for a key with a
/// `poll(2)` of the terminal's input, and crossterm reads it only then).
#[test]
fn under_tmux_keys_show_the_help_and_end_the_run() {
    let Some((_cpus, _dir, runs, tmux)) =
        long_live_view("under_tmux_keys_show_the_help_and_end_the_run", "")
    else {
        return;
    };
    let help = "this help";
    let shown = |needle: &str| {
        (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            tmux.screen().contains(needle)
        })
    };
    assert!(
        shown("q quit"),
        "the live view never showed its footer:\n{}",
        tmux.screen()
    );
    assert!(!tmux.screen().contains(help), "the help before `?`");
    let started = Instant::now();
    tmux.run(&["send-keys", "-t", "js", "?"]);
    assert!(shown(help), "`?` did not show the help:\n{}", tmux.screen());
    tmux.run(&["send-keys", "-t", "js", "q"]);
    let end = tmux.wait_for("EXITED");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run went on after `q`"
    );
    assert!(end.contains("stopped from the live view"), "{end}");
    assert!(
        end.contains("== Accumulator Message Transit Latency (ns) =="),
        "no report:\n{end}"
    );
    let run = jitterscope::report::runfile::RunFile::read(&run_file_in(&runs)).unwrap();
    assert_eq!(run.run.ended, jitterscope::model::Ended::Interrupted);
}

/// `jitterscope --cpus 0,1 --duration 60s` under tmux in a 150×45 session, its files in
/// `runs` of a temporary directory, the CPUs held; then `EXITED <status>`, the shell's `after`
/// and a wait. None (the test skipped) without BPF or two CPUs. Bound in this order, the
/// session goes first and the CPUs last.
fn long_live_view(
    test: &str,
    after: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    tempfile::TempDir,
    std::path::PathBuf,
    Tmux,
)> {
    if skip_bpf(test) || fewer_cpus_than(test, 2) {
        return None;
    }
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is needed for this test (scripts/deps.sh installs it)");
    }
    let cpus = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let cmd = format!(
        "{} --cpus 0,1 --duration 60s --warmup 200ms --output {}; echo EXITED $?; {after}sleep 60",
        env!("CARGO_BIN_EXE_jitterscope"),
        runs.display()
    );
    let tmux = Tmux::session(dir.path(), &cmd);
    Some((cpus, dir, runs, tmux))
}

/// A private tmux server (its own socket), killed when the test ends, also on failure.
struct Tmux(std::path::PathBuf);

impl Tmux {
    /// A 150×45 session `js` running `cmd`, on a socket in `dir`.
    fn session(dir: &std::path::Path, cmd: &str) -> Tmux {
        Tmux::sized(dir, cmd, (150, 45))
    }

    /// A session `js` of `width`×`height` running `cmd`, on a socket in `dir`.
    fn sized(dir: &std::path::Path, cmd: &str, (width, height): (u16, u16)) -> Tmux {
        let tmux = Tmux(dir.join("tmux.sock"));
        let (w, h) = (width.to_string(), height.to_string());
        let out = tmux.run(&["new-session", "-d", "-s", "js", "-x", &w, "-y", &h, cmd]);
        assert!(out.status.success(), "{out:?}");
        tmux
    }

    /// The visible screen.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "js"]).stdout).to_string()
    }

    /// The screen with its history, once it shows `needle` (or after 20 s).
    fn wait_for(&self, needle: &str) -> String {
        let mut text = String::new();
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(200));
            text = String::from_utf8_lossy(
                &self
                    .run(&["capture-pane", "-p", "-S", "-300", "-t", "js"])
                    .stdout,
            )
            .to_string();
            if text.contains(needle) {
                break;
            }
        }
        text
    }

    /// A tmux format variable of the pane (`alternate_on`, `pane_pid`).
    fn var(&self, name: &str) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["display-message", "-p", "-t", "js", &format!("#{{{name}}}")])
                .stdout,
        )
        .trim()
        .to_string()
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.0)
            .args(args)
            .output()
            .expect("tmux")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
