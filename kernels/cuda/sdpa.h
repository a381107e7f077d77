// kernels/cuda/sdpa.h — the host-side rules of the cuDNN attention path (attention_cudnn.cu):
// which attention calls cuDNN's fused SDPA takes, the environment switches, the plan-cache
// key, and how a packed batch (cu_seqlens) becomes cuDNN's ragged description. Plain C with
// no CUDA types, so tests/kernels/test_cuda_sdpa.c checks every rule on a machine without a
// GPU; kcu_sdpa_ragged is also compiled into the device kernel that fills the tensors
// (KCU_HD), so host test and GPU use one definition.
//
// Shapes given to cuDNN (docs/gpu.md, "Attention"): a packed microbatch of C clips is a
// "THD" batch of b >= C sequences (b = C rounded up to a power of two; the extra sequences
// are empty), every tensor (L, H, Dh) token-major with per-sequence ragged offsets
// (first token x H x Dh elements), the lse (L, H) with offsets first token x H, and the
// sequence lengths as padding-mask inputs. The sequence dimension of the plan is the
// LONGEST clip rounded up (kcu_sdpa_bucket), from the bound the attention entries are given
// (kernels.h max_len; max_q / max_k for the partial forward): the lengths themselves live
// on the device, so the host bounds them, and cuDNN sizes its tensors, grid and the
// deterministic backward's workspace by b x that length, not by b x the packed total (64
// clips of 1,024 tokens: sequences of 1,024, not of 65,536). One plan serves every
// microbatch with the same rounded clip count and longest clip.
#ifndef TESSERA_KERNELS_CUDA_SDPA_H
#define TESSERA_KERNELS_CUDA_SDPA_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __CUDACC__
#define KCU_HD __host__ __device__
#else
#define KCU_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

// The oldest cuDNN this path accepts: 9.10.2 (packed THD attention with a packed lse and
// a deterministic backward on Hopper; 9.10.0/9.10.1 have known SDPA bugs). The GPU machine
// has 9.19.
enum { KCU_SDPA_MIN_CUDNN = 91002 };

// TESSERA_CUDA_ATTENTION: which kernels the CUDA backend's attention entries use.
//   auto  (default, also when unset or empty): cuDNN where kcu_sdpa_fits says it can take
//         the call and a plan could be built, the backend's own kernels otherwise;
//   cudnn: cuDNN or an error naming the shape (for tests and comparisons);
//   own:   the backend's own fp32 CUDA-core kernels (attention.cu) everywhere.
typedef enum { KCU_ATTN_AUTO = 0, KCU_ATTN_CUDNN, KCU_ATTN_OWN } kcu_attn_mode;
// value: the variable's value or NULL (unset). TSR_EINVAL naming the variable otherwise.
tsr_status kcu_attn_mode_parse(const char *value, kcu_attn_mode *mode);
// TESSERA_CUDA_ATTENTION_DETERMINISTIC: 0 (default, also unset or empty) builds cuDNN's
// backward with its fp32 dQ accumulator, which its kernels add into with atomics: fast, but
// dQ's summation order and so its last bits vary from run to run. 1 builds the backward
// without atomics and accepts only engines without cuDNN's NONDETERMINISTIC note: bitwise
// reproducible, but its workspace is a dense b x H x sq x skv bf16 dS, so large microbatches
// get no plan and run the backend's own (slow) backward kernels (docs/gpu.md, Determinism).
tsr_status kcu_sdpa_deterministic_parse(const char *value, int *deterministic);

// The entries served by cuDNN (attention_merge and attention_delta always use the own
// kernels). The partial backward (ring attention's block, cross-attention's parts) is the
// backward graph on Lq queries against Lk keys with the queries' FINAL out and lse: cuDNN
// derives delta = rowsum(dout * out) from out and P = exp(S - lse), which is the block's
// share of the whole backward. The masked backward (the masked entries' pair list,
// attention_cudnn.h) is the partial backward's graph with dK and dV at ragged offsets of
// their own (disjoint scratch per sequence, where the sequences' key ranges overlap).
typedef enum {
  KCU_SDPA_FWD = 0, KCU_SDPA_BWD, KCU_SDPA_PARTIAL_FWD, KCU_SDPA_PARTIAL_BWD, KCU_SDPA_MASKED_BWD,
  KCU_SDPA_KINDS
} kcu_sdpa_kind;
const char *kcu_sdpa_kind_name(kcu_sdpa_kind kind);

// One call: Lq queries against Lk keys (Lk == Lq for the full entries), C clips, none
// longer than max_q queries and max_k keys (the entries' max_len, max_q, max_k: bounds,
// possibly larger than the longest clip or than Lq, Lk).
typedef struct {
  kcu_sdpa_kind kind;
  int n_clips, max_q, max_k, Lq, Lk, H, Dh;
} kcu_sdpa_shape;
// 1 for the kinds built from the backward graph (BWD, PARTIAL_BWD, MASKED_BWD).
static inline int kcu_sdpa_backward_kind(int kind) {
  return kind == KCU_SDPA_BWD || kind == KCU_SDPA_PARTIAL_BWD || kind == KCU_SDPA_MASKED_BWD;
}

// The device and library: sm = 10 * major + minor (90 for Hopper), cudnn = cudnnGetVersion().
typedef struct {
  int sm;
  long cudnn;
} kcu_sdpa_device;

// 1 when cuDNN's fused SDPA can take the call; 0 otherwise with the reason in why[0, n)
// (may be NULL). The rules: cuDNN >= KCU_SDPA_MIN_CUDNN; an sm_90 (Hopper) or sm_100/103
// (Blackwell data-center) GPU, where cuDNN's packed lse and deterministic packed backward
// exist; Dh a multiple of 8 and at most 256 on sm_90, 128 on sm_100/103; n_clips, H >= 1;
// Lq, Lk <= 2^30 (the rounded sizes stay ints); max_q, max_k >= 0; and for the plan's
// dims (kcu_sdpa_key_of) b <= KCU_SDPA_MAX_B and each padded tensor b x H x s x Dh (s = sq
// for Q and O, skv for K and V) under 2^31 elements (KCU_SDPA_MAX_ELEMS). (bf16
// activations hold by construction: the backend's act dtype.)
int kcu_sdpa_fits(const kcu_sdpa_shape *s, const kcu_sdpa_device *dev, char *why, size_t n);

// The path of one call, from the mode and kcu_sdpa_fits: *use_cudnn = 1 or 0. With
// KCU_ATTN_CUDNN and a shape cuDNN cannot take: TSR_EINVAL "OP: TESSERA_CUDA_ATTENTION=cudnn
// but cuDNN's fused attention cannot take C clips, Lq x Lk tokens, H heads of Dh: REASON".
tsr_status kcu_sdpa_choose(kcu_attn_mode mode, const char *op, const kcu_sdpa_shape *s,
                           const kcu_sdpa_device *dev, int *use_cudnn);

// n rounded up to a power of two, at least lo (lo a power of two >= 1).
int64_t kcu_sdpa_bucket(int64_t n, int64_t lo);

// Limits of the plan's dims that kcu_sdpa_fits enforces. b: cuDNN's kernels put the batch
// on a grid dimension of at most 65,535 blocks (PyTorch sends no larger batch to cuDNN's
// SDPA either); b is a power of two, so 32,768. Elements: a packing of one long clip with
// many short ones pads every sequence to the long one, and whether cuDNN indexes such a
// padded view past 2^31 elements in 64 bits is not documented: those calls take the own
// kernels (correct, slower) rather than risk it.
enum { KCU_SDPA_MAX_B = 32768 };
#define KCU_SDPA_MAX_ELEMS ((int64_t)1 << 31)

// The masked entries on cuDNN (attention_cudnn.h, the pair list): one sequence per (clip,
// chunk) group (block_causal's chunks, a window's temporal tiles), room for this many in a
// clip in one call, so
// their plan's shape is that of n_clips x KCU_SDPA_MASK_GROUPS clips (a call with more
// chunks in a clip runs the own kernels, found on the device). 32 covers a clip of 32
// chunks: 128 latent frames in chunks of 4, 32 in chunks of 1.
enum { KCU_SDPA_MASK_GROUPS = 32 };

// The plan-cache key: one cuDNN plan per key. b = clips rounded up (kcu_sdpa_bucket, >= 1),
// sq = the longest query clip's bound min(max_q, Lq) rounded up (>= 64), skv likewise for
// the keys, plus the head shape and the backward's determinism (both backward kinds). The
// softmax scale is not in it: plans take it as a by-value input.
typedef struct {
  int kind, b, sq, skv, h, d, deterministic;
} kcu_sdpa_key;
kcu_sdpa_key kcu_sdpa_key_of(const kcu_sdpa_shape *s, int deterministic);
int kcu_sdpa_key_eq(const kcu_sdpa_key *a, const kcu_sdpa_key *b);

// Sequence c (0 <= c < b) of a plan as cuDNN sees it: its first row *start and length
// *len, from cu (n_clips + 1 offsets of L rows) and the bound max_len >= 0 of every clip.
// Clips past n_clips are empty sequences at row L. Each value is clamped into [0, L]
// (start) and [0, min(L - start, max_len)] (len), so a bad cu or a clip longer than its
// bound (reported by the entries' device checks) cannot make cuDNN read or write outside
// the tensors or past the plan's sequence dimension (>= max_len); valid arguments give
// exactly [cu[c], cu[c+1]).
static inline KCU_HD void kcu_sdpa_ragged(const int32_t *cu, int n_clips, int L, int max_len,
                                          int c, int32_t *start, int32_t *len) {
  if (c >= n_clips) {
    *start = L;
    *len = 0;
    return;
  }
  int32_t a = cu[c], e = cu[c + 1];
  a = a < 0 ? 0 : (a > L ? L : a);
  e = e < a ? a : (e > L ? L : e);
  const int32_t m = max_len < 0 ? 0 : max_len;
  *start = a;
  *len = e - a > m ? m : e - a;
}

// ---- implemented in attention_cudnn.cu (built with the CUDA backend only) ---------------
// Builds the cuDNN graph and execution plan of `key` as the GPU path does (heuristics, the
// engines' support checks, the determinism filter, the workspace limit max_workspace: the
// GPU path uses an eighth of the device memory) but without a GPU, for the device that
// device_json describes (cuDNN's device-property JSON, as tests/kernels/sdpa_h100.json;
// cuDNN >= 9.8 plans "devicelessly"). TSR_OK with the plan's workspace in bytes and
// "engine N [notes]" in info[0, n); an error with cuDNN's reason otherwise.
tsr_status kcu_sdpa_plan_offline(const kcu_sdpa_key *key, const char *device_json,
                                 int64_t max_workspace, int64_t *workspace, char *info, size_t n);

#ifdef __cplusplus
}
#endif

#endif
