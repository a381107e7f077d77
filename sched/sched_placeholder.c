// Removed when sched/ gets its sources.
typedef int sched_placeholder_unused;
