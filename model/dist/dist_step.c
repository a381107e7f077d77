#include "model/dist/dist_step.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "model/objective.h"
#include "model/dist/placed_attention.h"
#include "model/dist/ring_attention.h"
#include "model/dist/cp_workspace.h"
#include "model/dist/ulysses_attention.h"
#include "sched/placement.h"

enum { DIST_MAX_LEVELS = 31 };

struct dist_step {
  dit_model *m;
  const dit_config *mc;
  const train_config *tc;
  const kernels_backend *kb;               // the model's
  const comm_backend *cb;                  // ring exchange and gradient all-reduce
  int max_tokens, max_clips, P;
  objective_device dev;                    // the wave's inputs, made on the backend
  float *wave_loss;                        // (loss_cap) [f32] backend: loss of each wave run
  int loss_cap, n_loss;                    // its capacity; waves run in this step
  objective_clip *chunks;                  // (max_runs) a wave's chunks, or its placed runs
  int *run_clip;                           // (max_runs) the group clip of each placed run
  int max_runs;                            // max_clips, or with a placement what runs need
  int64_t *totals;                         // (max_clips) whole-clip token counts
  ring_attention *ring[DIST_MAX_LEVELS];   // one per group size 2^i, made on first use
  ulysses_attention *uly[DIST_MAX_LEVELS]; // the same for Ulysses groups
  ulysses_attention *hyb[DIST_MAX_LEVELS]; // and hybrid groups: Ulysses over the block of u
  ring_attention *hyb_ring[DIST_MAX_LEVELS];  // with this ring over the stride group inside
  cp_workspace *ws;                        // the work buffers of all of them (one group runs)
  int64_t *super;                          // (max_clips) a hybrid block's super-chunk lengths
  placed_attention *placed[DIST_MAX_LEVELS];  // train.placement = blockwise: its groups
  const placement **pls;                   // (max_clips) the active placed group's clips'
  cost_mask place_mask;                    // and the mask they were made under
  placed_attention *active_placed;         // the placed group of the wave, or NULL
  int64_t kv_got, kv_plan;                 // K/V bytes its forwards received; the placements'
  ring_attention *active;                  // the ring of the wave being run, or NULL
  ulysses_attention *active_uly;           // its Ulysses group when it runs in that mode
  int active_k, active_me;                 // its group size, this rank's place in it
  int mask_set;                            // 1: the active ring has this microbatch's mask
  int n_buckets, issued;                   // gradient buckets; all-reduces started so far
  comm_request **bucket_req;               // (n_buckets)
  tsr_status bucket_err;                   // an error inside the bucket hook
  float *shard;                            // ZeRO 2: the gradient shard buckets are reduce-
  int shard_world;                         // scattered into (dist_step_set_shard), or NULL
  // ZeRO 2 without a whole gradient buffer (dit_create_bucket_grads): two bucket buffers,
  // the slices their reduce-scatters receive and the requests in flight
  float *slot[2], *slice[2];
  comm_request *slot_req[2];
  // ZeRO 3 (dist_step_set_weights): the masters' shard every bucket's weights are gathered
  // from, two weight slots (fp32, and the act copy: the same with fp32 activations) with the
  // bucket each holds (-1: none) and its gather in flight, and the wave's schedule of weight
  // needs (the model's order, model/dit.h dit_create_sharded) with the place reached in it
  const float *wshard;
  float *wslot[2];
  void *wact[2];
  int wbucket[2], wready[2];
  comm_request *wreq[2];
  int *wsched, wlen, wpos;
  void *eval_pred;                         // (max_tokens, P) [act] dist_step_eval's prediction
  float *eval_out;                         // (1 + max_clips) [f32] its loss and per-clip sse
};

// Starts the world all-reduce of the next gradient bucket (they go in bucket order on
// every rank, as MPI requires of collectives), and lets earlier ones progress.
static void issue_bucket(dist_step *ds) {
  if (ds->bucket_err || ds->issued >= ds->n_buckets) return;
  dit_bucket b = dit_get_bucket(ds->m, ds->issued);
  comm_group *world = comm_group_get(comm_size());
  float *g = dit_grads(ds->m) + b.offset;
  if (ds->shard)
    ds->bucket_err = ds->cb->ireduce_scatter_sum_f32(
        ds->cb, world, g, ds->shard + b.offset / (size_t)ds->shard_world,
        (int64_t)(b.numel / (size_t)ds->shard_world), &ds->bucket_req[ds->issued]);
  else
    ds->bucket_err = ds->cb->iallreduce_sum_f32(ds->cb, world, g, (int64_t)b.numel,
                                                &ds->bucket_req[ds->issued]);
  ds->issued++;
  for (int i = 0; i + 1 < ds->issued && !ds->bucket_err; i++) {
    int done;
    ds->bucket_err = ds->cb->test(ds->cb, ds->bucket_req[i], &done);
  }
}

// ---- ZeRO 3: each bucket's weights gathered before use, the next one prefetched ---------

static int weights_sharded(const dist_step *ds) { return ds->wshard != NULL; }

// Starts the world all-gather of bucket b's weights into slot s; the bucket that slot held
// loses its weights (NULL: a read of it would be a bug, and fails loudly).
static tsr_status gather_start(dist_step *ds, int s, int b) {
  if (ds->wbucket[s] >= 0) dit_set_bucket_weights(ds->m, ds->wbucket[s], NULL, NULL);
  size_t W = (size_t)ds->shard_world;
  dit_bucket k = dit_get_bucket(ds->m, b);
  ds->wbucket[s] = b, ds->wready[s] = 0;
  return ds->cb->iallgather(ds->cb, comm_group_get(comm_size()), ds->wshard + k.offset / W,
                            ds->wslot[s], (int64_t)(k.numel / W * sizeof(float)), &ds->wreq[s]);
}

// Slot s's gather done, its act copy made, and the model pointed at it.
static tsr_status gather_finish(dist_step *ds, int s) {
  if (ds->wready[s]) return TSR_OK;
  const kernels_backend *kb = ds->kb;
  int b = ds->wbucket[s];
  tsr_status st = ds->cb->wait(ds->cb, &ds->wreq[s]);
  if (!st && ds->wact[s] != ds->wslot[s])
    st = kb->cast(kb, ds->wact[s], kb->act_dtype, ds->wslot[s], KERNELS_F32,
                  dit_get_bucket(ds->m, b).numel);
  if (st) return st;
  dit_set_bucket_weights(ds->m, b, ds->wslot[s], ds->wact[s]);
  ds->wready[s] = 1;
  return TSR_OK;
}

// The model's weight hook: bucket b (the schedule's next need) is made available, and the
// gather of the need after it starts in the other slot, to run while b computes. Every rank
// makes the same calls in the same order (idle ones through wave_idle), so the world's
// gathers match one for one.
static tsr_status need_weights(void *ctx, int b) {
  dist_step *ds = ctx;
  if (ds->wpos >= ds->wlen || ds->wsched[ds->wpos] != b)
    return err_set(TSR_EINVAL, "ZeRO 3: the model asked for bucket %d's weights at step %d of "
                   "the wave, the schedule has %d there", b, ds->wpos,
                   ds->wpos < ds->wlen ? ds->wsched[ds->wpos] : -1);
  int s = ds->wbucket[0] == b ? 0 : ds->wbucket[1] == b ? 1 : -1;
  tsr_status st = TSR_OK;
  if (s < 0) {  // not prefetched (a wave's first need): into the slot of the older bucket
    s = ds->wbucket[0] < 0 || ds->wready[0] ? 0 : 1;
    st = gather_start(ds, s, b);
  }
  if (!st) st = gather_finish(ds, s);
  int next = ++ds->wpos < ds->wlen ? ds->wsched[ds->wpos] : -1;
  if (!st && next >= 0 && next != b && ds->wbucket[1 - s] != next)
    st = gather_start(ds, 1 - s, next);
  return st;
}

// A wave's forward as an idle rank makes it: every weight need of the forward (buckets
// depth + 1 down to 0), as the model would make them in a forward. Nothing without sharded
// weights.
static tsr_status idle_forward(dist_step *ds) {
  tsr_status st = TSR_OK;
  for (int i = ds->n_buckets - 1; weights_sharded(ds) && !st && i >= 0; i--)
    st = need_weights(ds, i);
  return st;
}

// The floats of the model's largest gradient bucket (a bucket buffer holds any one whole).
static size_t largest_bucket(const dist_step *ds) {
  size_t most = 0;
  for (int i = 0; i < ds->n_buckets; i++)
    if (dit_get_bucket(ds->m, i).numel > most) most = dit_get_bucket(ds->m, i).numel;
  return most;
}

// The wave's needs: the forward's (depth + 1 down to 0), then with a backward its (0 up to
// depth + 1); no weights held from the last step (the optimizer changed them) when `fresh`.
static void schedule_begin(dist_step *ds, int backward, int fresh) {
  int n = ds->n_buckets;
  ds->wlen = 0, ds->wpos = 0;
  for (int i = n - 1; i >= 0; i--) ds->wsched[ds->wlen++] = i;
  for (int i = 0; backward && i < n; i++) ds->wsched[ds->wlen++] = i;
  for (int s = 0; fresh && s < 2; s++) {
    if (ds->wbucket[s] >= 0) dit_set_bucket_weights(ds->m, ds->wbucket[s], NULL, NULL);
    ds->wbucket[s] = -1, ds->wready[s] = 0;
  }
}

tsr_status dist_step_set_weights(dist_step *ds, const float *shard) {
  if (!ds->shard_world)
    return err_set(TSR_EINVAL, "dist_step_set_weights: the gradient shard comes first "
                   "(dist_step_set_shard)");
  const kernels_backend *kb = ds->kb;
  const size_t most = largest_bucket(ds);
  tsr_status st = (ds->wsched = malloc(sizeof(int) * 2 * (size_t)ds->n_buckets))
                      ? TSR_OK : err_set(TSR_ENOMEM, "out of memory for the distributed step");
  for (int s = 0; s < 2 && !st; s++) {
    ds->wbucket[s] = -1;
    st = kb->alloc(kb, (void **)&ds->wslot[s], most * sizeof(float));
    ds->wact[s] = ds->wslot[s];
    if (!st && kb->act_dtype != KERNELS_F32) st = kb->alloc(kb, &ds->wact[s], kernels_act_bytes(kb, most));
  }
  if (st) return err_wrap(st, "train.zero = 3: two buckets of %zu weights: ", most);
  ds->wshard = shard;
  dit_set_weight_hook(ds->m, need_weights, ds);
  return TSR_OK;
}

// ---- ZeRO 2 with bucket buffers ---------------------------------------------------------

static int bucket_mode(const dist_step *ds) { return ds->slot[0] != NULL; }

// Bucket i of this wave is in slot i % 2: its reduce-scatter starts. Bucket i - 1's, started
// one bucket ago (it ran while the backward filled bucket i), is waited for and summed into
// the shard, and its slot, zeroed, takes bucket i + 1.
static void slot_bucket(dist_step *ds, int i) {
  if (ds->bucket_err) return;
  const kernels_backend *kb = ds->kb;
  comm_group *world = comm_group_get(comm_size());
  size_t W = (size_t)ds->shard_world;
  dit_bucket b = dit_get_bucket(ds->m, i);
  tsr_status st = ds->cb->ireduce_scatter_sum_f32(ds->cb, world, ds->slot[i % 2], ds->slice[i % 2],
                                                  (int64_t)(b.numel / W), &ds->slot_req[i % 2]);
  for (int j = i - 1; !st && j <= i; j++) {
    if (j < 0 || (j == i && i + 1 < ds->n_buckets)) continue;  // bucket i waits for i + 1
    dit_bucket bj = dit_get_bucket(ds->m, j);
    float *dst = ds->shard + bj.offset / W;
    st = ds->cb->wait(ds->cb, &ds->slot_req[j % 2]);
    if (!st) st = kb->add(kb, dst, dst, ds->slice[j % 2], bj.numel / W);
    if (!st && j + 2 < ds->n_buckets) {
      dit_bucket bn = dit_get_bucket(ds->m, j + 2);
      st = kb->memset_zero(kb, ds->slot[j % 2], bn.numel * sizeof(float));
      dit_set_bucket_grads(ds->m, j + 2, ds->slot[j % 2]);
    }
  }
  ds->bucket_err = st;
}

static void on_slot_bucket(void *ctx, int bucket) { slot_bucket(ctx, bucket); }

// Before a wave's backward: buckets 0 and 1 in the two slots, zeroed.
static tsr_status slots_begin(dist_step *ds) {
  for (int k = 0; k < 2 && k < ds->n_buckets; k++) {
    dit_bucket b = dit_get_bucket(ds->m, k);
    tsr_status st = ds->kb->memset_zero(ds->kb, ds->slot[k], b.numel * sizeof(float));
    if (st) return st;
    dit_set_bucket_grads(ds->m, k, ds->slot[k]);
  }
  return TSR_OK;
}

// A wave in which this rank has nothing to run: its reduce-scatters all the same, of zeros,
// and with sharded weights (ZeRO 3) its gathers, in the order a backward interleaves them
// (weights of bucket i before the reduce-scatter of bucket i), after the forward's.
static tsr_status slots_idle(dist_step *ds) {
  tsr_status st = slots_begin(ds);
  if (!st) st = idle_forward(ds);
  for (int i = 0; !st && i < ds->n_buckets; i++) {
    if (weights_sharded(ds) && (st = need_weights(ds, i))) break;
    slot_bucket(ds, i);
    st = ds->bucket_err;
  }
  return st;
}

tsr_status dist_step_set_shard(dist_step *ds, float *shard, int world) {
  ds->shard = shard;
  ds->shard_world = world;
  if (dit_grads(ds->m)) return TSR_OK;  // the whole buffer: reduce-scattered in the last wave
  const size_t most = largest_bucket(ds);
  tsr_status st = TSR_OK;
  for (int k = 0; k < 2 && !st; k++) {
    st = ds->kb->alloc(ds->kb, (void **)&ds->slot[k], most * sizeof(float));
    if (!st) st = ds->kb->alloc(ds->kb, (void **)&ds->slice[k], most / (size_t)world * sizeof(float));
  }
  return st ? err_wrap(st, "train.zero = 2: two gradient buckets of %zu floats: ", most) : TSR_OK;
}

// dit_backward's bucket hook during a rank's last wave: bucket i is final.
static void on_bucket(void *ctx, int bucket) {
  dist_step *ds = ctx;
  while (ds->issued <= bucket && !ds->bucket_err) issue_bucket(ds);
}

// A placed group's forward: the first of a microbatch gives the executor the clips'
// placements and this rank's positions (a collective); each counts the K/V bytes the
// all-to-all delivered (comm_alltoall_received) against the placements' count.
static tsr_status placed_forward(dist_step *ds, const dit_batch *b, void *out, float *lse,
                                 const void *q, const void *k, const void *v, int H, int Dh,
                                 float scale) {
  placed_attention *pa = ds->active_placed;
  // the group's clips: under train.noise_per_chunk the batch's clips are their segments
  const int n = b->attn_cu ? b->attn_clips : b->n_clips;
  tsr_status st = TSR_OK;
  if (!ds->mask_set &&
      (st = placed_attention_set_clips(pa, n, ds->pls, &ds->place_mask,
                                       config_mask(ds->mc), b->pos)))
    return st;
  ds->mask_set = 1;
  int64_t before = comm_alltoall_received();
  st = placed_attention_forward(pa, out, lse, q, k, v, H, Dh, scale);
  ds->kv_got += comm_alltoall_received() - before;
  int64_t plan_rows = 0;
  for (int c = 0; c < n; c++) plan_rows += ds->pls[c]->recv[ds->active_me];
  ds->kv_plan += 2 * plan_rows * (int64_t)kernels_act_bytes(ds->kb, (size_t)H * Dh);
  return st;
}

// dit_attention hook: the model's attention goes around the current group's ring.
static tsr_status hook_forward(void *ctx, const kernels_backend *kb, const dit_batch *b,
                               void *out, float *lse, const void *q, const void *k,
                               const void *v, int H, int Dh, float scale) {
  dist_step *ds = ctx;
  if (ds->active_placed) return placed_forward(ds, b, out, lse, q, k, v, H, Dh, scale);
  // under a mask every rank's positions are gathered once a microbatch, before its first
  // attention, by the group's ring or Ulysses (a hybrid's passes them to its inner ring)
  if (ds->mc->attn_mask != KERNELS_MASK_FULL && !ds->mask_set) {
    tsr_status st = ds->active_uly
                        ? ulysses_attention_set_mask(ds->active_uly, config_mask(ds->mc), b->pos)
                        : ring_attention_set_mask(ds->active, config_mask(ds->mc), b->pos);
    if (st) return st;
    ds->mask_set = 1;
  }
  if (ds->active_uly) return ulysses_attention_forward(ds->active_uly, out, lse, q, k, v, H, Dh, scale);
  return ring_attention_forward(ds->active, out, lse, q, k, v, H, Dh, scale);
}

static tsr_status hook_backward(void *ctx, const kernels_backend *kb, const dit_batch *b,
                                void *dq, void *dk, void *dv, const void *dout,
                                const void *q, const void *k, const void *v, const void *out,
                                const float *lse, int H, int Dh, float scale) {
  dist_step *ds = ctx;
  if (ds->active_placed)
    return placed_attention_backward(ds->active_placed, dq, dk, dv, dout, q, k, v, out, lse, H,
                                     Dh, scale);
  if (ds->active_uly)
    return ulysses_attention_backward(ds->active_uly, dq, dk, dv, dout, q, k, v, out, lse, H, Dh,
                                      scale);
  return ring_attention_backward(ds->active, dq, dk, dv, dout, q, k, v, out, lse, H, Dh, scale);
}

// A group of one rank attends locally (ring_attention_forward/backward call the backend's
// attention): the model may record it (recorded graphs, model/dit.h). Not under a mask: its
// positions are gathered (a collective) before the microbatch's first attention.
static int hook_recordable(void *ctx) {
  dist_step *ds = ctx;
  return ds->active && !ds->active_uly && ds->active_k == 1 &&
         ds->mc->attn_mask == KERNELS_MASK_FULL;
}

tsr_status dist_step_create(dist_step **out, dit_model *m, const comm_backend *cb,
                            const dit_config *mc, const train_config *tc, int max_tokens,
                            int max_clips) {
  *out = NULL;
  if (!cb) return err_set(TSR_EINVAL, "dist_step_create: no communication backend");
  if (cb->mem != (dit_backend(m)->device_memory ? COMM_MEM_DEVICE : COMM_MEM_HOST))
    return err_set(TSR_EINVAL,
                   "communication backend %s works on %s memory but compute backend %s on %s "
                   "memory: choose a matching pair (e.g. cpu with mpi, cuda with nccl)",
                   cb->name, cb->mem == COMM_MEM_DEVICE ? "device" : "host", dit_backend(m)->name,
                   dit_backend(m)->device_memory ? "device" : "host");
  dist_step *ds = calloc(1, sizeof *ds);
  if (!ds) return err_set(TSR_ENOMEM, "out of memory for the distributed step");
  ds->m = m;
  ds->mc = mc;
  ds->tc = tc;
  ds->kb = dit_backend(m);
  ds->cb = cb;
  ds->max_tokens = max_tokens;
  ds->max_clips = max_clips;
  ds->P = mc->pt * mc->ph * mc->pw * mc->channels;
  // a placement's runs: each holds a token, but a clip this rank holds none of (one empty run)
  ds->max_runs = dist_step_placed(mc, tc) ? max_tokens + max_clips : max_clips;
  tsr_status st = objective_device_alloc(&ds->dev, ds->kb, max_tokens, ds->max_runs, ds->P);
  if (!st) st = cp_workspace_create(&ds->ws, ds->kb);
  ds->chunks = calloc((size_t)ds->max_runs, sizeof *ds->chunks);
  ds->run_clip = calloc((size_t)ds->max_runs, sizeof *ds->run_clip);
  ds->pls = calloc((size_t)max_clips, sizeof *ds->pls);
  ds->totals = calloc((size_t)max_clips, sizeof *ds->totals);
  ds->super = calloc((size_t)max_clips, sizeof *ds->super);
  ds->n_buckets = dit_num_buckets(m);
  ds->bucket_req = calloc((size_t)ds->n_buckets + 1, sizeof *ds->bucket_req);  // 0 when frozen
  if (!st && (!ds->chunks || !ds->run_clip || !ds->pls || !ds->totals || !ds->super ||
              !ds->bucket_req))
    st = err_set(TSR_ENOMEM, "out of memory for the distributed step");
  if (st) {
    dist_step_free(&ds);
    return st;
  }
  dit_attention hook = {.forward = hook_forward, .backward = hook_backward, .ctx = ds,
                        .recordable = hook_recordable};
  dit_set_attention(m, &hook);
  *out = ds;
  return TSR_OK;
}

void dist_step_set_null_caption(dist_step *ds, const float *emb, int tokens) {
  objective_device_set_null_caption(&ds->dev, emb, tokens);
}

void dist_step_free(dist_step **pds) {
  dist_step *ds = *pds;
  if (!ds) return;
  for (int i = 0; i < DIST_MAX_LEVELS; i++) {
    ring_attention_free(&ds->ring[i]);
    ulysses_attention_free(&ds->uly[i]);
    ulysses_attention_free(&ds->hyb[i]);
    ring_attention_free(&ds->hyb_ring[i]);
    placed_attention_free(&ds->placed[i]);
  }
  cp_workspace_free(&ds->ws);
  objective_device_free(&ds->dev);
  if (ds->wave_loss) ds->kb->free(ds->kb, ds->wave_loss);
  if (ds->eval_pred) ds->kb->free(ds->kb, ds->eval_pred);
  if (ds->eval_out) ds->kb->free(ds->kb, ds->eval_out);
  for (int k = 0; k < 2; k++) {
    ds->cb->wait(ds->cb, &ds->wreq[k]);
    if (ds->wslot[k]) ds->kb->free(ds->kb, ds->wslot[k]);
    if (ds->wact[k] && ds->wact[k] != ds->wslot[k]) ds->kb->free(ds->kb, ds->wact[k]);
    ds->cb->wait(ds->cb, &ds->slot_req[k]);
    if (ds->slot[k]) ds->kb->free(ds->kb, ds->slot[k]);
    if (ds->slice[k]) ds->kb->free(ds->kb, ds->slice[k]);
  }
  for (int i = 0; ds->bucket_req && i < ds->n_buckets; i++) ds->cb->wait(ds->cb, &ds->bucket_req[i]);
  free(ds->bucket_req);
  free(ds->chunks);
  free(ds->run_clip);
  free(ds->pls);
  free(ds->totals);
  free(ds->super);
  free(ds->wsched);
  free(ds);
  *pds = NULL;
}

static int log2i(int k) {
  int l = 0;
  while ((1 << l) < k) l++;
  return l;
}

// This rank's group in wave w, or NULL if the wave gives it nothing to do.
static const plan_group *my_group(const plan *p, int w, int rank) {
  for (int g = p->wave_off[w]; g < p->wave_off[w + 1]; g++) {
    const plan_group *pg = &p->groups[g];
    if (rank >= pg->first_rank && rank < pg->first_rank + pg->size) return pg;
  }
  return NULL;
}

// Makes group pg's attention active in its plan mode (sched/cost.h), over aligned group g,
// with ds->totals (and for a hybrid group over blocks of u ranks, ds->super) its clips; a
// placed group's is the executor of its placements.
static tsr_status activate(dist_step *ds, const plan_group *pg, comm_group *g, int u,
                           int placed) {
  const int k = pg->size, lv = log2i(k);
  tsr_status st = TSR_OK;
  ds->mask_set = 0;
  ds->active_uly = NULL;
  ds->active_placed = NULL;
  ds->active_k = k;
  if (placed) {  // the runs of prepare_group, over the group's placements (ds->pls)
    if (!ds->placed[lv] && (st = placed_attention_create(&ds->placed[lv], ds->kb, ds->cb, g)))
      return st;
    ds->active_placed = ds->placed[lv];
    ds->active = NULL;
    return TSR_OK;
  }
  if (!ds->ring[lv]) {
    if ((st = ring_attention_create(&ds->ring[lv], ds->kb, ds->cb, g))) return st;
    ring_attention_use_workspace(ds->ring[lv], ds->ws, CP_WS_GROUP);
  }
  ds->active = ds->ring[lv];
  if (u) {  // Ulysses over this rank's block of u, the ring over its stride group inside
    comm_group *sg = comm_stride_group(k), *block = comm_group_get(u);
    if (!sg || !block)
      return err_set(TSR_EINVAL, "a hybrid CP group of %d ranks needs the stride groups of %d "
                     "ranks per node (comm_stride_groups_init)", k, u);
    if (!ds->hyb_ring[lv]) {
      if ((st = ring_attention_create(&ds->hyb_ring[lv], ds->kb, ds->cb, sg))) return st;
      ring_attention_use_workspace(ds->hyb_ring[lv], ds->ws, CP_WS_INNER);
    }
    if (!ds->hyb[lv]) {
      if ((st = ulysses_attention_create(&ds->hyb[lv], ds->kb, ds->cb, block, ds->hyb_ring[lv])))
        return st;
      ulysses_attention_use_workspace(ds->hyb[lv], ds->ws, CP_WS_GROUP);
      ulysses_attention_set_chunks(ds->hyb[lv], ds->tc->ulysses_chunks);
    }
    ds->active_uly = ds->hyb[lv];
    if ((st = ring_attention_set_clips(ds->hyb_ring[lv], pg->nclips, ds->totals))) return st;
    return ulysses_attention_set_clips(ds->hyb[lv], pg->nclips, ds->super);
  }
  if ((pg->mode == COST_CP_ULYSSES || pg->mode == COST_CP_HYBRID) && k > 1) {
    if (!ds->uly[lv]) {
      if ((st = ulysses_attention_create(&ds->uly[lv], ds->kb, ds->cb, g, NULL))) return st;
      ulysses_attention_use_workspace(ds->uly[lv], ds->ws, CP_WS_GROUP);
      ulysses_attention_set_chunks(ds->uly[lv], ds->tc->ulysses_chunks);
    }
    ds->active_uly = ds->uly[lv];
    return ulysses_attention_set_clips(ds->active_uly, pg->nclips, ds->totals);
  }
  return ring_attention_set_clips(ds->active, pg->nclips, ds->totals);
}

// Tokens [first, first + len) of clip c as the objective's chunk. CP splits the queries; the
// caption is replicated: every chunk gets all of it.
static objective_clip chunk_of(const dist_step *ds, const dist_clip *c, int64_t first,
                               int64_t len) {
  size_t token_bytes = (size_t)ds->P * kernels_tokens_size(c->tokens_dtype);
  return (objective_clip){.clip_id = c->id, .total_tokens = (int64_t)c->T * c->H * c->W,
                          .first_token = first, .len = (int)len, .T = c->T, .H = c->H,
                          .W = c->W, .label = c->label,
                          .tokens = (const char *)c->tokens + (size_t)first * token_bytes,
                          .tokens_dtype = c->tokens_dtype, .text = c->text,
                          .text_tokens = c->text_tokens, .text_dtype = c->text_dtype};
}

// Clip c, the group's i-th, placed blockwise over the group (placement_for, under the mask
// of its frames' grid; every clip of a group must share it, as placed attention prices the
// mask's blocks once): ds->pls[i], and the runs of consecutive tokens group rank `me` holds
// of k appended to ds->chunks at *nruns (one empty run when it holds none), their tokens added
// to *tokens.
static tsr_status placed_runs(dist_step *ds, const dist_clip *c, int i, int k, int me,
                              int *nruns, int64_t *tokens) {
  cost_mask cm = config_cost_mask(ds->mc, c->H, c->W);
  cm.place = COST_PLACE_BLOCKWISE, cm.pin = config_cost_pin(ds->tc->placement);
  if (i && (cm.rows != ds->place_mask.rows || cm.cols != ds->place_mask.cols))
    return err_set(TSR_EINVAL, "train.placement = blockwise: clip %lld has frames of %d x %d "
                   "tokens, another clip of its CP group %lld x %lld; a group's clips must share "
                   "one frame grid (or set train.placement = contiguous)", (long long)c->id, c->H,
                   c->W, (long long)ds->place_mask.rows, (long long)ds->place_mask.cols);
  ds->place_mask = cm;
  const placement *pl = NULL;
  tsr_status st = placement_for(&cm, (int64_t)c->T * c->H * c->W, k, &pl);
  if (st) return err_wrap(st, "placing clip %lld: ", (long long)c->id);
  ds->pls[i] = pl;
  int first_run = *nruns;
  for (int s = 0; s < pl->nseg; s++) {
    const place_seg *g = &pl->seg[s];
    if (g->rank != me) continue;
    objective_clip *prev = *nruns > first_run ? &ds->chunks[*nruns - 1] : NULL;
    if (prev && prev->first_token + prev->len == g->first) {
      prev->len += (int)g->len;
    } else {
      if (*nruns >= ds->max_runs)
        return err_set(TSR_EINVAL, "placing clip %lld: more than %d runs of tokens on this rank",
                       (long long)c->id, ds->max_runs);
      ds->run_clip[*nruns] = i;
      ds->chunks[(*nruns)++] = chunk_of(ds, c, g->first, g->len);
    }
    *tokens += g->len;
  }
  if (*nruns == first_run) {  // none of its tokens here: the clip still takes part, empty
    if (*nruns >= ds->max_runs)
      return err_set(TSR_EINVAL, "placing clip %lld: more than %d runs of tokens on this rank",
                     (long long)c->id, ds->max_runs);
    ds->run_clip[*nruns] = i;
    ds->chunks[(*nruns)++] = chunk_of(ds, c, 0, 0);
  }
  return TSR_OK;
}

// This rank's chunks of group pg's clips and their objective inputs (config tc, key step)
// in ds->dev, with the group's attention active: ring, Ulysses or hybrid, its plan mode (a
// hybrid group's chunks are hybrid_chunk's).
static tsr_status prepare_group(dist_step *ds, const plan *p, const plan_group *pg,
                                const dist_clip *clips, int nclips, const train_config *tc,
                                int64_t step) {
  const int k = pg->size, me = comm_rank() - pg->first_rank;
  // a hybrid group spans blocks of u ranks (the stride groups' u); inside one it is Ulysses
  const int u = pg->mode == COST_CP_HYBRID ? comm_stride_u() : 0, hybrid = u > 1 && k > u;
  if (pg->nclips > ds->max_clips)
    return err_set(TSR_EINVAL, "a group of the plan has %d clips; this rank was set up for %d",
                   pg->nclips, ds->max_clips);
  const int placed = dist_step_placed(ds->mc, ds->tc) && pg->mode == COST_CP_RING && k > 1;
  int64_t tokens = 0;
  int nruns = 0;
  for (int i = 0; i < pg->nclips; i++) {
    int ci = p->clip_index[pg->clip_off + i];
    if (ci < 0 || ci >= nclips)
      return err_set(TSR_EINVAL, "the plan names clip %d of a batch of %d", ci, nclips);
    const dist_clip *c = &clips[ci];
    int64_t total = (int64_t)c->T * c->H * c->W, first, len, sf;
    if (hybrid) {
      hybrid_chunk(total, k, u, me, &first, &len);
      ring_chunk(total, k / u, me / u, &sf, &ds->super[i]);  // the block's super-chunk
    } else {
      ring_chunk(total, k, me, &first, &len);
    }
    ds->totals[i] = total;
    if (placed) {
      tsr_status st = placed_runs(ds, c, i, k, me, &nruns, &tokens);
      if (st) return st;
      continue;
    }
    ds->chunks[i] = chunk_of(ds, c, first, len);
    tokens += len;
  }
  if (tokens > ds->max_tokens)
    return err_set(TSR_EINVAL,
                   "this rank's chunks of a CP-%d group hold %lld tokens, more than the %d it "
                   "was set up for (mem_tokens)", k, (long long)tokens, ds->max_tokens);
  comm_group *g = comm_group_get(k);
  if (!g || comm_group_first(g) != pg->first_rank)
    return err_set(TSR_EINVAL, "the plan's group [%d, %d) is not a group of this world of %d ranks",
                   pg->first_rank, pg->first_rank + k, comm_size());
  ds->active_me = me;
  tsr_status st = activate(ds, pg, g, hybrid ? u : 0, placed);
  if (st) return st;
  if (placed)
    return objective_device_build_runs(&ds->dev, ds->mc, tc, step, nclips, ds->chunks,
                                       ds->run_clip, nruns);
  return objective_device_build(&ds->dev, ds->mc, tc, step, nclips, ds->chunks, pg->nclips);
}

static tsr_status run_group(dist_step *ds, const plan *p, const plan_group *pg,
                            const dist_clip *clips, int nclips, int64_t step, int last) {
  tsr_status st = prepare_group(ds, p, pg, clips, nclips, ds->tc, step);
  if (st) return st;
  // the wave's loss stays on the backend until the step's last wave (dist_step_run)
  if ((st = dit_forward_dev(ds->m, &ds->dev.batch, NULL, ds->wave_loss + ds->n_loss++))) return st;
  // In this rank's last wave each gradient bucket is final as soon as backward has passed
  // it: its world all-reduce starts then, overlapping the rest of the backward. Alone in the
  // world there is nothing to overlap: dist_step_reduce issues them all, and the backward
  // stays free of host work (it may be recorded as a graph, model/dit.h).
  if (bucket_mode(ds)) {  // ZeRO 2 without a whole gradient: every wave's buckets
    if ((st = slots_begin(ds))) return st;
    dit_set_bucket_hook(ds->m, on_slot_bucket, ds);
  } else if (last && comm_size() > 1) {
    dit_set_bucket_hook(ds->m, on_bucket, ds);
  }
  st = dit_backward(ds->m, &ds->dev.batch);
  dit_set_bucket_hook(ds->m, NULL, NULL);
  if (st) return st;
  return ds->bucket_err;
}

tsr_status dist_step_run(dist_step *ds, const plan *p, const dist_clip *clips, int nclips,
                         int64_t step, double *loss, int *waves) {
  if (p->ranks != comm_size())
    return err_set(TSR_EINVAL, "the plan is for %d ranks but the world has %d", p->ranks,
                   comm_size());
  for (int i = 0; i < ds->n_buckets; i++)
    if (ds->bucket_req[i]) return err_set(TSR_EINVAL, "dist_step_run: the last step was not reduced");
  ds->issued = 0;
  ds->bucket_err = TSR_OK;
  ds->kv_got = ds->kv_plan = 0;
  if (bucket_mode(ds)) {  // the shard sums this step's waves
    tsr_status st = ds->kb->memset_zero(ds->kb, ds->shard,
                                        dit_num_params(ds->m) / (size_t)ds->shard_world * sizeof(float));
    if (st) return st;
  }
  int last = -1, busy = 0;  // this rank's last wave with work, waves with work
  for (int w = 0; w < p->nwaves; w++) {
    const plan_group *pg = my_group(p, w, comm_rank());
    if (pg && pg->nclips) last = w, busy++;
  }
  if (waves) *waves = busy;
  if (busy > ds->loss_cap) {  // one loss slot per wave this rank runs
    if (ds->wave_loss) ds->kb->free(ds->kb, ds->wave_loss);
    ds->wave_loss = NULL, ds->loss_cap = 0;
    tsr_status st = ds->kb->alloc(ds->kb, (void **)&ds->wave_loss, sizeof(float) * (size_t)busy);
    if (st) return st;
    ds->loss_cap = busy;
  }
  ds->n_loss = 0;
  for (int w = 0; w < p->nwaves; w++) {
    const plan_group *pg = my_group(p, w, comm_rank());
    if (weights_sharded(ds)) schedule_begin(ds, 1, w == 0);
    if (!pg || pg->nclips == 0) {  // nothing to do in this wave (but its reduce-scatters)
      tsr_status st = bucket_mode(ds) ? slots_idle(ds) : TSR_OK;
      if (st) return err_wrap(st, "wave %d (idle): ", w);
      continue;
    }
    tsr_status st = run_group(ds, p, pg, clips, nclips, step, w == last);
    if (st) return err_wrap(st, "wave %d, group [%d, %d): ", w, pg->first_rank,
                            pg->first_rank + pg->size);
  }
  if (!busy) return TSR_OK;
  // The step's losses reach the host once, summed in wave order in double.
  float lh[busy];
  tsr_status st = ds->kb->to_host(ds->kb, lh, ds->wave_loss, sizeof(float) * (size_t)busy);
  for (int i = 0; !st && i < busy; i++) *loss += lh[i];
  return st;
}

tsr_status dist_step_eval(dist_step *ds, const plan *p, const dist_clip *clips, int nclips,
                          const train_config *tc, int64_t step, double *sse) {
  if (p->ranks != comm_size())
    return err_set(TSR_EINVAL, "the plan is for %d ranks but the world has %d", p->ranks,
                   comm_size());
  const kernels_backend *kb = ds->kb;
  tsr_status st = TSR_OK;
  if (!ds->eval_pred &&
      (st = kb->alloc(kb, &ds->eval_pred, kernels_act_bytes(kb, (size_t)ds->max_tokens * ds->P))))
    return st;
  if (!ds->eval_out &&
      (st = kb->alloc(kb, (void **)&ds->eval_out, sizeof(float) * (1 + (size_t)ds->max_clips))))
    return st;
  float *part = malloc(sizeof(float) * (size_t)ds->max_clips);
  if (!part) return err_set(TSR_ENOMEM, "validation: out of memory");
  for (int w = 0; w < p->nwaves && !st; w++) {
    const plan_group *pg = my_group(p, w, comm_rank());
    if (weights_sharded(ds)) schedule_begin(ds, 0, w == 0);
    if (!pg || pg->nclips == 0) {  // with sharded weights the world's gathers all the same
      st = idle_forward(ds);
      continue;
    }
    if ((st = prepare_group(ds, p, pg, clips, nclips, tc, step))) break;
    const dit_batch *b = &ds->dev.batch;
    dit_batch fwd = *b;  // prediction only: the squared errors come per clip below
    fwd.target = NULL, fwd.loss_weight = NULL;
    if ((st = dit_forward_dev(ds->m, &fwd, ds->eval_pred, NULL))) break;
    if ((st = kb->mse_forward(kb, ds->eval_out, ds->eval_out + 1, ds->eval_pred, b->target,
                              b->loss_weight, b->cu_seqlens, b->n_clips, b->L, ds->P)))
      break;
    if ((st = kb->to_host(kb, part, ds->eval_out + 1, sizeof(float) * (size_t)pg->nclips))) break;
    for (int i = 0; i < pg->nclips; i++) sse[p->clip_index[pg->clip_off + i]] += part[i];
  }
  free(part);
  return st ? err_wrap(st, "validation: ") : TSR_OK;
}

int dist_step_placed(const dit_config *mc, const train_config *tc) {
  return tc->placement != TRAIN_PLACE_CONTIGUOUS && mc->attn_mask != KERNELS_MASK_FULL;
}

int64_t dist_step_placed_tokens(const dit_config *mc, const train_config *tc, int64_t mem_tokens) {
  return dist_step_placed(mc, tc) ? mem_tokens + mem_tokens / 20 : mem_tokens;
}

void dist_step_placed_kv(const dist_step *ds, int64_t *got, int64_t *plan) {
  *got = ds->kv_got, *plan = ds->kv_plan;
}

tsr_status dist_step_reduce(dist_step *ds, double *loss) {
  comm_group *world = comm_group_get(comm_size());
  if (!world) return err_set(TSR_EINVAL, "the group set is not initialised (comm_groups_init)");
  // ranks idle at the end (ZeRO 2 with bucket buffers: every wave reduced its own)
  while (!bucket_mode(ds) && ds->issued < ds->n_buckets && !ds->bucket_err) issue_bucket(ds);
  tsr_status st = ds->bucket_err;
  for (int i = 0; i < ds->n_buckets; i++) {
    tsr_status w = ds->cb->wait(ds->cb, &ds->bucket_req[i]);
    if (!st) st = w;
  }
  if (!st) st = comm_allreduce_sum_f64(loss, 1);
  return st;
}
