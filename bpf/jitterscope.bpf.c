// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* jitterscope's kernel half: every source of interruption on the measured CPUs, turned
 * into completed episode records in the kernel.
 *
 * Rules that keep the tracer from becoming the noise it measures:
 *  - every program returns before touching a map or the record rings when the event is not
 *    about a measured CPU (rodata mask, set before load);
 *  - records go to per-CPU rings of plain memory (see struct js_cpu_counters): no helper
 *    call, no lock and no wake-up; user space drains them on a timer from a housekeeping
 *    CPU, so no irq_work IPI is ever sent to a measured CPU.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "jitterscope.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define PF_WQ_WORKER 0x00000020
#define PF_KTHREAD 0x00200000
#define JS_E2BIG 7 /* errno: a full hash map's answer to a new key */

/* Set by user space before load. */
const volatile __u64 target_cpus[JS_MAX_CPUS / 64] = {};

/* jitterscope's own process id in the kernel's numbering (what task->tgid holds), written by
 * user space after load: inside a PID namespace getpid() is another number, so it is learnt
 * from js_whoami, which needs the loaded object. 0 until then. */
__u32 self_tgid = 0;
/* The address of hrtimer_wakeup (from /proc/kallsyms; 0 when hidden): its timers are a
 * sleeping task's, whose name is worth reading. */
const volatile __u64 hrtimer_wakeup_fn = 0;
/* True when this kernel has the per-CPU KVM steal clock (`steal_time`: ns the host kept this
 * vCPU runnable but off its physical CPU) and a KVM host keeps it up to date; false leaves
 * the read out of every program. It cannot be named as a __ksym (no data symbols in kallsyms
 * without CONFIG_KALLSYMS_ALL): it is found from the CPU's runqueue, `steal_time_from_rq`
 * bytes away on every CPU (per-CPU section offsets from the kernel's BTF). */
const volatile bool steal_clock = false;
const volatile __s64 steal_time_from_rq = 0;
/* The per-CPU preempt count (`__preempt_count`, x86), reached from the runqueue the same way
 * as the steal clock; false when the kernel's BTF does not give its offset. Its hard IRQ, NMI
 * and serving-softirq bits tell whether a cause was sent by the current task or by an
 * interrupt that only happened to interrupt it. */
const volatile bool preempt_count_known = false;
const volatile __s64 preempt_count_from_rq = 0;

/* Watch mode (`jitterscope watch`): the interruptions of the threads in `watched`, not of a
 * workload. Set before load; false leaves every watch path out of the programs. */
const volatile bool watch_mode = false;
/* Watch mode, written by user space: new threads of this process (kernel tgid) are watched
 * from their creation (0: none are added); `watch_gen` changes whenever user space changed
 * `watched`, so per-CPU caches of "is the current task watched" are redone. */
__u32 watch_tgid = 0;
__u32 watch_gen = 0;
/* Watch mode, read by user space at the end: threads the programs would have watched from
 * their creation or their move into the watched cgroup, left out because `watched` was full
 * (its size is set from the target at the start). */
__u64 watch_map_full = 0;
/* Watch mode, written by user space: when every watched thread belongs to this process
 * (kernel tgid; `--pid`, a command), a task of another process is not looked up at all. */
__u32 watch_only_tgid = 0;
/* jitterscope's PID namespace (its level and address, from js_whoami): js_tasks and new
 * threads report ids in it, the ones the user sees. */
__u32 watch_ns_level = 0;
__u64 watch_ns = 0;
/* Watch mode, written by user space (`--cgroup`, `--container`): threads whose default
 * hierarchy (v2) cgroup is this one (its kernfs id) or one of its descendants are watched
 * from their creation or their move into it (0: none are added this way); its depth below the
 * v2 root is `watch_cgroup_level` (at most JS_CGROUP_LEVEL_MAX). */
__u64 watch_cgroup = 0;
__u32 watch_cgroup_level = 0;

/* Dummy instances so the skeleton emits the Rust types. */
struct js_record _js_record = {};
struct js_cpu_counters _js_cpu_counters = {};
struct js_watched _js_watched = {};
struct js_task_row _js_task_row = {};
struct js_tick_stops _js_tick_stops = {};

/* Read by user space through the mmapped .bss; a line per CPU (see the type). */
struct js_cpu_counters counters[JS_MAX_CPUS] __attribute__((aligned(64))) = {};

/* The per-CPU record rings (see struct js_cpu_counters), laid out by user space before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* resized by user space before load */
	__type(key, __u32);
	__type(value, struct js_record);
} rings SEC(".maps");

/* Watch mode: the watched threads by kernel tid, with what the programs track of each. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, JS_WATCH_MAX);
	__type(key, __u32);
	__type(value, struct js_watched);
} watched SEC(".maps");

/* Watch mode: how many watched threads run or wait on each CPU, and when that last fell to
 * 0. Records of a CPU are kept while some watched thread wants it (or began before it last
 * stopped wanting it): the filter before a ring-buffer reserve. Updated from any CPU with
 * atomics (wake-ups and migrations touch another CPU's count). */
__u32 interest[JS_MAX_CPUS] = {};
__u64 interest_end[JS_MAX_CPUS] = {};

/* Workload thread ids: their runs are what is measured, not interruptions. A 2-way
 * set-associative table in .bss, written by user space: two plain loads per check instead of
 * a hash-map lookup on every context switch. */
__u32 workload_tids[JS_TID_SLOTS] = {};

static __always_inline bool is_workload(__u32 pid)
{
	__u32 set = (pid & (JS_TID_SLOTS / 2 - 1)) * 2;

	if (pid == 0)
		return false;
	return workload_tids[set] == pid || workload_tids[set + 1] == pid;
}

/* One expired hrtimer's callback, running now. */
struct hrtimer_slot {
	__u64 start;
	__u64 timer; /* its address, to pair exit with entry */
	__u64 func;
	__u32 pid;   /* the sleeper's, for hrtimer_wakeup */
	__u16 parent;
	__u16 flags; /* JS_HRT_* */
	char comm[JS_COMM_LEN];
};

/* Per-CPU episode state; each level of nesting has its own slot. */
struct cpu_state {
	/* task level: a non-idle, non-workload task running on the CPU */
	__u64 task_start;
	__u64 work_func;   /* work item running now (kworker) */
	__u64 work_start;
	__u64 best_func;   /* first work item of this run: what woke the worker */
	__u32 task_pid;
	__u32 task_policy;
	__u32 task_flags;
	__u32 works;
	__u16 task_class;
	__u16 pad0;
	char task_comm[JS_COMM_LEN];
	/* softirq level */
	__u64 softirq_start;
	__u32 softirq_vec;
	__u16 softirq_parent;
	__u16 pad1;
	/* hard irq level; the action's name is read again only when another action runs */
	__u64 irq_start;
	__u32 irq_nr;
	__u16 irq_parent;
	__u16 pad2;
	__u64 irq_action;   /* the action `irq_name` was read from, and its name pointer */
	__u64 irq_name_ptr;
	char irq_name[JS_NAME_LEN];
	/* system vector level (timer tick, IPIs) */
	__u64 vec_start;
	__u32 vec_kind;
	__u16 vec_parent;
	__u16 vec_callbacks; /* hrtimer callbacks run inside this vector */
	/* hrtimer level: [0] from the timer interrupt, [1] from the HRTIMER softirq, which the
	 * timer interrupt can interrupt to run hard hrtimers of its own */
	struct hrtimer_slot hrt[2];
	/* lost records not yet reported */
	__u64 lost_since;
	__u64 lost_count;
	__u64 lost_flushed_at; /* when drops of the lock-free slot were last taken over */
	/* KVM steal clock: its address on this CPU, the value and time of the last read */
	__u64 steal_addr;
	__u64 steal_last;
	__u64 steal_at;
	/* watch mode: the task last seen current here and whether it is watched (its tid, or
	 * 0), valid while `cur_gen` is `watch_gen` */
	__u32 cur_pid;
	__u32 cur_victim;
	__u32 cur_gen;
	__u32 pad3;
	/* a workload (or watched) thread switched out here while runnable, until it runs here
	 * again: `held_task` its task_struct (for probe reads only), and `held_start` the start
	 * of an idle stretch of this CPU while it is held (0: none open) */
	__u64 held_task;
	__u64 held_start;
	__u32 held_pid;
	__u32 held_policy;
	char held_comm[JS_COMM_LEN];
};

/* Drops noted where the per-CPU state cannot be used: in NMI context, or from another CPU
 * (causes). Updated with atomics only; taken over into the CPU's state by the next record
 * reserved there in normal context, so every dropped record opens a lost window. */
struct lost_slot {
	__u64 since; /* time of the first drop not yet taken over, 0 when none */
	__u64 count;
};

struct lost_slot lost_pending[JS_MAX_CPUS] = {};

/* The steal clock's value at its last change seen on each CPU (ns), read by user space: it
 * says the clock was found and lets it be checked against /proc/stat. */
__u64 steal_read[JS_MAX_CPUS] = {};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} state SEC(".maps");

/* Last known frequency per CPU (kHz), for old → new. */
__u32 cpu_khz[JS_MAX_CPUS] = {};

static __always_inline bool is_target(__u32 cpu)
{
	__u32 word = cpu / 64;

	/* Bounds-check the very register used as the index: tracepoint args arrive as u64 and
	 * the compiler may otherwise check a truncated copy and index with the original. */
	barrier_var(word);
	if (word >= JS_MAX_CPUS / 64)
		return false;
	return target_cpus[word] & (1ULL << (cpu % 64));
}

static __always_inline struct cpu_state *my_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&state, &zero);
}

/* The innermost episode running now: what a new episode nests in. */
static __always_inline __u16 innermost(struct cpu_state *st)
{
	if (st->hrt[0].start)
		return JS_CLASS_HRTIMER;
	if (st->vec_start)
		return st->vec_kind == JS_VEC_LOCAL_TIMER ? JS_CLASS_TIMER_TICK : JS_CLASS_IPI;
	if (st->irq_start)
		return JS_CLASS_IRQ;
	if (st->hrt[1].start)
		return JS_CLASS_HRTIMER;
	if (st->softirq_start)
		return JS_CLASS_SOFTIRQ;
	if (st->task_start)
		return st->task_class;
	return JS_CLASS_NONE;
}

/* Interrupt handlers do not nest on x86-64 (each runs with interrupts off) and softirqs run
 * after them, one at a time: when one begins, an episode of its level or above still open on
 * the CPU is one whose end was missed — its exit program attached a moment after its entry
 * program, while the handler ran — and is forgotten rather than taken as the new episode's
 * parent (it would stay the parent of every later one until its level ran again). The hard
 * level: the timer interrupt and IPIs, device IRQs, the hrtimers the timer interrupt runs. */
static __always_inline void forget_open_hard(struct cpu_state *st)
{
	if (st->vec_start)
		st->vec_start = 0;
	if (st->irq_start)
		st->irq_start = 0;
	if (st->hrt[0].start)
		st->hrt[0].start = 0;
}

/* The softirq level (a softirq, the hrtimers its HRTIMER softirq runs) and the hard one. */
static __always_inline void forget_open_soft(struct cpu_state *st)
{
	forget_open_hard(st);
	if (st->softirq_start)
		st->softirq_start = 0;
	if (st->hrt[1].start)
		st->hrt[1].start = 0;
}

/* A plain increment: a CPU's slot is written by that CPU, except for the rare cause records
 * sent from elsewhere (an approximate count is fine; drops below are counted atomically). */
static __always_inline void count_event(__u32 cpu)
{
	if (cpu < JS_MAX_CPUS)
		counters[cpu & (JS_MAX_CPUS - 1)].events++;
}

/* A drop without usable per-CPU state (NMI, another CPU): noted in the CPU's lock-free slot.
 * Only for measured CPUs: nothing would ever take over another CPU's slot. */
static __always_inline void note_lost_atomic(__u32 cpu, __u64 now)
{
	struct lost_slot *slot;

	if (!is_target(cpu) || cpu >= JS_MAX_CPUS)
		return;
	slot = &lost_pending[cpu & (JS_MAX_CPUS - 1)];
	/* Time first, then count: whoever takes the count over finds a time with it (or, if it
	 * raced between the two, the time of the previous take-over, see take_over_lost). */
	__sync_val_compare_and_swap(&slot->since, 0, now);
	__sync_fetch_and_add(&slot->count, 1);
}

/* Moves drops noted in the CPU's lock-free slot into its lost window, reported below. Out
 * of line (a BPF subprogram), like every path taken only when records are lost: the code
 * every event runs stays a few cache lines, which matters on the timer interrupt, where a
 * program starts cold. */
static __noinline void take_over_lost_slot(__u32 cpu, struct cpu_state *st, __u64 now)
{
	struct lost_slot *slot;
	__u64 count, since;

	if (cpu >= JS_MAX_CPUS)
		return;
	slot = &lost_pending[cpu & (JS_MAX_CPUS - 1)];
	/* The window stays visible to user space throughout: in `lost_open` before it leaves
	 * the slot, until its record is committed (reserve). */
	since = *(volatile __u64 *)&slot->since;
	if (since && (!st->lost_count || since < st->lost_since))
		*(volatile __u64 *)&counters[cpu & (JS_MAX_CPUS - 1)].lost_open = since;
	barrier();
	count = __sync_lock_test_and_set(&slot->count, 0);
	if (!count) {
		/* A program nested in this one took the slot over (and may have reported it):
		 * `lost_open` says again what this CPU's state holds. */
		*(volatile __u64 *)&counters[cpu & (JS_MAX_CPUS - 1)].lost_open =
			st->lost_count ? st->lost_since : 0;
		return;
	}
	since = __sync_lock_test_and_set(&slot->since, 0);
	/* A drop counted after its time was taken by the previous take-over: it happened
	 * after that take-over began. */
	if (!since)
		since = st->lost_flushed_at ? st->lost_flushed_at : now;
	if (!st->lost_count || since < st->lost_since)
		st->lost_since = since;
	st->lost_count += count;
	st->lost_flushed_at = now;
	*(volatile __u64 *)&counters[cpu & (JS_MAX_CPUS - 1)].lost_open = st->lost_since;
}

static __always_inline void take_over_lost(__u32 cpu, struct cpu_state *st, __u64 now)
{
	if (cpu >= JS_MAX_CPUS || !lost_pending[cpu & (JS_MAX_CPUS - 1)].count)
		return;
	take_over_lost_slot(cpu, st, now);
}

/* Watch mode: `t`'s entry in `watched`, or NULL; no lookup for another process's task when all
 * watched threads are one process's. */
static __always_inline struct js_watched *watched_task(struct task_struct *t)
{
	__u32 tid = t->pid, only = watch_only_tgid;

	if (!tid || (only && t->tgid != only))
		return NULL;
	return bpf_map_lookup_elem(&watched, &tid);
}

/* Watch mode: the watched thread current on this CPU (its tid), or 0. Cached per CPU: a
 * hash lookup only when the current task changed since the last look (or `watched` did). */
static __always_inline __u32 current_victim(struct cpu_state *st)
{
	__u32 pid, gen, only = watch_only_tgid;
	__u64 id;

	if (!watch_mode)
		return 0;
	id = bpf_get_current_pid_tgid();
	pid = (__u32)id;
	gen = watch_gen;
	if (pid != st->cur_pid || gen != st->cur_gen) {
		st->cur_pid = pid;
		st->cur_gen = gen;
		st->cur_victim = pid && (!only || id >> 32 == only) &&
						 bpf_map_lookup_elem(&watched, &pid) ?
					 pid :
					 0;
	}
	return st->cur_victim;
}

/* Watch mode: whether a record of `cpu` that began at `start` can matter to a watched thread:
 * one is current (`victim`), runs or waits there now, or did when the record began. */
static __always_inline bool watch_keeps(__u32 cpu, __u32 victim, __u64 start)
{
	if (!watch_mode || victim)
		return true;
	/* Check the register used as the index (see is_target). */
	barrier_var(cpu);
	if (cpu >= JS_MAX_CPUS)
		return false;
	/* The mask keeps the verifier sure of the bound whatever register it indexes with. */
	cpu &= JS_MAX_CPUS - 1;
	return interest[cpu] || interest_end[cpu] >= start;
}

/* A slot of this CPU's ring (see struct js_cpu_counters), or NULL when it is full. A nested
 * program taking a slot between the read of `head` and the swap makes the swap fail: tried
 * again, a few times at most. */
static __always_inline struct js_record *ring_take(void)
{
	__u32 me = bpf_get_smp_processor_id(), key, mask;
	struct js_cpu_counters *c;
	struct js_record *r;
	__u64 h;

	if (me >= JS_MAX_CPUS)
		return NULL;
	c = &counters[me & (JS_MAX_CPUS - 1)];
	mask = c->ring_mask;
	if (!mask)
		return NULL;
	for (int i = 0; i < 4; i++) {
		h = *(volatile __u64 *)&c->head;
		if (h - *(volatile __u64 *)&c->tail > mask)
			return NULL;
		key = c->ring_base + ((__u32)h & mask);
		r = bpf_map_lookup_elem(&rings, &key);
		if (!r)
			return NULL;
		if (__sync_val_compare_and_swap(&c->head, h, h + 1) == h)
			return r;
	}
	return NULL;
}

/* Hands a filled slot to the reader: every field is written before `commit` (a compiler
 * barrier; x86 keeps stores in order). */
static __always_inline void ring_commit(struct js_record *r)
{
	barrier();
	*(volatile __u32 *)&r->commit = 1;
}

/* The record of a window of lost records, once a slot is free again (out of line, see
 * take_over_lost_slot). */
static __noinline void report_lost_window(__u32 cpu, struct cpu_state *st, __u64 now)
{
	struct js_record *r = ring_take();

	if (!r)
		return;
	__builtin_memset(r, 0, sizeof(*r));
	r->kind = JS_REC_LOST;
	r->cpu = cpu;
	r->start_ns = st->lost_since;
	r->end_ns = now;
	r->id = st->lost_count;
	ring_commit(r);
	st->lost_count = 0;
	/* After the commit: a reader that finds the window closed finds its record. */
	barrier();
	if (cpu < JS_MAX_CPUS)
		*(volatile __u64 *)&counters[cpu & (JS_MAX_CPUS - 1)].lost_open = 0;
}

/* A record of this CPU that found the ring full: counted, and its window opened or widened
 * (out of line, see take_over_lost_slot). */
static __noinline void note_lost_here(__u32 cpu, struct cpu_state *st, __u64 now)
{
	if (cpu < JS_MAX_CPUS)
		__sync_fetch_and_add(&counters[cpu & (JS_MAX_CPUS - 1)].rb_drops, 1);
	if (!st->lost_count) {
		st->lost_since = now;
		if (cpu < JS_MAX_CPUS)
			*(volatile __u64 *)&counters[cpu & (JS_MAX_CPUS - 1)].lost_open = now;
	}
	st->lost_count++;
}

/* Reserves a record for `cpu`; a failure is counted, and the window of lost records is
 * reported with the next record that fits, so user space can mark affected stalls. `st` is
 * NULL where the per-CPU state must not be written (NMI, another CPU's records). In watch
 * mode a record that no watched thread can care about (see watch_keeps) is not reserved.
 * `victim` is the watched thread current on the CPU (watch mode), 0 if none. */
static __always_inline struct js_record *reserve(__u32 cpu, struct cpu_state *st, __u64 start,
						 __u64 now, __u32 victim)
{
	struct js_record *r;

	if (!watch_keeps(cpu, victim, start))
		return NULL;
	if (st)
		take_over_lost(cpu, st, now);
	if (st && st->lost_count)
		report_lost_window(cpu, st, now);
	r = ring_take();
	if (!r) {
		if (st) {
			note_lost_here(cpu, st, now);
		} else {
			if (cpu < JS_MAX_CPUS)
				__sync_fetch_and_add(&counters[cpu & (JS_MAX_CPUS - 1)].rb_drops, 1);
			note_lost_atomic(cpu, now);
		}
		return NULL;
	}
	/* Every field but the name is set here or by the caller; the name is zeroed only by
	 * callers that do not fill it. */
	r->kind = JS_REC_INTERRUPTION;
	r->cpu = cpu;
	r->id = 0;
	r->detail = 0;
	r->pid = 0;
	r->class_ = 0;
	r->parent = 0;
	r->flags = 0;
	r->aux = 0;
	r->victim = victim;
	count_event(cpu);
	return r;
}

/* A record of this CPU in normal context: the watched thread current here is its victim. */
static __always_inline struct js_record *reserve_here(__u32 cpu, struct cpu_state *st,
						      __u64 start, __u64 now)
{
	return reserve(cpu, st, start, now, current_victim(st));
}

static __always_inline void zero_name(struct js_record *r)
{
	__u64 *n = (__u64 *)r->name;

	n[0] = 0;
	n[1] = 0;
	n[2] = 0;
	n[3] = 0;
}

static __always_inline void submit(struct js_record *r)
{
	ring_commit(r);
}

/* This CPU's runqueue (the running task's CFS runqueue points to it; without group
 * scheduling the CFS runqueue is inside it), or 0 when it cannot be told. */
static __always_inline __u64 this_rq(__u32 cpu)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct cfs_rq *cfs = t->se.cfs_rq;
	struct rq *rq;

	if (!cfs)
		return 0;
	if (bpf_core_field_exists(cfs->rq))
		rq = cfs->rq;
	else
		rq = container_of(cfs, struct rq, cfs);
	if (!rq || rq->cpu != cpu)
		return 0;
	return (__u64)rq;
}

/* This CPU's steal_time, found once from its runqueue. */
static __noinline bool find_steal_time(__u32 cpu, struct cpu_state *st)
{
	__u64 rq = this_rq(cpu);

	if (!rq)
		return false;
	st->steal_addr = rq + steal_time_from_rq;
	return true;
}

/* Compares the CPU's steal clock with its last read here and reports any growth: the host
 * kept this vCPU off its physical CPU somewhere in [last read, now]. The last-seen value is
 * replaced before the record is reserved, so a program nesting in this one (an IRQ during a
 * softirq program) does not report the same growth again. */
/* The steal clock moved between the CPU's previous sample (`at`, value `last`) and this
 * one (its time and value are in `st` already): a record of the growth. Out of line (see
 * take_over_lost_slot): the host moves it only when it kept the vCPU off its CPU. */
static __noinline void steal_moved(__u32 cpu, struct cpu_state *st, __u64 at, __u64 last)
{
	__u64 value = st->steal_last, now = st->steal_at;
	struct js_record *r;

	if (cpu < JS_MAX_CPUS)
		steal_read[cpu & (JS_MAX_CPUS - 1)] = value;
	if (!at || value < last)
		return;
	r = reserve_here(cpu, st, at, now);
	if (!r)
		return;
	r->kind = JS_REC_STEAL;
	r->start_ns = at;
	r->end_ns = now;
	r->id = value - last;
	r->detail = value;
	zero_name(r);
	submit(r);
}

static __always_inline void sample_steal(__u32 cpu, struct cpu_state *st, __u64 now)
{
	struct kvm_steal_time *kst;
	__u64 value, last = st->steal_last, at = st->steal_at;

	if (!st->steal_addr && !find_steal_time(cpu, st))
		return;
	kst = bpf_core_cast((void *)st->steal_addr, struct kvm_steal_time);
	value = kst->steal;
	st->steal_last = value;
	st->steal_at = now;
	if (at && value == last)
		return;
	steal_moved(cpu, st, at, last);
}

/* The time, for programs about a measured CPU in normal context (state `st` is this CPU's):
 * every such clock read also samples the steal clock, so steal is located between two
 * consecutive events on the CPU. */
static __always_inline __u64 clock_now(__u32 cpu, struct cpu_state *st)
{
	__u64 now = bpf_ktime_get_ns();

	if (steal_clock)
		sample_steal(cpu, st, now);
	return now;
}

/* tp_btf arguments are trusted BTF pointers: their fields are read with plain loads (CO-RE
 * relocated), no bpf_probe_read helper call per field. */
/* Emits one completed interruption record of a nesting level (IRQ, softirq, vector). */
static __always_inline void emit_episode(__u32 cpu, struct cpu_state *st, __u64 start,
					 __u64 now, __u64 id, __u16 class, __u16 parent,
					 __u32 flags, const char *name)
{
	struct js_record *r = reserve_here(cpu, st, start, now);

	if (!r)
		return;
	r->start_ns = start;
	r->end_ns = now;
	r->id = id;
	r->class_ = class;
	r->parent = parent;
	r->flags = flags;
	if (name)
		__builtin_memcpy(r->name, name, JS_NAME_LEN);
	else
		zero_name(r);
	submit(r);
}

static __always_inline bool is_self_tgid(__u32 tgid)
{
	return self_tgid && tgid == self_tgid;
}

static __always_inline __u16 task_class_of(struct task_struct *t)
{
	__u32 flags = t->flags;

	if (flags & PF_WQ_WORKER)
		return JS_CLASS_KWORKER;
	if (flags & PF_KTHREAD)
		return JS_CLASS_KTHREAD;
	if (is_self_tgid(t->tgid))
		return JS_CLASS_SELF;
	return JS_CLASS_TASK;
}

/* ---- task level: sched_switch, workqueue execution ------------------------------------ */

/* Emits the slice of the running work item since `work_start` as its own record, nested in
 * the worker's run (same level, later start): each item's time goes to its own function,
 * and the run record keeps only the worker's overhead outside items. */
static __always_inline void end_work_slice(__u32 cpu, struct cpu_state *st, __u64 now)
{
	struct js_record *r = reserve_here(cpu, st, st->work_start, now);

	if (r) {
		r->start_ns = st->work_start;
		r->end_ns = now;
		r->id = st->task_pid;
		r->pid = st->task_pid;
		r->detail = st->work_func;
		r->class_ = JS_CLASS_KWORKER;
		r->parent = JS_CLASS_KWORKER;
		r->aux = st->task_policy;
		__builtin_memcpy(r->name, st->task_comm, JS_COMM_LEN);
		submit(r);
	}
	st->work_start = 0;
}

static __always_inline void count_work_item(struct cpu_state *st)
{
	st->works++;
	st->task_flags = (st->task_flags & 0xffff) | ((st->works & 0xffff) << 16);
}

/* A worker switched back in may be inside a work item (preempted in it, or it slept there):
 * its `struct worker` says which (task->worker_private is the worker's struct kthread, whose
 * data is the struct worker), so the rest of the item keeps its name. Not trusted pointers:
 * read with probe reads, only for kworkers on measured CPUs. */
static __always_inline void resume_work_item(struct cpu_state *st, struct task_struct *next,
					     __u64 now)
{
	struct kthread *kt = NULL;
	struct worker *w = NULL;
	__u64 func = 0;

	/* worker_private is Linux 5.17+. */
	if (bpf_core_field_exists(next->worker_private))
		kt = BPF_CORE_READ(next, worker_private);
	if (kt)
		w = BPF_CORE_READ(kt, data);
	if (!w || bpf_core_read(&func, sizeof(func), &w->current_func)) {
		st->task_flags |= JS_F_WORK_UNREAD;
		return;
	}
	if (!func)
		return;
	st->work_func = func;
	st->best_func = func;
	st->work_start = now;
	count_work_item(st);
}

/* `prev_pid`: the task this switch takes off the CPU — another than the episode's when the
 * kernel switched away from it without the tracepoint (perf misses the same switches). */
static __always_inline void end_task_episode(__u32 cpu, struct cpu_state *st, __u64 now,
					     __u32 prev_pid)
{
	struct js_record *r;

	if (!st->task_start)
		return;
	/* A thread registered as workload while its run was open (it was switched in before
	 * user space knew its tid): its own run is what is measured, not an interruption. */
	if (is_workload(st->task_pid)) {
		r = NULL;
	} else {
		if (st->work_start)
			end_work_slice(cpu, st, now);
		r = reserve_here(cpu, st, st->task_start, now);
	}
	if (r) {
		r->kind = JS_REC_INTERRUPTION;
		r->cpu = cpu;
		r->start_ns = st->task_start;
		r->end_ns = now;
		r->id = st->task_pid;
		r->pid = st->task_pid;
		r->detail = st->best_func;
		r->class_ = st->task_class;
		r->flags = st->task_flags | (prev_pid != st->task_pid ? JS_F_END_UNSEEN : 0);
		r->aux = st->task_policy;
		__builtin_memcpy(r->name, st->task_comm, JS_COMM_LEN);
		submit(r);
	}
	st->task_start = 0;
	st->work_func = 0;
	st->work_start = 0;
	st->best_func = 0;
	st->works = 0;
}

/* ---- watch mode: where each watched thread is, and its waits ----------------------------- */

static __always_inline bool counted(struct js_watched *w)
{
	return w->state == JS_T_RUNNING || w->state == JS_T_WAITING;
}

static __always_inline void count_in(__u32 cpu)
{
	if (cpu < JS_MAX_CPUS)
		__sync_fetch_and_add(&interest[cpu & (JS_MAX_CPUS - 1)], 1);
}

static __always_inline void count_out(__u32 cpu, __u64 now)
{
	if (cpu >= JS_MAX_CPUS)
		return;
	cpu &= JS_MAX_CPUS - 1;
	if (__sync_fetch_and_add(&interest[cpu], -1) == 1)
		interest_end[cpu] = now;
}

/* `w` now runs or waits on `cpu`: counted there (moved from where it was counted). */
static __always_inline void place(struct js_watched *w, __u32 cpu, __u64 now)
{
	if (!counted(w)) {
		count_in(cpu);
	} else if (w->cpu != cpu) {
		count_out(w->cpu, now);
		count_in(cpu);
	}
	w->cpu = cpu;
}

/* The id of `t` in jitterscope's PID namespace (the one the user sees), 0 when it has none
 * there. `numbers[]` is read at the namespace's level from its first element: CO-RE
 * relocates constant indexes only. */
static __always_inline __u32 ns_id(struct task_struct *t)
{
	struct pid *p = BPF_CORE_READ(t, thread_pid);
	__u32 level = watch_ns_level;
	struct upid u = {};
	void *at;

	if (!p || level >= 32 || BPF_CORE_READ(p, level) < level)
		return 0;
	at = (void *)&p->numbers[0] + level * bpf_core_type_size(struct upid);
	if (bpf_probe_read_kernel(&u, sizeof(u), at))
		return 0;
	return (__u64)u.ns == watch_ns ? u.nr : 0;
}

/* A watched thread ran on `cpu` after waiting: its wait, as a record. */
static __always_inline void emit_wait(__u32 cpu, struct cpu_state *st, struct js_watched *w,
				      struct task_struct *next, __u32 tid, __u64 now)
{
	struct js_record *r = reserve(cpu, st, w->wait_start, now, tid);

	if (!r)
		return;
	r->kind = JS_REC_WAIT;
	r->start_ns = w->wait_start;
	r->end_ns = now;
	r->pid = tid;
	r->class_ = w->reason;
	r->aux = w->wait_cpu;
	r->detail = w->migrated_at;
	__builtin_memcpy(r->name, next->comm, JS_COMM_LEN);
	__builtin_memset(r->name + JS_COMM_LEN, 0, JS_NAME_LEN - JS_COMM_LEN);
	submit(r);
}

/* A context switch as the watched threads live it, on every CPU (they move): `prev` stops
 * running (blocked, or preempted and now waiting here), `next` runs (after a wait, which is
 * reported when this CPU or the one where it began is measured). `st` may be NULL off the
 * measured CPUs. `now` 0: the clock is read only if a watched thread is involved (most
 * switches on an unmeasured CPU are not: the filter's early exit reads no clock). */
static __always_inline void watch_switch(__u32 cpu, struct cpu_state *st, bool preempt,
					 struct task_struct *prev, struct task_struct *next,
					 unsigned int prev_state, __u64 now)
{
	__u32 next_pid = next->pid;
	struct js_watched *w;

	w = watched_task(prev);
	if (w) {
		if (!now)
			now = bpf_ktime_get_ns();
		if (preempt || prev_state == 0) {
			place(w, cpu, now);
			w->state = JS_T_WAITING;
			w->wait_start = now;
			w->wait_cpu = cpu;
			w->reason = JS_WAIT_PREEMPTED;
			w->migrated_at = 0;
		} else {
			if (counted(w))
				count_out(w->cpu, now);
			w->state = JS_T_BLOCKED;
			w->wait_start = 0;
		}
	}
	w = watched_task(next);
	if (w) {
		if (!now)
			now = bpf_ktime_get_ns();
		if (w->state == JS_T_WAITING && w->wait_start &&
		    (is_target(cpu) || is_target(w->wait_cpu)))
			emit_wait(cpu, st, w, next, next_pid, now);
		place(w, cpu, now);
		w->state = JS_T_RUNNING;
		w->wait_start = 0;
	}
	if (st) {
		st->cur_pid = next_pid;
		st->cur_gen = watch_gen;
		st->cur_victim = w ? next_pid : 0;
	}
}

/* ---- throttling: a runnable measured thread held off a CPU that idles ------------------ */

/* The CPU idled from `held_start` to now while the held thread was runnable on it: the
 * kernel held it off (RT throttling, a cgroup's CPU quota). One record of the stretch. */
static __noinline void end_held_idle(__u32 cpu, struct cpu_state *st, __u64 now)
{
	__u64 start = st->held_start;
	struct js_record *r;

	st->held_start = 0;
	r = reserve_here(cpu, st, start, now);
	if (!r)
		return;
	r->start_ns = start;
	r->end_ns = now;
	r->id = st->held_pid;
	r->pid = st->held_pid;
	r->class_ = JS_CLASS_THROTTLED;
	r->aux = st->held_policy;
	__builtin_memcpy(r->name, st->held_comm, JS_COMM_LEN);
	__builtin_memset(r->name + JS_COMM_LEN, 0, JS_NAME_LEN - JS_COMM_LEN);
	submit(r);
}

/* Whether the held thread is still runnable on `cpu` (it may have migrated, blocked or exited
 * since another task replaced it here): probe reads of the task_struct kept at the hold, whose
 * pid must still be the held one. */
static __noinline bool still_held(__u32 cpu, struct cpu_state *st)
{
	struct task_struct *t = (struct task_struct *)st->held_task;

	if (!t || BPF_CORE_READ(t, pid) != (int)st->held_pid)
		return false;
	return BPF_CORE_READ(t, __state) == 0 && BPF_CORE_READ(t, thread_info.cpu) == cpu;
}

/* Notes the switch's effect on the held thread: `prev`, a measured thread (`measured`)
 * switched out runnable, is now held here; the held thread switched in is no longer. */
static __always_inline void note_held(struct cpu_state *st, struct task_struct *prev,
				      __u32 prev_pid, bool measured, bool runnable, __u32 next_pid)
{
	if (measured && runnable) {
		st->held_task = (__u64)prev;
		st->held_pid = prev_pid;
		st->held_policy = prev->policy;
		__builtin_memcpy(st->held_comm, prev->comm, JS_COMM_LEN);
	} else if (st->held_pid == prev_pid || st->held_pid == next_pid) {
		st->held_pid = 0;
		st->held_task = 0;
	}
}

/* The CPU switches to idle: a stretch of throttling begins if a thread is held here. */
static __always_inline void begin_idle(__u32 cpu, struct cpu_state *st, __u32 prev_pid,
				       __u64 now)
{
	if (!st->held_pid)
		return;
	if (st->held_pid == prev_pid || still_held(cpu, st))
		st->held_start = now;
	else
		st->held_pid = 0;
}

static __always_inline int handle_sched_switch(bool preempt, struct task_struct *prev,
					       struct task_struct *next, unsigned int prev_state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;
	__u32 prev_pid, next_pid;
	bool measured;
	__u64 now;

	if (!is_target(cpu)) {
		if (watch_mode)
			watch_switch(cpu, NULL, preempt, prev, next, prev_state, 0);
		return 0;
	}
	st = my_state();
	if (!st)
		return 0;
	now = clock_now(cpu, st);
	prev_pid = prev->pid;
	end_task_episode(cpu, st, now, prev_pid);
	/* An idle stretch ends at the switch away from the idle task (pid 0). */
	if (st->held_start && prev_pid == 0)
		end_held_idle(cpu, st, now);
	st->held_start = 0;
	/* The switch's `prev` is still current here: current_victim says whether it is watched. */
	measured = is_workload(prev_pid) || (prev_pid && current_victim(st) == prev_pid);
	if (watch_mode)
		watch_switch(cpu, st, preempt, prev, next, prev_state, now);

	next_pid = next->pid;
	/* `preempt` covers a thread preempted after it set a sleeping state. */
	note_held(st, prev, prev_pid, measured, preempt || prev_state == 0, next_pid);
	if (next_pid == 0) {
		begin_idle(cpu, st, prev_pid, now);
		return 0;
	}
	if (is_workload(next_pid))
		return 0;
	st->task_start = now;
	st->task_pid = next_pid;
	st->task_class = task_class_of(next);
	st->task_policy = next->policy;
	st->task_flags = 0;
	if (is_workload(prev_pid))
		st->task_flags = preempt || prev_state == 0 ? JS_F_PREEMPTED_WORKLOAD
							    : JS_F_BLOCKED_WORKLOAD;
	__builtin_memcpy(st->task_comm, next->comm, sizeof(st->task_comm));
	if (st->task_class == JS_CLASS_KWORKER)
		resume_work_item(st, next, now);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(js_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return handle_sched_switch(preempt, prev, next, prev_state);
}

SEC("tp_btf/workqueue_execute_start")
int BPF_PROG(js_workqueue_execute_start, struct work_struct *work)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;
	__u64 now;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st || !st->task_start || st->task_pid != (__u32)bpf_get_current_pid_tgid())
		return 0;
	now = clock_now(cpu, st);
	/* A slice still open was taken at switch-in from a current_func the worker had not yet
	 * cleared: it ends here. */
	if (st->work_start)
		end_work_slice(cpu, st, now);
	/* The function pointer is read here: execute_end cannot read it (verifier). */
	st->work_func = (__u64)work->func;
	if (!st->best_func)
		st->best_func = st->work_func;
	st->work_start = now;
	count_work_item(st);
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int BPF_PROG(js_workqueue_execute_end, struct work_struct *work)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st || !st->work_start || st->task_pid != (__u32)bpf_get_current_pid_tgid())
		return 0;
	/* The run record is named after the first item — the work that woke the worker. */
	end_work_slice(cpu, st, clock_now(cpu, st));
	return 0;
}

/* ---- hard irqs -------------------------------------------------------------------------- */

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(js_irq_handler_entry, int irq, struct irqaction *action)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;
	const char *name;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	forget_open_hard(st);
	st->irq_parent = innermost(st);
	st->irq_start = clock_now(cpu, st);
	st->irq_nr = irq;
	/* A device's interrupts come to the same CPU again and again: its name is copied the
	 * first time (a helper call and a string walk), then kept while the same action, with
	 * the same name pointer, runs. */
	name = action->name;
	if ((__u64)action != st->irq_action || (__u64)name != st->irq_name_ptr) {
		bpf_probe_read_kernel_str(st->irq_name, sizeof(st->irq_name), name);
		st->irq_action = (__u64)action;
		st->irq_name_ptr = (__u64)name;
	}
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(js_irq_handler_exit, int irq, struct irqaction *action, int ret)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st || !st->irq_start)
		return 0;
	emit_episode(cpu, st, st->irq_start, clock_now(cpu, st), st->irq_nr, JS_CLASS_IRQ,
		     st->irq_parent, 0, st->irq_name);
	st->irq_start = 0;
	return 0;
}

/* ---- softirqs --------------------------------------------------------------------------- */

static __always_inline int handle_softirq_entry(unsigned int vec)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	forget_open_soft(st);
	st->softirq_parent = innermost(st);
	st->softirq_start = clock_now(cpu, st);
	st->softirq_vec = vec;
	return 0;
}

static __always_inline int handle_softirq_exit(unsigned int vec)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st || !st->softirq_start)
		return 0;
	emit_episode(cpu, st, st->softirq_start, clock_now(cpu, st), st->softirq_vec,
		     JS_CLASS_SOFTIRQ, st->softirq_parent, 0, NULL);
	st->softirq_start = 0;
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(js_softirq_entry, unsigned int vec)
{
	return handle_softirq_entry(vec);
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(js_softirq_exit, unsigned int vec)
{
	return handle_softirq_exit(vec);
}

/* Test seams (see cpu_frequency below): a record of a measured CPU reserved in normal
 * context, on a chosen CPU. */
SEC("raw_tp/softirq_entry")
int BPF_PROG(js_softirq_entry_raw, unsigned int vec)
{
	return handle_softirq_entry(vec);
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(js_softirq_exit_raw, unsigned int vec)
{
	return handle_softirq_exit(vec);
}

/* ---- x86 system vectors: the tick and the IPIs ------------------------------------------ */

static __always_inline int vector_entry(__u32 kind)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	forget_open_hard(st);
	st->vec_parent = innermost(st);
	st->vec_start = clock_now(cpu, st);
	st->vec_kind = kind;
	st->vec_callbacks = 0;
	return 0;
}

static __always_inline int vector_exit(__u32 kind)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st || !st->vec_start || st->vec_kind != kind)
		return 0;
	emit_episode(cpu, st, st->vec_start, clock_now(cpu, st), kind,
		     kind == JS_VEC_LOCAL_TIMER ? JS_CLASS_TIMER_TICK : JS_CLASS_IPI,
		     st->vec_parent, st->vec_callbacks, NULL);
	st->vec_start = 0;
	return 0;
}

#define VECTOR_PROGS(tp, kind)                                           \
	SEC("tp_btf/" #tp "_entry")                                      \
	int BPF_PROG(js_##tp##_entry, int vector) { return vector_entry(kind); } \
	SEC("tp_btf/" #tp "_exit")                                       \
	int BPF_PROG(js_##tp##_exit, int vector) { return vector_exit(kind); }

VECTOR_PROGS(local_timer, JS_VEC_LOCAL_TIMER)
VECTOR_PROGS(reschedule, JS_VEC_RESCHEDULE)
VECTOR_PROGS(call_function, JS_VEC_CALL_FUNCTION)
VECTOR_PROGS(call_function_single, JS_VEC_CALL_FUNCTION_SINGLE)
VECTOR_PROGS(irq_work, JS_VEC_IRQ_WORK)
VECTOR_PROGS(thermal_apic, JS_VEC_THERMAL)
VECTOR_PROGS(x86_platform_ipi, JS_VEC_X86_PLATFORM_IPI)
VECTOR_PROGS(spurious_apic, JS_VEC_SPURIOUS)
VECTOR_PROGS(error_apic, JS_VEC_ERROR)

/* ---- hrtimers: what the timer interrupt (or the HRTIMER softirq) ran --------------------- */

/* The sleeping task an hrtimer_wakeup timer belongs to (the timer is the first member of its
 * struct hrtimer_sleeper). Reached from the timer, so not a trusted pointer: probe reads. */
static __always_inline void read_sleeper(struct hrtimer_slot *h, struct hrtimer *timer)
{
	struct hrtimer_sleeper *sl = container_of(timer, struct hrtimer_sleeper, timer);
	struct task_struct *t = BPF_CORE_READ(sl, task);

	if (!t)
		return;
	h->pid = BPF_CORE_READ(t, pid);
	bpf_core_read(h->comm, sizeof(h->comm), &t->comm);
	h->flags |= JS_HRT_SLEEPER;
	if (is_self_tgid(BPF_CORE_READ(t, tgid)))
		h->flags |= JS_HRT_SELF;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(js_hrtimer_expire_entry, struct hrtimer *timer, ktime_t *expires)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct hrtimer_slot *h;
	struct cpu_state *st;
	bool soft;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	soft = timer->is_soft;
	h = soft ? &st->hrt[1] : &st->hrt[0];
	h->parent = innermost(st);
	h->timer = (__u64)timer;
	h->func = (__u64)timer->function;
	h->flags = soft ? JS_HRT_SOFT : 0;
	h->pid = 0;
	if (hrtimer_wakeup_fn && h->func == hrtimer_wakeup_fn)
		read_sleeper(h, timer);
	if (!soft && st->vec_start)
		st->vec_callbacks++;
	h->start = clock_now(cpu, st);
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(js_hrtimer_expire_exit, struct hrtimer *timer)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct hrtimer_slot *h;
	struct cpu_state *st;
	struct js_record *r;
	__u64 now;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	/* Matched by address: the callback may have freed or reused the timer (a sleeper's lives
	 * on its task's stack), so it is not read again. */
	if (st->hrt[0].start && st->hrt[0].timer == (__u64)timer)
		h = &st->hrt[0];
	else if (st->hrt[1].start && st->hrt[1].timer == (__u64)timer)
		h = &st->hrt[1];
	else
		return 0;
	now = clock_now(cpu, st);
	r = reserve_here(cpu, st, h->start, now);
	if (r) {
		r->start_ns = h->start;
		r->end_ns = now;
		r->id = h->func;
		r->pid = h->pid;
		r->class_ = JS_CLASS_HRTIMER;
		r->parent = h->parent;
		r->flags = h->flags;
		zero_name(r);
		if (h->flags & JS_HRT_SLEEPER)
			__builtin_memcpy(r->name, h->comm, JS_COMM_LEN);
		submit(r);
	}
	h->start = 0;
	return 0;
}

/* ---- the tick's stops: counters only (see struct js_tick_stops) ------------------------- */

/* Read by user space through the mmapped .bss when the session stops; a line per CPU. */
struct js_tick_stops tick_stops[JS_MAX_CPUS] __attribute__((aligned(64))) = {};

/* Fires at every idle entry that stops the tick, and on a nohz_full CPU each time the tick
 * could not be stopped: a filter, one store, no clock read. Plain increments: only programs
 * on that CPU write its line, and the tracepoint does not nest with itself. */
SEC("tp_btf/tick_stop")
int BPF_PROG(js_tick_stop, int success, int dependency)
{
	__u32 cpu = bpf_get_smp_processor_id(), dep = dependency, slot = JS_TICK_DEP_SLOTS - 1;
	struct js_tick_stops *t;

	if (!is_target(cpu))
		return 0;
	t = &tick_stops[cpu & (JS_MAX_CPUS - 1)];
	if (success) {
		t->stopped++;
		return 0;
	}
	/* The kernel gives one TICK_DEP_MASK_* bit: its number is the slot. */
#pragma unroll
	for (__u32 b = 0; b < JS_TICK_DEP_SLOTS - 1; b++)
		if (dep == 1U << b)
			slot = b;
	t->kept[slot]++;
	return 0;
}

/* ---- NMIs: the tracepoint fires after each handler with its duration --------------------- */

SEC("tp_btf/nmi_handler")
int BPF_PROG(js_nmi_handler, void *handler, s64 delta_ns, int handled)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st;
	struct js_record *r;
	__u64 now, start;
	__u32 victim = 0;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	/* NMI context: no steal sample and no state written (another program may be updating
	 * it); a drop goes to the lock-free slot. */
	now = bpf_ktime_get_ns();
	start = delta_ns > 0 && (__u64)delta_ns < now ? now - delta_ns : now;
	/* The victim from the cache, read only (valid if it is about the current task). */
	if (watch_mode && st && st->cur_pid == (__u32)bpf_get_current_pid_tgid() &&
	    st->cur_gen == watch_gen)
		victim = st->cur_victim;
	r = reserve(cpu, NULL, start, now, victim);
	if (!r)
		return 0;
	r->kind = JS_REC_INTERRUPTION;
	r->cpu = cpu;
	r->start_ns = start;
	r->end_ns = now;
	r->detail = (__u64)handler;
	r->class_ = JS_CLASS_NMI;
	r->parent = st ? innermost(st) : JS_CLASS_NONE;
	zero_name(r);
	submit(r);
	return 0;
}

/* ---- causes: who queued work or sent an IPI to a measured CPU ---------------------------- */

/* The preempt count's bits (include/linux/preempt.h): NMI and hard IRQ nesting, and the bit
 * that is set while softirqs are served (not while they are only disabled). */
#define JS_PC_SOFTIRQ_OFFSET 0x100
#define JS_PC_HARDIRQ_MASK 0xf0000
#define JS_PC_NMI_MASK 0xf00000

/* The context the code running now on this CPU is in, as JS_F_FROM_* (0: a task's own): from
 * the preempt count where it can be read, else from what the probes have open here when this
 * CPU is measured (`st`), else a task's. */
static __always_inline __u32 context_now(__u32 cpu, struct cpu_state *st)
{
	__u64 rq = preempt_count_known ? this_rq(cpu) : 0;
	int pc = 0;

	if (rq && !bpf_probe_read_kernel(&pc, sizeof(pc), (void *)(rq + preempt_count_from_rq))) {
		if (pc & JS_PC_NMI_MASK)
			return JS_F_FROM_NMI;
		if (pc & JS_PC_HARDIRQ_MASK)
			return JS_F_FROM_HARDIRQ;
		return pc & JS_PC_SOFTIRQ_OFFSET ? JS_F_FROM_SOFTIRQ : 0;
	}
	if (!st)
		return 0;
	if (st->vec_start || st->irq_start || st->hrt[0].start)
		return JS_F_FROM_HARDIRQ;
	return st->softirq_start || st->hrt[1].start ? JS_F_FROM_SOFTIRQ : 0;
}

/* Marks a cause with the context it was sent from (`from`) and, when the sender's CPU is
 * measured, the innermost episode of that level open there: its class in `parent`, its number
 * + 1 in the flags' upper half. */
static __always_inline void note_context(struct js_record *r, __u32 from, struct cpu_state *st)
{
	__u16 class_ = JS_CLASS_NONE;
	__u32 nr = 0;

	r->flags |= from;
	if (st && from == JS_F_FROM_HARDIRQ) {
		if (st->hrt[0].start) {
			class_ = JS_CLASS_HRTIMER;
		} else if (st->vec_start) {
			class_ = st->vec_kind == JS_VEC_LOCAL_TIMER ? JS_CLASS_TIMER_TICK : JS_CLASS_IPI;
			nr = st->vec_kind + 1;
		} else if (st->irq_start) {
			class_ = JS_CLASS_IRQ;
			nr = st->irq_nr + 1;
		}
	} else if (st && from == JS_F_FROM_SOFTIRQ) {
		if (st->hrt[1].start) {
			class_ = JS_CLASS_HRTIMER;
		} else if (st->softirq_start) {
			class_ = JS_CLASS_SOFTIRQ;
			nr = st->softirq_vec + 1;
		}
	}
	r->parent = class_;
	if (nr < 0x10000)
		r->flags |= nr << 16;
}

static __always_inline void emit_cause(__u32 target, __u16 cause, __u64 what, __u64 callsite)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct cpu_state *st = is_target(cpu) ? my_state() : NULL;
	__u32 from = context_now(cpu, st);
	struct js_record *r;
	__u64 now = bpf_ktime_get_ns();

	r = reserve(target, NULL, now, now, 0);
	if (!r)
		return;
	r->kind = JS_REC_CAUSE;
	r->cpu = target;
	r->start_ns = now;
	r->end_ns = now;
	r->id = what;
	r->detail = callsite;
	r->class_ = cause;
	r->pid = (__u32)bpf_get_current_pid_tgid();
	r->aux = cpu;
	/* jitterscope's own sends (a TLB shootdown from freeing memory) are its own noise; an
	 * interrupt that sends while one of its threads is current is the kernel's (a tick
	 * queueing unbound work). */
	if (!from && is_self_tgid(bpf_get_current_pid_tgid() >> 32))
		r->flags = JS_F_SENDER_SELF;
	note_context(r, from, st);
	bpf_get_current_comm(r->name, JS_COMM_LEN);
	submit(r);
}

/* A cause for each measured CPU among the first 64 of `bits`; a cause is a hint, the
 * interruption itself is always recorded. */
static __always_inline void emit_causes(__u64 bits, __u16 cause, __u64 what, __u64 callsite)
{
	bits &= target_cpus[0];
	for (int i = 0; i < 64 && bits; i++) {
		if (bits & (1ULL << i)) {
			emit_cause(i, cause, what, callsite);
			bits &= ~(1ULL << i);
		}
	}
}

SEC("tp_btf/workqueue_queue_work")
int BPF_PROG(js_workqueue_queue_work, int req_cpu, struct pool_workqueue *pwq,
	     struct work_struct *work)
{
	struct worker_pool *pool = BPF_CORE_READ(pwq, pool);
	int cpu = BPF_CORE_READ(pool, cpu);
	struct workqueue_attrs *attrs;
	__u64 bits;

	if (cpu >= 0) {
		if (is_target(cpu))
			emit_cause(cpu, JS_CAUSE_QUEUE_WORK, (__u64)BPF_CORE_READ(work, func), 0);
		return 0;
	}
	/* Unbound pool: its workers may run on any CPU the pool allows (its pod's CPUs only
	 * when the workqueue is strict about affinity, Linux 6.6+), measured ones included. */
	attrs = BPF_CORE_READ(pool, attrs);
	if (!attrs)
		return 0;
	if (bpf_core_field_exists(attrs->affn_strict) && BPF_CORE_READ(attrs, affn_strict))
		bits = BPF_CORE_READ(attrs, __pod_cpumask[0].bits[0]);
	else
		bits = BPF_CORE_READ(attrs, cpumask[0].bits[0]);
	if (bits & target_cpus[0])
		emit_causes(bits, JS_CAUSE_QUEUE_WORK, (__u64)BPF_CORE_READ(work, func), 0);
	return 0;
}

SEC("tp_btf/ipi_send_cpu")
int BPF_PROG(js_ipi_send_cpu, const unsigned int cpu, unsigned long callsite, void *callback)
{
	/* One 32-bit copy for every check and index (the argument arrives as a u64). */
	__u32 target = cpu;

	barrier_var(target);
	if (!is_target(target))
		return 0;
	emit_cause(target, JS_CAUSE_IPI, (__u64)callback, callsite);
	return 0;
}

SEC("tp_btf/ipi_send_cpumask")
int BPF_PROG(js_ipi_send_cpumask, const struct cpumask *mask, unsigned long callsite,
	     void *callback)
{
	emit_causes(BPF_CORE_READ(mask, bits[0]), JS_CAUSE_IPI, (__u64)callback, callsite);
	return 0;
}

/* ---- watch mode: wake-ups, migrations, new and exiting threads, page faults --------------- */

/* A watched thread that was not runnable becomes so on its CPU: its wait begins. A wake-up of
 * a thread still on a runqueue (the kernel traces those too) changes nothing. */
static __always_inline int watch_wakeup(struct task_struct *p, __u16 reason)
{
	struct js_watched *w = watched_task(p);
	__u64 now;
	__u32 cpu;

	if (!w || counted(w))
		return 0;
	now = bpf_ktime_get_ns();
	cpu = p->thread_info.cpu;
	place(w, cpu, now);
	w->state = JS_T_WAITING;
	w->wait_start = now;
	w->wait_cpu = cpu;
	w->reason = reason;
	w->migrated_at = 0;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(js_w_sched_wakeup, struct task_struct *p)
{
	return watch_wakeup(p, JS_WAIT_WAKEUP);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(js_w_sched_wakeup_new, struct task_struct *p)
{
	return watch_wakeup(p, JS_WAIT_NEW);
}

/* A waiting thread moved to another CPU's runqueue: it waits there now. */
SEC("tp_btf/sched_migrate_task")
int BPF_PROG(js_w_sched_migrate_task, struct task_struct *p, int dest_cpu)
{
	struct js_watched *w = watched_task(p);
	__u64 now;

	if (!w || w->state != JS_T_WAITING || w->cpu == (__u32)dest_cpu)
		return 0;
	now = bpf_ktime_get_ns();
	place(w, dest_cpu, now);
	w->migrated_at = now;
	return 0;
}

/* A watched thread created (`kind` JS_REC_THREAD_NEW, `detail` the thread that created it) or
 * exiting (JS_REC_THREAD_EXIT, `detail` its run time: see emit_thread_exit). `delay` goes to
 * `flags` (low half) and `victim` (high half). */
static __always_inline void emit_thread_event(__u32 kind, __u32 cpu, struct task_struct *t,
					      __u64 detail, __u64 delay, __u64 now)
{
	__u32 tid = BPF_CORE_READ(t, pid);
	struct js_record *r = reserve(cpu, NULL, now, now, tid);

	if (!r)
		return;
	r->kind = kind;
	r->start_ns = now;
	r->end_ns = now;
	r->pid = tid;
	r->detail = detail;
	r->flags = (__u32)delay;
	r->victim = (__u32)(delay >> 32);
	r->aux = ns_id(t);
	/* its process: the kernel tgid above, the id the user sees below */
	r->id = (__u64)BPF_CORE_READ(t, tgid) << 32 | ns_id(BPF_CORE_READ(t, group_leader));
	bpf_core_read(r->name, JS_COMM_LEN, &t->comm);
	__builtin_memset(r->name + JS_COMM_LEN, 0, JS_NAME_LEN - JS_COMM_LEN);
	submit(r);
}

/* A watched thread exits: its record carries what /proc/PID/task/TID/schedstat would say now
 * (the thread is gone by the time user space could read it): its run time as the scheduler
 * last accounted it (the slice under way since then, at most a tick, is not in it) and its
 * wait for a CPU. */
static __always_inline void emit_thread_exit(__u32 cpu, struct task_struct *t, __u64 now)
{
	__u64 delay = 0;

	if (bpf_core_field_exists(t->sched_info.run_delay))
		delay = BPF_CORE_READ(t, sched_info.run_delay);
	emit_thread_event(JS_REC_THREAD_EXIT, cpu, t, BPF_CORE_READ(t, se.sum_exec_runtime), delay,
			  now);
}

/* Whether `t`'s default hierarchy (v2) cgroup is the watched cgroup or below it: its ancestor
 * at the watched cgroup's level has the watched cgroup's id. `ancestors[]` is read from its
 * first element (CO-RE relocates constant indexes only), the level bounded for the verifier. */
static __always_inline bool in_watched_cgroup(struct task_struct *t)
{
	struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp), *at = NULL;
	__u32 level = watch_cgroup_level;

	if (!cg || level > JS_CGROUP_LEVEL_MAX || BPF_CORE_READ(cg, level) < (int)level)
		return false;
	if (bpf_probe_read_kernel(&at, sizeof(at), (void *)&cg->ancestors[0] + level * sizeof(at)) ||
	    !at)
		return false;
	return BPF_CORE_READ(at, kn, id) == watch_cgroup;
}

/* `t` is watched from now (a thread it was not): told to user space, with its ids. Returns
 * whether it was added. */
static __always_inline bool watch_new(struct task_struct *t, __u32 parent, __u32 cpu)
{
	struct js_watched fresh = { .state = JS_T_BLOCKED };
	__u32 tid = BPF_CORE_READ(t, pid);
	long err;

	if (!tid)
		return false;
	err = bpf_map_update_elem(&watched, &tid, &fresh, BPF_NOEXIST);
	/* a full hash map refuses a new key with E2BIG: the thread is counted, not watched */
	if (err == -JS_E2BIG)
		__sync_fetch_and_add(&watch_map_full, 1);
	if (err)
		return false;
	emit_thread_event(JS_REC_THREAD_NEW, cpu, t, parent, 0, bpf_ktime_get_ns());
	return true;
}

/* A new thread of the watched process, or created in the watched cgroup, is watched from its
 * creation (and told to user space, with its id as the user sees it). The child's own cgroup
 * is read, not the parent's: clone3 can place it in another (CLONE_INTO_CGROUP). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(js_w_sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 cpu = bpf_get_smp_processor_id();

	if (watch_tgid && child->tgid == watch_tgid)
		watch_new(child, parent->pid, cpu);
	else if (watch_cgroup && in_watched_cgroup(child))
		watch_new(child, parent->pid, cpu);
	return 0;
}

/* A walk of a thread group's list (`signal->thread_head`, linked by `task->thread_node`). */
struct group_walk {
	__u64 head;
	__u64 pos;
	__u32 cpu;
	bool added;
};

/* One thread of the walk watched; 1 (stop) at the list's end. A bpf_loop callback: verified
 * once, not once per thread. */
static long watch_next_in_group(__u64 i, void *ctx)
{
	struct group_walk *w = ctx;
	struct task_struct *t;

	if (!w->pos || w->pos == w->head)
		return 1;
	t = (void *)(w->pos - bpf_core_field_offset(struct task_struct, thread_node));
	if (watch_new(t, 0, w->cpu))
		w->added = true;
	w->pos = (__u64)BPF_CORE_READ(t, thread_node.next);
	return 0;
}

/* A process moved into the watched cgroup (a runtime's `exec` forks outside the container's
 * cgroup, then moves in; v1 moves fire here too, and find the v2 cgroup unchanged): its
 * threads are watched from now, at most JS_CGROUP_THREADS_MAX of them (the kernel traces the
 * group leader only). */
SEC("tp_btf/cgroup_attach_task")
int BPF_PROG(js_w_cgroup_attach_task, struct cgroup *dst, const char *path,
	     struct task_struct *task, bool threadgroup)
{
	struct group_walk w = { .cpu = bpf_get_smp_processor_id() };
	bool added;

	if (!watch_cgroup || !in_watched_cgroup(task))
		return 0;
	added = watch_new(task, 0, w.cpu);
	if (threadgroup) {
		w.head = (__u64)BPF_CORE_READ(task, signal) +
			 bpf_core_field_offset(struct signal_struct, thread_head);
		w.pos = (__u64)BPF_CORE_READ(task, signal, thread_head.next);
		bpf_loop(JS_CGROUP_THREADS_MAX, watch_next_in_group, &w, 0);
		added = added || w.added;
	}
	/* a moved task may be current somewhere, cached as not watched: redo the caches */
	if (added)
		__sync_fetch_and_add(&watch_gen, 1);
	return 0;
}

/* A watched thread exits: no longer counted anywhere, and told to user space. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(js_w_sched_process_exit, struct task_struct *p, bool group_dead)
{
	__u32 tid = p->pid, cpu = bpf_get_smp_processor_id();
	struct js_watched *w = watched_task(p);
	__u64 now;

	if (!w)
		return 0;
	now = bpf_ktime_get_ns();
	if (counted(w))
		count_out(w->cpu, now);
	bpf_map_delete_elem(&watched, &tid);
	emit_thread_exit(cpu, p, now);
	return 0;
}

/* A watched thread other than its process's main one calls execve: de_thread kills the other
 * threads, waits for the main one to exit (sched_process_exit deleted its entry) and gives the
 * exec'ing thread the main thread's id. This fires after that, the thread running here: its
 * entry moves from `old_pid` to its new id, placed on this CPU as running (between de_thread
 * and here no lookup found it under either id, so where it was counted may be stale), and
 * user space is told with a record of its own kind: a THREAD_NEW with a flag would have every
 * reader of new threads check it, where this is a move of one thread's account, not a new one. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(js_w_sched_process_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u32 tid = p->pid, old = (__u32)old_pid, cpu = bpf_get_smp_processor_id();
	struct js_watched moved, *w, *taken;
	__u64 now;

	if (old == tid || !old)
		return 0;
	w = bpf_map_lookup_elem(&watched, &old);
	if (!w)
		return 0;
	moved = *w;
	now = bpf_ktime_get_ns();
	place(&moved, cpu, now);
	moved.state = JS_T_RUNNING;
	moved.wait_start = 0;
	moved.migrated_at = 0;
	/* the main thread's entry is gone with its exit; one left (its exit unseen) is counted out */
	taken = bpf_map_lookup_elem(&watched, &tid);
	if (taken && counted(taken))
		count_out(taken->cpu, now);
	/* deleted first: a full map still has room for the move */
	bpf_map_delete_elem(&watched, &old);
	if (bpf_map_update_elem(&watched, &tid, &moved, BPF_ANY)) {
		count_out(cpu, now);
		return 0;
	}
	/* caches of "is the current task watched" hold the old id's answer: redo them */
	__sync_fetch_and_add(&watch_gen, 1);
	emit_thread_event(JS_REC_THREAD_EXEC, cpu, p, old, 0, now);
	return 0;
}

/* Page faults of a watched thread, from entry to return of the fault path (a major fault
 * includes the I/O it waited for). Optional: left out where fentry cannot attach. */
SEC("fentry/handle_mm_fault")
int BPF_PROG(js_w_fault_entry, struct vm_area_struct *vma, unsigned long address,
	     unsigned int flags, struct pt_regs *regs)
{
	__u32 cpu = bpf_get_smp_processor_id(), tid;
	struct cpu_state *st;
	struct js_watched *w;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	tid = current_victim(st);
	if (!tid)
		return 0;
	w = bpf_map_lookup_elem(&watched, &tid);
	if (w)
		w->fault_start = clock_now(cpu, st);
	return 0;
}

SEC("fexit/handle_mm_fault")
int BPF_PROG(js_w_fault_exit, struct vm_area_struct *vma, unsigned long address,
	     unsigned int flags, struct pt_regs *regs, vm_fault_t ret)
{
	__u32 cpu = bpf_get_smp_processor_id(), tid;
	struct cpu_state *st;
	struct js_watched *w;
	struct js_record *r;
	__u64 now;

	if (!is_target(cpu))
		return 0;
	st = my_state();
	if (!st)
		return 0;
	tid = current_victim(st);
	if (!tid)
		return 0;
	w = bpf_map_lookup_elem(&watched, &tid);
	if (!w || !w->fault_start)
		return 0;
	now = clock_now(cpu, st);
	r = reserve(cpu, st, w->fault_start, now, tid);
	if (r) {
		r->start_ns = w->fault_start;
		r->end_ns = now;
		r->id = address;
		r->pid = tid;
		r->class_ = JS_CLASS_FAULT;
		r->flags = (ret & VM_FAULT_MAJOR ? JS_FAULT_MAJOR : 0) |
			   (ret & (VM_FAULT_OOM | VM_FAULT_SIGBUS | VM_FAULT_SIGSEGV) ?
				    JS_FAULT_ERROR : 0);
		bpf_get_current_comm(r->name, JS_COMM_LEN);
		__builtin_memset(r->name + JS_COMM_LEN, 0, JS_NAME_LEN - JS_COMM_LEN);
		submit(r);
	}
	w->fault_start = 0;
	return 0;
}

/* Every task, with its ids in the kernel's numbering and in jitterscope's PID namespace
 * (tasks outside it are left out): how `watch --pid/--tid/--comm` finds its threads. Run by
 * user space on demand (a bpf_iter link), never attached to an event. */
SEC("iter/task")
int js_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct js_task_row row = {};

	if (!t)
		return 0;
	row.ns_tid = ns_id(t);
	if (!row.ns_tid)
		return 0;
	row.ns_tgid = ns_id(t->group_leader);
	row.kernel_tid = t->pid;
	row.kernel_tgid = t->tgid;
	__builtin_memcpy(row.comm, t->comm, JS_COMM_LEN);
	bpf_seq_write(ctx->meta->seq, &row, sizeof(row));
	return 0;
}

/* ---- frequency changes: kept for every CPU (they are rare) ------------------------------- */

static __always_inline int handle_cpu_frequency(unsigned int khz, unsigned int cpu_arg)
{
	struct js_record *r;
	__u64 now = bpf_ktime_get_ns();
	__u32 old = 0, cpu_id = cpu_arg;

	/* One 32-bit copy for every check and index (the argument arrives as a u64). */
	barrier_var(cpu_id);

	if (cpu_id < JS_MAX_CPUS) {
		old = cpu_khz[cpu_id];
		cpu_khz[cpu_id] = khz;
	}
	r = reserve(cpu_id, NULL, now, now, 0);
	if (!r)
		return 0;
	r->kind = JS_REC_INTERRUPTION;
	r->cpu = cpu_id;
	r->start_ns = now;
	r->end_ns = now;
	r->id = khz;
	r->detail = old;
	r->class_ = JS_CLASS_FREQ;
	zero_name(r);
	submit(r);
	return 0;
}

SEC("tp_btf/cpu_frequency")
int BPF_PROG(js_cpu_frequency, unsigned int state, unsigned int cpu_id)
{
	return handle_cpu_frequency(state, cpu_id);
}

/* Test seam: the same handler as a raw_tp, which BPF_PROG_TEST_RUN can drive on a chosen CPU
 * (tp_btf cannot be test-run, and this machine class has no cpufreq driver). Not autoloaded
 * in normal sessions. */
SEC("raw_tp/cpu_frequency")
int BPF_PROG(js_cpu_frequency_raw, unsigned int state, unsigned int cpu_id)
{
	return handle_cpu_frequency(state, cpu_id);
}

/* "Who am I, in the kernel's numbering": run through BPF_PROG_TEST_RUN without
 * BPF_F_TEST_RUN_ON_CPU, a raw_tp program runs synchronously in the calling thread, so this is
 * the caller's pid and tgid as sched_switch and task->tgid see them, whatever PID namespace
 * the caller is in. args[0] is the question (enum js_whoami); the answer is the return value
 * rather than a .bss slot, so threads can ask at the same time. Never attached. */
SEC("raw_tp")
int js_whoami(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_struct *t;
	struct pid *p;
	struct upid u = {};
	__u32 level;

	if (ctx->args[0] != JS_WHOAMI_NS)
		return ctx->args[0] == JS_WHOAMI_TGID ? id >> 32 : (__u32)id;
	/* The caller's PID namespace: its level, and the namespace's address at that level. */
	t = (struct task_struct *)bpf_get_current_task();
	p = BPF_CORE_READ(t, thread_pid);
	if (!p)
		return -1;
	level = BPF_CORE_READ(p, level);
	if (level >= 32 ||
	    bpf_probe_read_kernel(&u, sizeof(u),
				  (void *)&p->numbers[0] + level * bpf_core_type_size(struct upid)))
		return -1;
	watch_ns_level = level;
	watch_ns = (__u64)u.ns;
	return level;
}

/* ---- reference programs (`probe --floor`): what a program run costs here before it does
 * anything. Loaded only when asked for; their costs are reported apart from the probes'. ---- */

/* Nothing: the kernel's dispatch of a tracing program and the statistics' own clock reads. */
SEC("tp_btf/sched_switch")
int BPF_PROG(js_floor_empty, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return 0;
}

/* One read of the clock every record carries (bpf_ktime_get_ns), and nothing else. */
SEC("tp_btf/sched_switch")
int BPF_PROG(js_floor_clock, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	bpf_ktime_get_ns();
	return 0;
}

/* Nothing, on the timer interrupt: a program run there (some hundreds of times a second, in
 * interrupt context) starts from colder caches than one on sched_switch, whatever it does. */
SEC("tp_btf/local_timer_entry")
int BPF_PROG(js_floor_timer_empty, int vector)
{
	return 0;
}

/* One clock read, on the timer interrupt: the first timestamp taken at each tick costs far
 * more than a later one (about twice, `probe --floor` shows both),
 * whichever program takes it — with `--floor-first` this program takes it, and what the
 * probe's own timer programs cost after it shows apart from that price. */
SEC("tp_btf/local_timer_entry")
int BPF_PROG(js_floor_timer_clock, int vector)
{
	bpf_ktime_get_ns();
	return 0;
}
