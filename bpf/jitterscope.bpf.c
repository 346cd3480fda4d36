// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* jitterscope's kernel half: every source of interruption on the measured CPUs. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "jitterscope.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Measured CPUs, set by user space before load: events of other CPUs are dropped first. */
const volatile __u64 target_cpus[JS_MAX_CPUS / 64] = {};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, JS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct js_cpu_counters);
} counters SEC(".maps");

static __always_inline bool is_target(__u32 cpu)
{
	if (cpu >= JS_MAX_CPUS)
		return false;
	return target_cpus[cpu / 64] & (1ULL << (cpu % 64));
}

SEC("tp_btf/sched_switch")
int BPF_PROG(js_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct js_cpu_counters *c;

	if (!is_target(cpu))
		return 0;
	c = bpf_map_lookup_elem(&counters, &cpu);
	if (c)
		__sync_fetch_and_add(&c->switches, 1);
	return 0;
}
