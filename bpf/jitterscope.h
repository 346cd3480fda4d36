/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The ABI shared by the BPF programs and user space: types and constants, nothing else.
 * Rust uses the skeleton's generated copies of these types (size-asserted), never its own. */
#ifndef JITTERSCOPE_H
#define JITTERSCOPE_H

#define JS_MAX_CPUS 1024
#define JS_COMM_LEN 16
#define JS_NAME_LEN 32
#define JS_TID_SLOTS 4096 /* workload thread table: 2-way set-associative on tid */
#define JS_WATCH_MAX 16384 /* watched threads at once (watch mode) */
#define JS_CGROUP_LEVEL_MAX 64 /* deepest watched cgroup (levels below the v2 root) */
#define JS_CGROUP_THREADS_MAX 256 /* threads of a process moved into a watched cgroup */

/* Every ring-buffer record starts with its kind. */
enum js_kind {
	JS_REC_INTERRUPTION = 1, /* a completed episode on a measured CPU */
	JS_REC_CAUSE = 2,        /* work queued or an IPI sent to a measured CPU */
	JS_REC_LOST = 3,         /* records of this CPU were lost in [start_ns, end_ns] */
	JS_REC_STEAL = 4,        /* the CPU's KVM steal clock grew by `id` ns in [start_ns, end_ns] */
	/* watch mode: a watched thread (`pid`) wanted a CPU it did not have in [start_ns,
	 * end_ns], until it ran on `cpu`; `class_` is enum js_wait, `aux` the CPU where the wait
	 * began, `detail` when it last migrated while waiting (0: never) */
	JS_REC_WAIT = 5,
	JS_REC_THREAD_NEW = 6,   /* watch mode: thread `pid` (`aux`: its id in jitterscope's PID
				  * namespace; `id`: its kernel tgid << 32 | its process's id in
				  * that namespace) is watched from end_ns: created by `detail`
				  * (0: moved into the watched cgroup), name in `name` */
	JS_REC_THREAD_EXIT = 7,  /* watch mode: watched thread `pid` exited at end_ns (`name`,
				  * `id` as above); its schedstat then: run time (ns) in
				  * `detail`, wait for a CPU (ns) in `flags` | `victim` << 32 */
	/* watch mode: watched thread `detail` (its kernel tid until now) exec'd from beside its
	 * process's main thread and is thread `pid` from end_ns: the kernel gave it the main
	 * thread's id (which exited first, with a JS_REC_THREAD_EXIT of that id). `aux`, `id` and
	 * `name` as for JS_REC_THREAD_NEW: its new ids and the new program's comm */
	JS_REC_THREAD_EXEC = 8,
};

/* Interruption classes; user space maps them to the stable culprit class strings. */
enum js_class {
	JS_CLASS_NONE = 0,
	JS_CLASS_TASK = 1,
	JS_CLASS_KWORKER = 2,
	JS_CLASS_KTHREAD = 3,
	JS_CLASS_SELF = 4,
	JS_CLASS_IRQ = 5,
	JS_CLASS_SOFTIRQ = 6,
	JS_CLASS_TIMER_TICK = 7,
	JS_CLASS_IPI = 8,
	JS_CLASS_NMI = 9,
	JS_CLASS_FREQ = 10,
	JS_CLASS_HRTIMER = 11, /* one expired hrtimer's callback (id: its address) */
	JS_CLASS_FAULT = 12,   /* a page fault of a watched thread (flags: JS_FAULT_*) */
	/* the CPU idled while a workload (or watched) thread was runnable on it: RT throttling
	 * or a cgroup CPU quota held the thread off (pid, name: the thread; aux: its policy) */
	JS_CLASS_THROTTLED = 13,
};

/* Why a watched thread waited (JS_REC_WAIT `class_`). */
enum js_wait {
	JS_WAIT_PREEMPTED = 1, /* switched out while runnable */
	JS_WAIT_WAKEUP = 2,    /* woken, not yet on a CPU */
	JS_WAIT_NEW = 3,       /* created, not yet on a CPU */
};

/* A watched thread as the programs track it (watch mode): the `watched` hash map's value,
 * keyed by the kernel's tid. User space inserts threads with everything 0 (state unknown). */
enum js_thread_state {
	JS_T_UNKNOWN = 0, /* not seen switching since it was added */
	JS_T_RUNNING = 1,
	JS_T_WAITING = 2, /* runnable, on `cpu`'s runqueue */
	JS_T_BLOCKED = 3,
};

struct js_watched {
	__u64 wait_start;  /* when it began to wait (JS_T_WAITING) */
	__u64 migrated_at; /* last migration while waiting, 0 if none */
	__u64 fault_start; /* a page fault in progress, 0 if none */
	__u32 wait_cpu;    /* where the wait began */
	__u32 cpu;         /* where it is counted in `interest` (running or waiting) */
	__u16 state;       /* enum js_thread_state */
	__u16 reason;      /* enum js_wait */
	__u32 pad;
};

_Static_assert(sizeof(struct js_watched) == 40, "js_watched ABI");

/* One task as the `js_tasks` iterator reports it: ids in the kernel's numbering and in
 * jitterscope's PID namespace. */
struct js_task_row {
	__u32 kernel_tid;
	__u32 kernel_tgid;
	__u32 ns_tid;
	__u32 ns_tgid;
	char comm[JS_COMM_LEN];
};

_Static_assert(sizeof(struct js_task_row) == 32, "js_task_row ABI");

/* x86 system vectors (JS_CLASS_IPI / JS_CLASS_TIMER_TICK `id`). */
enum js_vector {
	JS_VEC_LOCAL_TIMER = 1,
	JS_VEC_RESCHEDULE = 2,
	JS_VEC_CALL_FUNCTION = 3,
	JS_VEC_CALL_FUNCTION_SINGLE = 4,
	JS_VEC_IRQ_WORK = 5,
	JS_VEC_THERMAL = 6,
	JS_VEC_X86_PLATFORM_IPI = 7,
	JS_VEC_SPURIOUS = 8,
	JS_VEC_ERROR = 9,
};

/* JS_REC_CAUSE `cause` values. */
enum js_cause {
	JS_CAUSE_QUEUE_WORK = 1,
	JS_CAUSE_IPI = 2,
};

/* js_whoami's question (its args[0]): the caller's thread id or process id. */
enum js_whoami {
	JS_WHOAMI_TID = 0,
	JS_WHOAMI_TGID = 1,
	JS_WHOAMI_NS = 2, /* records the caller's PID namespace for js_tasks; returns its level */
};

/* Flags of a task episode. */
#define JS_F_PREEMPTED_WORKLOAD 1 /* it replaced a workload thread that was still runnable */
#define JS_F_BLOCKED_WORKLOAD 2   /* it replaced a workload thread that had blocked */
#define JS_F_WORK_UNREAD 4        /* kworker: its current work function could not be read */
#define JS_F_SENDER_SELF 8        /* cause: sent by one of jitterscope's own threads */
#define JS_F_END_UNSEEN 16        /* task episode: the switch that ended it was not seen (the
				   * next switch's `prev` was another task): it ended by end_ns */
/* Flags of a cause: the context it was sent from on the sender's CPU (its preempt count), none
 * of them for a task's own doing. What was open there, when that CPU is measured, is in the
 * cause's `parent` (its class) and `flags >> 16` (its number + 1: softirq vector, IRQ number,
 * enum js_vector; 0 when not known). */
#define JS_F_FROM_SOFTIRQ 32      /* cause: sent while serving a softirq (delayed work's timer) */
#define JS_F_FROM_HARDIRQ 64      /* cause: sent from a hard interrupt handler */
#define JS_F_FROM_NMI 128         /* cause: sent from an NMI */

/* Flags of a JS_CLASS_FAULT record. */
#define JS_FAULT_MAJOR 1 /* the fault needed I/O (VM_FAULT_MAJOR) */
#define JS_FAULT_ERROR 2 /* the fault failed (SIGSEGV/SIGBUS/OOM follows) */

/* Flags of a JS_CLASS_HRTIMER record. */
#define JS_HRT_SOFT 1    /* ran from the HRTIMER softirq, not from the timer interrupt */
#define JS_HRT_SLEEPER 2 /* hrtimer_wakeup of a sleeping task: pid and name are the sleeper's */
#define JS_HRT_SELF 4    /* that sleeper is one of jitterscope's own threads */

struct js_record {
	__u32 kind;         /* enum js_kind */
	__u32 cpu;          /* the measured CPU it happened on (target CPU for causes) */
	__u64 start_ns;     /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u64 end_ns;
	__u64 id;           /* irq nr, softirq vector, js_vector, new kHz, lost count, work func,
			     * hrtimer callback, steal growth (ns) */
	__u64 detail;       /* kworker: work function address; freq: old kHz; cause: callsite;
			     * steal: the clock's new absolute value (ns) */
	__u32 pid;          /* task episode: its pid; cause: sender pid; hrtimer: sleeper pid */
	__u16 class_;       /* enum js_class (or enum js_cause for causes) */
	__u16 parent;       /* enum js_class of the enclosing episode, JS_CLASS_NONE if none */
	__u32 flags;        /* JS_F_*, kworker: items run << 16; JS_HRT_*; local timer vector:
			     * number of hrtimer callbacks it ran */
	__u32 aux;          /* task: scheduling policy; cause: sender CPU */
	char name[JS_NAME_LEN]; /* comm (hrtimer: the sleeper's), or irq action name */
	__u32 victim;       /* watch mode: the watched thread on the CPU when this happened (0:
			     * none) — an on-CPU interruption of that thread */
	__u32 commit;       /* ring slot: set to 1 last by its writer once every other field is
			     * written, cleared by the reader before it hands the slot back */
};

_Static_assert(sizeof(struct js_record) == 96, "js_record ABI");

/* Per-CPU counters kept by the programs (a .bss array indexed by CPU), one cache line each:
 * every record increments its CPU's count, and CPUs sharing a line would take it from each
 * other at every event.
 *
 * The line also holds the CPU's record ring: `ring_mask + 1` records (a power of two) of the
 * `rings` array map (mmapped by user space) from entry `ring_base`, written only by programs
 * running on that CPU. User space lays the rings out before load (a measured CPU's ring is
 * larger than those of the CPUs that only send it work); a CPU without one has `ring_mask` 0.
 * Programs on one CPU can nest (an IRQ's inside a softirq's, an NMI's inside anything), so a
 * writer takes the slot at `head` with a compare-and-swap, fills it and sets its `commit`
 * last; the reader takes committed slots in order from `tail`, clears `commit` and moves
 * `tail` on. A writer finding the ring full (`head - tail > ring_mask`) drops its record and
 * counts it. x86-64 only: the commit relies on its stores staying in order. */
struct js_cpu_counters {
	__u64 events;   /* records submitted for this CPU */
	__u64 rb_drops; /* records of this CPU dropped because a ring was full */
	__u64 head;     /* this CPU's ring: slots taken by writers (a count, never wraps) */
	__u64 tail;     /* this CPU's ring: slots handed back by the reader */
	__u32 ring_base; /* this CPU's ring: its first entry in `rings` */
	__u32 ring_mask; /* this CPU's ring: its slots less one (0: no ring) */
	/* Start of this CPU's lost window not yet reported in a record (0: none); see
	 * lost_pending for the drops noted from elsewhere. Read by user space at each drain:
	 * a window still open there may hold records of stalls it is about to decide. */
	__u64 lost_open;
	__u64 pad[2];
};

_Static_assert(sizeof(struct js_cpu_counters) == 64, "js_cpu_counters ABI");

/* The scheduler tick's stops on one measured CPU (`timer:tick_stop`), a .bss array indexed by
 * CPU, a cache line each, written only by programs on that CPU. `stopped` counts events with
 * success=1 (the tick went from running to stopped: idle entry, or a nohz_full CPU with one
 * task); `kept` those with success=0 (a nohz_full CPU kept it), by the dependency the kernel
 * gave — a TICK_DEP_MASK_* value, one bit (include/linux/tick.h): slot n for bit n below
 * JS_TICK_DEP_SLOTS - 1, the last slot for any other value. */
#define JS_TICK_DEP_SLOTS 7

struct js_tick_stops {
	__u64 stopped;
	__u64 kept[JS_TICK_DEP_SLOTS];
};

_Static_assert(sizeof(struct js_tick_stops) == 64, "js_tick_stops ABI");

#endif /* JITTERSCOPE_H */
