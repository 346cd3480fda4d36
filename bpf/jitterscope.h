/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The ABI shared by the BPF programs and user space: types and constants, nothing else. */
#ifndef JITTERSCOPE_H
#define JITTERSCOPE_H

#define JS_MAX_CPUS 1024

/* Per measured CPU counters, one slot per CPU in a BPF_MAP_TYPE_ARRAY. */
struct js_cpu_counters {
	__u64 switches;   /* sched_switch events on this CPU */
	__u64 rb_drops;   /* failed ring-buffer reserves on this CPU */
};

_Static_assert(sizeof(struct js_cpu_counters) == 16, "js_cpu_counters ABI");

#endif /* JITTERSCOPE_H */
