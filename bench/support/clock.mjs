// One clock for every process of the machine, in milliseconds: times taken in the
// children of a fleet are compared with each other (who held the lock when, the span of
// a run).

/**
 * CLOCK_MONOTONIC, which all processes of a Linux machine share. Not
 * `performance.timeOrigin + performance.now()`: each process samples its time origin at
 * start, with two clock reads, and one preempted between them (8 children starting on 2
 * cores) was 4.7 ms off the others; holders on etcd then seemed to overlap.
 */
export function machineNow() {
  return Number(process.hrtime.bigint()) / 1e6;
}
