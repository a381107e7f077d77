// model/train/memory.c — the trainer's memory model in bytes and the counting backend that
// checks it (model/train/memory.h).
#include "model/train/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/log.h"
#include "model/dist/dist_step.h"
#include "model/dist/placed_attention.h"
#include "model/dist/ring_attention.h"
#include "model/dist/ulysses_attention.h"
#include "sched/cost.h"
#include "model/dit.h"
#include "model/lora.h"
#include "model/objective.h"
#include "model/train/step.h"

// Activation arena bytes (working copy of the weights excluded) of config mc at L tokens.
static tsr_status arena(const dit_config *mc, kernels_dtype act, int64_t L, int64_t C,
                        size_t *bytes) {
  dit_memory dm;
  tsr_status st = dit_memory_bytes(mc, act, L, C, &dm);
  *bytes = dm.activations;
  return st;
}

// Bytes per token of one DiT block's activations: the arena's slope in L, difference of
// depth and depth - 1 (of 2 and 1 at depth 1; depth + 1 would leave model.depth's range at
// its maximum).
static tsr_status per_token_block(const dit_config *mc, kernels_dtype act, int recompute,
                                  double *out) {
  enum { L1 = 1024, L2 = 2048, C = 1 };
  dit_config a = *mc, b = *mc;
  a.recompute = b.recompute = recompute;
  if (mc->depth > 1) a.depth = mc->depth - 1;
  else b.depth = 2;
  size_t a1, a2, b1, b2;
  tsr_status st = arena(&a, act, L1, C, &a1);
  if (!st) st = arena(&a, act, L2, C, &a2);
  if (!st) st = arena(&b, act, L1, C, &b1);
  if (!st) st = arena(&b, act, L2, C, &b2);
  if (!st) *out = ((double)(b2 - b1) - (double)(a2 - a1)) / (L2 - L1);
  return st;
}

// What the adapters of tc add to a model of config mc (dit_lora_memory): np parameters,
// their weights' bytes wb (fp32 masters, and the act-dtype working copy unless fp32) and
// their activation buffer ab. Their gradient buffer is np floats more.
static tsr_status lora_bytes(const dit_config *mc, const train_config *tc, kernels_dtype act,
                             int64_t tokens, int clips, int frozen, int shard_ranks, size_t *np,
                             size_t *wb, size_t *ab) {
  lora_config lc = train_lora_config(tc);
  lc.shard_ranks = shard_ranks;  // train.zero: padded to equal slices (step.c lora_setup)
  tsr_status st = dit_lora_memory(mc, &lc, act, (int)tokens, clips, frozen, np, ab);
  *wb = *np * sizeof(float) + (act != KERNELS_F32 ? *np * kernels_dtype_size(act) : 0);
  return st;
}

tsr_status train_memory_model(const dit_config *mc, const train_config *tc, int device,
                              int ranks, int64_t tokens, int value_bytes, train_memory *out) {
  memset(out, 0, sizeof *out);
  if (tokens < 1 || ranks < 1)
    return err_set(TSR_EINVAL, "memory model: %lld tokens on %d ranks", (long long)tokens, ranks);
  kernels_dtype act = tc->precision;
  int64_t C = tc->global_batch < tokens ? tc->global_batch : tokens;
  if (tokens <= INT32_MAX / 4) C = objective_max_segments(mc, tc, (int)tokens, (int)C);
  // train.placement = blockwise: up to 5% more tokens a rank than the planner's limit, held
  // as runs of tokens (model/dist/dist_step.h); the buffers below are made for Lh tokens
  const int placed = dist_step_placed(mc, tc);
  const int64_t Lh = dist_step_placed_tokens(mc, tc, tokens);
  dit_memory dm;
  dit_config zmc = *mc;  // train.zero: the buckets padded for equal slices (trainer_setup)
  const int base_zero = tc->lora_rank > 0 ? 0 : tc->zero;  // LoRA: the adapters' state only
  zmc.shard_ranks = base_zero > 0 ? ranks : 0;
  tsr_status st = dit_memory_bytes(&zmc, act, Lh, C, &dm);
  if (st) return st;
  int P = mc->pt * mc->ph * mc->pw * mc->channels;
  size_t asz = kernels_dtype_size(act);  // bytes of an activation value
  out->tokens = tokens;
  out->clips = C;
  out->weights = dm.params + dm.act_weights;
  out->grads = dm.grads;
  out->optimizer = 3 * dm.n_params * sizeof(float);  // AdamW m, v and the EMA (step.c)
  out->zero = tc->zero;
  if (base_zero > 0) {  // model/train/zero.h: the state of this rank's shard, S floats each
    size_t S = dm.n_params / (size_t)ranks * sizeof(float), B = dm.largest_bucket * sizeof(float);
    out->shard = S;
    out->weights += S;    // the fp32 masters of the shard beside the full working weights
    out->grads += S;      // the shard's gradient beside the full buffer backward fills
    out->optimizer = 3 * S + B;  // + the bucket a checkpoint's sets are put together in
    // stage 2: no whole gradient; two bucket buffers and the slices they reduce-scatter into
    if (tc->zero >= 2) out->grads = S + 2 * B + 2 * (B / (size_t)ranks);
    // stage 3: no whole weights either (model/dist/dist_step.h dist_step_set_weights): the
    // masters' shard and two bucket slots of gathered weights, fp32 and their act-dtype
    // copy (the bucket computing and the next one, prefetched)
    if (tc->zero == 3)
      out->weights = S + 2 * B + (act != KERNELS_F32 ? 2 * dm.largest_bucket * asz : 0);
  }
  out->activations = dm.activations;
  out->inputs = objective_device_bytes(act, (int)Lh, (int)(placed ? Lh + C : C), P);
  // + the stored tokens as uploaded (objective_device_build grows that buffer on first
  // use): value_bytes a value, 1 for pixels, 2-4 for latents
  size_t vb = value_bytes > 1 ? (size_t)value_bytes : 1;
  out->inputs += (size_t)Lh * (size_t)P * vb;
  // + the captions of a text model as uploaded and cast (objective.c grow_text): at most
  // C * text_len tokens, grown with half again and 16 of room, raw fp32 and act dtype
  if (mc->text_dim > 0) {
    size_t Lt = (size_t)C * (size_t)mc->text_len, cap = Lt + Lt / 2 + 16;
    out->inputs += cap * (size_t)mc->text_dim * (sizeof(float) + asz);
  }
  // CP attention (model/dist/cp_workspace.h): every group size's index arrays, and ONE
  // workspace whose two regions grow to the most any group that may run asks: ring groups
  // of every size, Ulysses groups and hybrid groups (a Ulysses block of u in region 0, its
  // ring over k/u in region 1; the most over the u a node may have) when train.cp_mode
  // allows them
  const int modes = config_cost_modes(tc->cp_mode), H = mc->heads, Dh = mc->hidden / mc->heads;
  size_t region[2] = {0, 0};
  for (int k = 1; k <= ranks; k *= 2) {
    out->ring += ring_attention_index_bytes(k, (int)C);
    size_t r0 = ring_attention_work_bytes(act, k, tokens, H, Dh);
    // Ulysses (and hybrid inside a node) for k <= H only (sched/cost.h cost_group_mode)
    if (k > 1 && k <= H && (modes & (COST_MODES_ULYSSES | COST_MODES_HYBRID))) {
      out->ring += ulysses_attention_index_bytes((int)C);
      size_t u0 = ulysses_attention_work_bytes(act, k, tc->ulysses_chunks, tokens, (int64_t)k * tokens, H, Dh);
      if (u0 > r0) r0 = u0;
    }
    if (r0 > region[0]) region[0] = r0;
    for (int u = 2; (modes & COST_MODES_HYBRID) && u < k && u <= H; u *= 2) {
      size_t b0 = ulysses_attention_work_bytes(act, u, tc->ulysses_chunks, tokens, (int64_t)u * tokens, H, Dh);
      size_t b1 = ring_attention_work_bytes(act, k / u, (int64_t)u * tokens, (H + u - 1) / u, Dh);
      if (b0 > region[0]) region[0] = b0;
      if (b1 > region[1]) region[1] = b1;
    }
    if ((modes & COST_MODES_HYBRID) && k > 2)  // its block and ring (u = 2: the longest index)
      out->ring += ulysses_attention_index_bytes((int)C) + ring_attention_index_bytes(k / 2, (int)C);
    out->ring_sizes += k > 1;
  }
  out->ring += region[0] + region[1];
  // placed attention (model/dist/placed_attention.h): one executor a group size, each with
  // its own buffers, bounded by every peer's rows both ways
  for (int k = 2; placed && k <= ranks; k *= 2)
    out->placed += placed_attention_work_bytes(act, k, Lh, H, Dh);
  out->attention = (size_t)Lh * (size_t)mc->heads * sizeof(float);
  out->reserve = device ? TRAIN_MEMORY_DEVICE_RESERVE : 0;
  if (tc->act_bytes_token > 0) {  // measured on the device: holds inputs and workspaces too
    out->activations = (size_t)tc->act_bytes_token * (size_t)tokens;
    out->inputs = out->attention = 0;
    out->measured = 1;
  }
  if (tc->lora_rank > 0) {  // adapters on a frozen base (model/lora.h): no base gradients
    size_t np = 0, ab = 0, wb = 0;
    if ((st = lora_bytes(mc, tc, act, tokens, (int)C, 0, tc->zero > 0 ? ranks : 0, &np, &wb,
                         &ab)))
      return st;
    out->lora_params = np;
    // the frozen base keeps fp32 masters only where the kernels read them (bf16: biases,
    // norms, modulation rows; dit_create_frozen_base), beside its working copy
    out->weights = dm.frozen_params + dm.act_weights + wb;
    out->grads = np * sizeof(float);
    out->optimizer = 3 * np * sizeof(float);  // AdamW m, v and the EMA of the adapters
    if (tc->zero > 0) {  // their shards (one bucket: the whole buffer, zero_layout_flat)
      size_t S = np / (size_t)ranks * sizeof(float);
      out->shard = S;
      out->weights += S;  // the masters' shard
      out->grads += S;    // the gradient's shard beside the whole adapter gradient
      out->optimizer = 3 * S + np * sizeof(float);  // + the bucket checkpoints gather in
    }
    out->activations += ab;
  }
  if (tc->val_clips > 0)  // dist_step_eval: eval_pred (L, P) [act] and eval_out (1 + C) [f32]
    out->validation = (size_t)Lh * (size_t)P * asz + (1 + (size_t)C) * sizeof(float);
  if (tc->sample_every > 0) {
    // model/train/samples.c: a second model of the same config holding the EMA weights
    // (with lora.rank > 0 the frozen base's, and adapters holding their EMA),
    // forward only (frozen: no gradients; whole-block recompute: one block's activations),
    // for a guided pair of 2 clips of N <= tokens / 2 tokens each; model/sample/sample.c
    // bufs_alloc: x and pred (2N, P) [act], state (N, P) [f32], pos (2N, 3) int32, t, cu,
    // labels and cu_text.
    dit_config smc = *mc;
    smc.recompute = DIT_RECOMPUTE_BLOCK;
    dit_memory sm;
    if ((st = dit_memory_bytes(&smc, act, tokens, 2, &sm))) return st;
    size_t N = tokens / 2 > 0 ? (size_t)tokens / 2 : 1;
    out->samples = (tc->lora_rank > 0 ? sm.frozen_params : sm.params) + sm.act_weights + sm.activations +
                   2 * (2 * N * (size_t)P * asz) + N * (size_t)P * sizeof(float) +
                   2 * N * 3 * sizeof(int32_t) + (2 + 3 + 2 + 3) * 4;
    if (tc->lora_rank > 0) {  // + the run's adapters on it, holding their EMA, forward only
      size_t np = 0, ab = 0, wb = 0;  // (dit_lora_attach_frozen: no gradient buffer)
      if ((st = lora_bytes(&smc, tc, act, tokens, 2, 1, 0, &np, &wb, &ab))) return st;
      out->samples += wb + ab;
    }
  }
  out->allocated = out->weights + out->grads + out->optimizer + out->activations +
                   out->inputs + out->ring + out->placed + out->validation + out->samples;
  out->total = out->allocated + out->attention + out->reserve;
  st = per_token_block(mc, act, 0, &out->act_token_block);
  if (!st) st = per_token_block(mc, act, DIT_RECOMPUTE_BLOCK, &out->act_token_block_recompute);
  if (!st) st = per_token_block(mc, act, DIT_RECOMPUTE_CHEAP, &out->act_token_block_cheap);
  return st;
}

tsr_status train_memory_tokens(const dit_config *mc, const train_config *tc, int device,
                               int ranks, int value_bytes, size_t capacity, int64_t max_tokens,
                               int64_t *tokens, train_memory *out) {
  tsr_status st = train_memory_model(mc, tc, device, ranks, 1, value_bytes, out);
  if (st) return st;
  if (out->total > capacity) {
    char what[768];
    train_memory_format(out, what, sizeof what);
    return err_set(TSR_EINVAL, "the model does not fit %.3g GiB per rank even with 1 token per "
                   "microbatch: %s; give more memory (--mem-bytes), fewer parameters",
                   (double)capacity / (1 << 30), what);
  }
  int64_t lo = 1, hi = max_tokens;  // total(lo) fits; find the largest that does
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    train_memory m;
    if ((st = train_memory_model(mc, tc, device, ranks, mid, value_bytes, &m))) return st;
    if (m.total <= capacity) lo = mid;
    else hi = mid - 1;
  }
  *tokens = lo;
  return train_memory_model(mc, tc, device, ranks, lo, value_bytes, out);
}

tsr_status train_memory_capacity(const kernels_backend *kb, int64_t mem_bytes, int sharing,
                                 size_t *capacity, const char **source) {
  if (mem_bytes > 0) {
    *capacity = (size_t)mem_bytes;
    *source = "--mem-bytes";
    return TSR_OK;
  }
  if (!kb->mem_info)
    return err_set(TSR_EINVAL, "backend %s cannot report its memory: give --mem-bytes", kb->name);
  size_t free_b = 0, total_b = 0;
  tsr_status st = kb->mem_info(kb, &free_b, &total_b);
  if (st) return err_wrap(st, "memory of backend %s (or give --mem-bytes): ", kb->name);
  if (kb->device_memory) {
    *capacity = free_b;
    *source = "device free memory";
  } else {
    *capacity = free_b / 2 / (size_t)(sharing > 0 ? sharing : 1);
    *source = "host memory";
  }
  return TSR_OK;
}

static double gib(size_t b) { return (double)b / (1 << 30); }

// "1.234 GiB", or "12.3 MiB" below a GiB.
static const char *size_str(char *buf, size_t n, size_t b) {
  if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.3f GiB", gib(b));
  else snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
  return buf;
}

static int by_tokens_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int64_t train_batch_tokens(const data_store *d, int64_t batch) {
  int64_t n = data_num_clips(d), sum = 0;
  int64_t *tok = malloc((size_t)(n ? n : 1) * sizeof *tok);
  if (!tok) {  // out of memory for the list: every clip as long as the longest
    int64_t most = data_max_tokens(d), k = batch < n ? batch : n;
    return most > INT64_MAX / (k ? k : 1) ? INT64_MAX : most * k;
  }
  for (int64_t i = 0; i < n; i++) tok[i] = data_clip_at(d, i)->tokens;
  qsort(tok, (size_t)n, sizeof *tok, by_tokens_desc);
  for (int64_t i = 0; i < n && i < batch; i++) sum += tok[i];  // <= 2^24 clips of <= 2^38
  free(tok);
  return sum;
}

tsr_status train_memory_limit(train_config *tc, const dit_config *mc, const kernels_backend *kb,
                              int value_bytes, int64_t mem_bytes, int64_t batch_tokens,
                              train_memory *m, size_t *capacity, const char **source) {
  int ranks = comm_size();
  // host memory is shared by the ranks of this node, not of the job
  tsr_status st = train_memory_capacity(kb, mem_bytes, comm_local_size(), capacity, source);
  if (st) return st;
  if (tc->mem_tokens == 0) {
    int64_t L = 0, most = TRAIN_MEMORY_MAX_TOKENS;
    int by_batch = !kb->device_memory && mem_bytes <= 0 && batch_tokens > 0 &&
                   batch_tokens < most;
    if (by_batch) most = batch_tokens;  // the CPU: what a batch needs, not the machine's memory
    st = train_memory_tokens(mc, tc, kb->device_memory, ranks, value_bytes, *capacity, most, &L,
                             m);
    int64_t v[2] = {st ? 0 : -L, st ? 1 : 0};  // the least limit; did any rank fail
    tsr_status cst = comm_allreduce_max_i64(v, 2);
    if (st) return err_wrap(st, "train.mem_tokens = 0 (derived from %s): ", *source);
    if (cst) return cst;
    if (v[1]) return err_set(TSR_EINVAL, "train.mem_tokens = 0: another rank has too little memory");
    tc->mem_tokens = -v[0];
    if (by_batch && tc->mem_tokens == batch_tokens && comm_rank() == 0)
      log_info("train: train.mem_tokens = 0 on the CPU: %lld tokens, the most a batch of %lld "
               "clips of this store holds (--mem-bytes sets a memory budget instead)",
               (long long)tc->mem_tokens, (long long)tc->global_batch);
    return train_memory_model(mc, tc, kb->device_memory, ranks, tc->mem_tokens, value_bytes, m);
  }
  if ((st = train_memory_model(mc, tc, kb->device_memory, ranks, tc->mem_tokens, value_bytes, m)))
    return st;
  if (m->total > *capacity) {
    char what[768];
    train_memory_format(m, what, sizeof what);
    return err_set(TSR_EINVAL, "train.mem_tokens = %lld needs %s per rank, more than the %.3f GiB "
                   "of %s: lower train.mem_tokens (0: the largest that fits), set "
                   "model.recompute = 2 (cheap layers) or 1 (whole blocks), or give --mem-bytes",
                   (long long)tc->mem_tokens, what, gib(*capacity), *source);
  }
  return TSR_OK;
}

void train_memory_format(const train_memory *m, char *buf, size_t n) {
  char s[11][32], extra[300] = "";
  size_t len = 0;
  if (m->validation || m->samples)
    len = (size_t)snprintf(extra, sizeof extra, ", validation %s, samples %s",
                           size_str(s[9], 32, m->validation), size_str(s[10], 32, m->samples));
  if (m->zero)
    len += (size_t)snprintf(extra + len, sizeof extra - len, "; train.zero = %d: shards of %s",
                            m->zero, size_str(s[9], 32, m->shard));
  if (m->placed)
    len += (size_t)snprintf(extra + len, sizeof extra - len, "; train.placement = blockwise: "
                            "placed attention %s", size_str(s[9], 32, m->placed));
  if (m->lora_params)
    snprintf(extra + len, sizeof extra - len, "; LoRA: %zu adapter parameters on a frozen base "
             "(grads and optimizer are theirs)", m->lora_params);
  snprintf(buf, n,
           "%s (%zu bytes) for %lld tokens and %lld clips: weights %s, grads %s, optimizer %s, activations "
           "%s (%s%.0f bytes per token per block; %.0f with model.recompute = 1, %.0f with 2), "
           "inputs %s, ring buffers of %d CP sizes %s, attention workspace %s, reserve %s%s",
           size_str(s[0], 32, m->total), m->total, (long long)m->tokens, (long long)m->clips,
           size_str(s[1], 32, m->weights), size_str(s[2], 32, m->grads),
           size_str(s[3], 32, m->optimizer), size_str(s[4], 32, m->activations),
           m->measured ? "measured: train.act_bytes_token, inputs and workspace included; "
                       "the layout's " : "",
           m->act_token_block, m->act_token_block_recompute, m->act_token_block_cheap,
           size_str(s[5], 32, m->inputs),
           m->ring_sizes, size_str(s[6], 32, m->ring), size_str(s[7], 32, m->attention),
           size_str(s[8], 32, m->reserve), extra);
}

// ---- the counting backend ---------------------------------------------------------------

static tsr_status counter_alloc(const kernels_backend *kb, void **ptr, size_t bytes) {
  train_memory_counter *c = (train_memory_counter *)kb;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 64;
    void **p = realloc(c->ptrs, cap * sizeof *p);
    if (p) c->ptrs = p;
    size_t *s = p ? realloc(c->sizes, cap * sizeof *s) : NULL;
    if (s) c->sizes = s;
    if (!p || !s) return err_set(TSR_ENOMEM, "alloc: no memory to count allocations");
    c->cap = cap;
  }
  tsr_status st = c->inner->alloc(c->inner, ptr, bytes);
  if (st) return st;
  c->ptrs[c->n] = *ptr;
  c->sizes[c->n++] = bytes;
  c->live += bytes;
  if (c->live > c->peak) c->peak = c->live;
  return TSR_OK;
}

static void counter_free(const kernels_backend *kb, void *ptr) {
  train_memory_counter *c = (train_memory_counter *)kb;
  if (!ptr) return;
  for (size_t i = c->n; i-- > 0;)
    if (c->ptrs[i] == ptr) {
      c->live -= c->sizes[i];
      c->ptrs[i] = c->ptrs[c->n - 1];
      c->sizes[i] = c->sizes[--c->n];
      break;
    }
  c->inner->free(c->inner, ptr);
}

void train_memory_counter_init(train_memory_counter *c, const kernels_backend *inner) {
  memset(c, 0, sizeof *c);
  c->kb = *inner;
  c->kb.alloc = counter_alloc;
  c->kb.free = counter_free;
  c->inner = inner;
}

void train_memory_counter_free(train_memory_counter *c) {
  free(c->ptrs);
  free(c->sizes);
  c->ptrs = NULL;
  c->sizes = NULL;
  c->n = c->cap = 0;
}
