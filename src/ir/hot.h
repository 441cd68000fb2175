// Internal: inlining hints for the hot loops (the execution core's posting
// and hooks, the proof's checks, the dependency rules they call): forced
// inline so that a policy's constants (its transport model) fold away; the
// paths for rare cases stay out of line.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define PIPEPLAN_HOT __attribute__((always_inline)) inline
#define PIPEPLAN_HOT_LAMBDA __attribute__((always_inline))
#define PIPEPLAN_COLD __attribute__((noinline))
#else
#define PIPEPLAN_HOT inline
#define PIPEPLAN_HOT_LAMBDA
#define PIPEPLAN_COLD
#endif
