// sched/plan.h — the plan of one global batch: waves of aligned power-of-two CP groups,
// its validation and its simulation.
//
// A plan is a list of waves. In each wave every rank 0..N-1 (any N >= 1) is in exactly one
// group; a group is an aligned block of ranks [first, first + size) with size a power of
// two, first % size == 0 and first + size <= N, holds a list of clips (possibly none) and has a CP mode (ring or
// Ulysses, sched/cost.h). Clips are named by
// their index in the batch (0..nclips-1); every clip appears exactly once in a plan.
// Rank p of a group holds chunk p of each of its clips, ceil(L/size) tokens each, and
// the sum over the group's clips must be <= mem_tokens.
//
// Timing (plan_simulate): a group with clips starts when every one of its ranks has
// finished its groups of earlier waves and takes cost_group_time(); an empty group takes
// no time and does not synchronise its ranks (its ranks simply have nothing to do in
// that wave). The step ends when the last rank finishes, plus the all-reduce. So waves
// are an order per rank, not barriers across ranks — except under ZeRO stage >= 2
// (cost_zero_lockstep, sched/cost.h): every wave then ends in world collectives, so its
// groups all start when the previous wave and its exposed ZeRO communication are done.
// ZeRO's exposed communication (cost_zero_step, and cost_zero_wave of every wave) is added.
//
// Storage: groups of wave w are groups[wave_off[w] .. wave_off[w+1]); the clips of a
// group are clip_index[g.clip_off .. g.clip_off + g.nclips). Ownership: plan_free.
#ifndef TESSERA_SCHED_PLAN_H
#define TESSERA_SCHED_PLAN_H

#include <stdint.h>
#include "core/err.h"
#include "sched/cost.h"

typedef struct {
  int32_t first_rank, size;  // aligned block [first_rank, first_rank + size)
  int32_t clip_off, nclips;  // its clips: clip_index[clip_off .. clip_off + nclips)
  int32_t mode;              // cost_cp_mode: how its ranks split attention (ring, Ulysses)
} plan_group;

typedef struct {
  int32_t ranks;              // N
  int32_t nwaves;
  int32_t *wave_off;          // (nwaves + 1)
  int32_t ngroups;
  plan_group *groups;         // (ngroups)
  int32_t nrefs;
  int32_t *clip_index;        // (nrefs) batch indices of the clips of all groups
  int32_t cap_waves, cap_groups, cap_refs;  // allocated sizes
  int32_t wave_open;          // a wave was begun and not yet closed
  uint8_t *cover;             // (ranks) builder scratch: rank is in a group of the open wave
} plan;

// ---- building -------------------------------------------------------------------------
// plan_init; then per wave: plan_wave_begin, plan_add_group for groups with clips (and
// empty ones if wanted), plan_wave_end, which fills ranks not yet in a group of the wave
// with the largest aligned empty groups. Builder errors: TSR_ENOMEM, or TSR_EINVAL for a
// block that is unaligned, out of range or overlaps a group of the same wave.
void plan_init(plan *p, int ranks);
void plan_free(plan *p);
void plan_reset(plan *p);  // empties p, keeps its memory and rank count
tsr_status plan_wave_begin(plan *p);
// clips: (nclips) batch indices.
tsr_status plan_add_group(plan *p, int first_rank, int size, const int32_t *clips, int nclips);
tsr_status plan_wave_end(plan *p);
tsr_status plan_copy(plan *dst, const plan *src);

// One group of an assignment for plan_build.
typedef struct {
  int32_t wave, first_rank, size;
} plan_slot;
// Builds *out (plan_init'ed) from ngroups slots (ngroups) and the slot of every clip,
// slot_of (nclips): the groups of each wave in rank order, the clips of a group in batch
// order, every other rank of a wave in empty groups. Slots of one wave must not overlap.
tsr_status plan_build(plan *out, const plan_slot *slots, int ngroups, const int32_t *slot_of,
                      int nclips);

// ---- checking and timing --------------------------------------------------------------
// Checks every rule of the header comment against a batch of nclips clips of tokens
// (nclips) on cluster `cl`. TSR_EINVAL with a message naming the wave, group or clip.
tsr_status plan_validate(const plan *p, const int64_t *tokens, int nclips,
                         const sched_cluster *cl);

typedef struct {
  double step_s;       // makespan + allreduce + ZeRO's step all-gather (cost_zero_step)
  double makespan_s;   // last rank's finish time
  double busy_rank_s;  // sum over groups of size * time
  double idle_frac;    // 1 - busy_rank_s / (N * makespan_s); 0 if makespan is 0
  int64_t groups_used; // groups with clips
  double zero_s;       // ZeRO's exposed communication of the step: cost_zero_step + the
                       // cost_zero_wave of every wave (inside makespan_s)
} plan_sim;

// Replays plan `p` for clips of tokens (indexed by batch index). rank_end: (N) finish
// time of each rank, or NULL. group_start: (ngroups) start time of each group, or NULL.
// Fails only with TSR_ENOMEM.
tsr_status plan_simulate(const plan *p, const int64_t *tokens, const cost_model *cm,
                   const sched_cluster *cl, plan_sim *out, double *rank_end,
                   double *group_start);

// The time of group gi of p (its clips on its ranks in its mode, sched/cost.h; a masked
// ring group priced by its most loaded rank under cm->mask.place, and placed blockwise by
// the placed executor's exchange: cost_placed_time), 0 for an empty group: what
// plan_simulate adds to its ranks' timelines.
double plan_group_time(const plan *p, int gi, const int64_t *tokens, const cost_model *cm,
                       const sched_cluster *cl);

// Gives every group of p the mode cost_group_mode picks for its clips under cm (groups are
// made in ring mode; every plan of the scheduler has its modes set this way).
void plan_choose_modes(plan *p, const int64_t *tokens, const cost_model *cm,
                       const sched_cluster *cl);
// For lockstep execution (ZeRO stage >= 2, cost_zero_lockstep: every wave ends on every rank
// together, so a plan takes the sum over its waves of their longest group): *out (plan_init'ed)
// = the groups of src with clips, the same ranks and clips, in new waves: longest first (their
// time under cm), each into the first wave whose ranks it needs are free, so that long groups
// share waves and short ones share others. Every rank is still in one group a wave; the modes
// are chosen again (plan_choose_modes). src: a valid plan of nclips clips of tokens.
tsr_status plan_rewave(const plan *src, const int64_t *tokens, int nclips, const cost_model *cm,
                       const sched_cluster *cl, plan *out);

// Adds the number of clips run in groups of more than one rank in each mode to
// hist[mode]; hist: (COST_CP_NMODES).
void plan_mode_histogram(const plan *p, int64_t *hist);

// Adds the number of clips run at each CP size to hist[log2(size)]; hist: (log2(N) + 1).
void plan_cp_histogram(const plan *p, int64_t *hist);

#endif
