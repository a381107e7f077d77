// kernels/cuda/attention_cudnn.cu — attention_forward, attention_backward,
// attention_partial_forward and attention_partial_backward through cuDNN's fused
// scaled-dot-product attention, built with
// cuDNN's graph/backend API (cudnnBackend* descriptors: the C++ cudnn_frontend is not a
// dependency). The path of each call is chosen by kcu_sdpa_choose (sdpa.h, with the
// environment switch TESSERA_CUDA_ATTENTION); attention.cu's own kernels take the rest.
//
// The graphs are the ones cuDNN's fused flash-attention engines recognise (the same
// operation graph the frontend's "composite" SDPA node lowers to for bf16 with a padding
// mask and packed, ragged tensors):
//   forward:  S = scale * Q K^T; padding mask (row < seq_len_q[b] and col < seq_len_kv[b],
//             else -inf); M = rowmax S; E = exp(S - M); Z = rowsum E;
//             stats = M + log Z  (= the lse of kernels.h: natural log, scaled scores);
//             P = E / Z in bf16; O = P V.
//   backward: delta = rowsum(dO * O) into a fp32 buffer; P = exp(mask(scale Q K^T) - stats);
//             dV = P^T dO; dS = scale * P * (dO V^T - delta); dK = dS^T Q; dQ = dS K.
//             The partial backward is the same graph on one (query chunk, key block) pair
//             with O and stats the queries' FINAL output and lse: then delta and P are the
//             whole attention's, and dQ, dK, dV the pair's share of its gradients, which
//             k_sdpa_accumulate adds to the entry's accumulated dq, dk, dv.
// Layout (sdpa.h): b >= C sequences of at most the longest clip (the entries' max_len,
// rounded up) with ragged offsets into the (L, H, Dh) tensors and the (L, H) lse,
// per-sequence lengths as the padding-mask inputs; filled on the device from cu_seqlens by
// k_sdpa_ragged (cu never goes to the host).
//
// Numerics: cuDNN rounds P (forward) and P, dS (backward) to bf16 for the tensor-core
// products, unlike the own kernels (P in fp32): tests/kernels/test_backend_ops.c gives the
// cuDNN entries their own tolerance. stats/lse stay fp32. The partial backward's share is
// stored in bf16 before it is added (one more rounding of the share than the own kernels'
// load-add-round).
// Determinism: the forward has no atomics. The backward, by default, adds dQ into cuDNN's
// fp32 accumulator with atomics (fast; dQ's last bits vary run to run); with
// TESSERA_CUDA_ATTENTION_DETERMINISTIC=1 it is built without the accumulator (the
// "deterministic algorithm" graph, a dense b x H x sq x skv workspace) and only engines
// without cuDNN's NONDETERMINISTIC note are accepted.
//
// Plans: building one is slow (heuristics, engine checks, runtime compilation), so each
// kcu_sdpa_key (sdpa.h: kind, rounded clip count and longest clips, heads, head dim,
// determinism) gets one plan, kept in a small LRU cache in the context (kcu_ctx.sdpa); a
// key whose build failed is remembered too (auto mode: own kernels for it, without
// retrying). The softmax scale is a by-value input, so it is not part of the key. Memory:
// the ragged tensors, the backward's fp32 delta and cuDNN's workspace come from
// kcu_scratch (one request per call).
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/kcu.h"

extern "C" {
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/sdpa.h"
}

// ---- graph building (host) ----------------------------------------------------------------
// Every descriptor of a graph and its plan lives in one sdpa_graph and is destroyed with it.
// The builder functions latch the first failure (st, what) and do nothing after it, so the
// graph definitions below read as straight lines and are checked once at the end.
enum { SG_MAX_DESC = 224, SG_MAX_OPS = 48 };
struct sdpa_graph {
  cudnnBackendDescriptor_t desc[SG_MAX_DESC];
  int n_desc;
  cudnnBackendDescriptor_t ops[SG_MAX_OPS];
  int n_ops;
  int64_t next_uid;  // of virtual tensors
  cudnnStatus_t st;  // first failure
  char what[200];    // its call and object
};

static void sg_fail(sdpa_graph *g, cudnnStatus_t s, const char *call, const char *name) {
  if (g->st != CUDNN_STATUS_SUCCESS || s == CUDNN_STATUS_SUCCESS) return;
  g->st = s;
  snprintf(g->what, sizeof g->what, "%s (%s)", call, name);
}

static void sg_destroy(sdpa_graph *g) {
  if (!g) return;
  for (int i = g->n_desc - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(g->desc[i]);
  free(g);
}

static cudnnBackendDescriptor_t sg_new(sdpa_graph *g, cudnnBackendDescriptorType_t type,
                                       const char *name) {
  if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
  if (g->n_desc == SG_MAX_DESC) {
    sg_fail(g, CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND, "too many descriptors", name);
    return NULL;
  }
  cudnnBackendDescriptor_t d = NULL;
  sg_fail(g, cudnnBackendCreateDescriptor(type, &d), "cudnnBackendCreateDescriptor", name);
  if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
  g->desc[g->n_desc++] = d;
  return d;
}

#define SG_SET(g, d, attr, type, n, v, name) sg_set((g), (d), (attr), (type), (n), (v), #attr, (name))
static void sg_set(sdpa_graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                   cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *attr_name,
                   const char *name) {
  if (g->st != CUDNN_STATUS_SUCCESS) return;
  sg_fail(g, cudnnBackendSetAttribute(d, attr, type, n, v), attr_name, name);
}

static void sg_finalize(sdpa_graph *g, cudnnBackendDescriptor_t d, const char *name) {
  if (g->st != CUDNN_STATUS_SUCCESS) return;
  sg_fail(g, cudnnBackendFinalize(d), "cudnnBackendFinalize", name);
}

static void sg_op(sdpa_graph *g, cudnnBackendDescriptor_t op, const char *name) {
  sg_finalize(g, op, name);
  if (g->st != CUDNN_STATUS_SUCCESS) return;
  if (g->n_ops == SG_MAX_OPS) {
    sg_fail(g, CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND, "too many operations", name);
    return;
  }
  g->ops[g->n_ops++] = op;
}

struct d4 {
  int64_t v[4];
};
static d4 D4(int64_t a, int64_t b, int64_t c, int64_t d) { return d4{{a, b, c, d}}; }

// A tensor: uid (0 for a virtual one: numbered from next_uid), data type, dims and strides
// (4-d), virtual / by-value flags, and its ragged-offset tensor (or NULL).
static cudnnBackendDescriptor_t sg_tensor(sdpa_graph *g, const char *name, int64_t uid,
                                          cudnnDataType_t dt, d4 dim, d4 str, bool is_virtual,
                                          bool by_value, cudnnBackendDescriptor_t ragged) {
  cudnnBackendDescriptor_t t = sg_new(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, name);
  if (is_virtual) uid = g->next_uid++;
  int64_t align = 16;
  SG_SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, name);
  SG_SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.v, name);
  SG_SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str.v, name);
  SG_SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, name);
  SG_SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, name);
  SG_SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, name);
  if (by_value) SG_SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, name);
  if (ragged)
    SG_SET(g, t, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged, name);
  sg_finalize(g, t, name);
  return t;
}

static cudnnBackendDescriptor_t sg_virtual(sdpa_graph *g, const char *name, cudnnDataType_t dt,
                                           d4 dim, d4 str) {
  return sg_tensor(g, name, 0, dt, dim, str, true, false, NULL);
}

// y = mode(x, b, t) (b, t may be NULL); axis >= 0 for GEN_INDEX. prec: the math precision.
static cudnnBackendDescriptor_t sg_pw(sdpa_graph *g, const char *name, cudnnPointwiseMode_t mode,
                                      cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                                      cudnnBackendDescriptor_t y, int64_t axis) {
  cudnnBackendDescriptor_t pw = sg_new(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name);
  SG_SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, name);
  SG_SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, name);
  if (axis >= 0) SG_SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, name);
  sg_finalize(g, pw, name);
  cudnnBackendDescriptor_t op = sg_new(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, name);
  float one = 1.0f;
  SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, name);
  if (b) SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, name);
  if (t) SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one, name);
  sg_op(g, op, name);
  return y;
}

// y = reduction over the dimensions where y has extent 1 (rowmax / rowsum here), in fp32.
static void sg_reduce(sdpa_graph *g, const char *name, cudnnReduceTensorOp_t red,
                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t rd = sg_new(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name);
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  SG_SET(g, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red, name);
  SG_SET(g, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, name);
  sg_finalize(g, rd, name);
  cudnnBackendDescriptor_t op = sg_new(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, name);
  sg_op(g, op, name);
}

// c = a b per (batch, head), fp32 accumulation; m/n/k: per-sequence GEMM sizes (the
// sequence lengths, so padded rows and columns are not computed), or NULL.
static void sg_matmul(sdpa_graph *g, const char *name, cudnnBackendDescriptor_t a,
                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c,
                      cudnnBackendDescriptor_t m, cudnnBackendDescriptor_t n,
                      cudnnBackendDescriptor_t k) {
  cudnnBackendDescriptor_t md = sg_new(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, name);
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  SG_SET(g, md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, name);
  sg_finalize(g, md, name);
  cudnnBackendDescriptor_t op = sg_new(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &md, name);
  if (m) SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m, name);
  if (n) SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, name);
  if (k) SG_SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k, name);
  sg_op(g, op, name);
}

// y = x viewed with y's dims and strides (a transpose of the last two dimensions here).
static void sg_reshape(sdpa_graph *g, const char *name, cudnnBackendDescriptor_t x,
                       cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t op = sg_new(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, name);
  SG_SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, name);
  sg_op(g, op, name);
}

// ---- the SDPA graphs ---------------------------------------------------------------------
// Unique ids of the tensors a call binds (the variant pack); virtual tensors from 1000.
enum {
  U_Q = 1, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_SCALE, U_NEG_INF, U_ONE,
  U_SEQ_Q, U_SEQ_KV, U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S, U_DELTA, U_DQ_ACC,
  U_VIRTUAL = 1000
};

// The tensors shared by both graphs.
struct sg_io {
  cudnnBackendDescriptor_t q, kt, o, stats, scale, neg_inf, seq_q, seq_kv, off_q, off_k, off_v,
      off_o, off_s;
};

static sg_io sg_common(sdpa_graph *g, const kcu_sdpa_key *k) {
  const int64_t B = k->b, SQ = k->sq, SKV = k->skv, H = k->h, D = k->d;
  const d4 one = D4(1, 1, 1, 1), off_dim = D4(B + 1, 1, 1, 1), seq_dim = D4(B, 1, 1, 1);
  sg_io t;
  // Ragged offsets in elements: the first token of sequence b times the row size.
  t.off_q = sg_tensor(g, "offset_q", U_OFF_Q, CUDNN_DATA_INT64, off_dim, one, false, false, NULL);
  t.off_k = sg_tensor(g, "offset_k", U_OFF_K, CUDNN_DATA_INT64, off_dim, one, false, false, NULL);
  t.off_v = sg_tensor(g, "offset_v", U_OFF_V, CUDNN_DATA_INT64, off_dim, one, false, false, NULL);
  t.off_o = sg_tensor(g, "offset_o", U_OFF_O, CUDNN_DATA_INT64, off_dim, one, false, false, NULL);
  t.off_s = sg_tensor(g, "offset_stats", U_OFF_S, CUDNN_DATA_INT64, off_dim, one, false, false, NULL);
  t.seq_q = sg_tensor(g, "seq_len_q", U_SEQ_Q, CUDNN_DATA_INT32, seq_dim, one, false, false, NULL);
  t.seq_kv = sg_tensor(g, "seq_len_kv", U_SEQ_KV, CUDNN_DATA_INT32, seq_dim, one, false, false, NULL);
  // (L, H, Dh) token-major: dims (b, h, s, d), strides (-, d, h*d, 1); K as K^T (b, h, d, s).
  t.q = sg_tensor(g, "Q", U_Q, CUDNN_DATA_BFLOAT16, D4(B, H, SQ, D), D4(SQ * H * D, D, H * D, 1),
                  false, false, t.off_q);
  t.kt = sg_tensor(g, "K^T", U_K, CUDNN_DATA_BFLOAT16, D4(B, H, D, SKV), D4(SKV * H * D, D, 1, H * D),
                   false, false, t.off_k);
  t.o = sg_tensor(g, "O", U_O, CUDNN_DATA_BFLOAT16, D4(B, H, SQ, D), D4(SQ * H * D, D, H * D, 1),
                  false, false, t.off_o);
  // lse (L, H): dims (b, h, s, 1), strides (-, 1, h, 1).
  t.stats = sg_tensor(g, "stats", U_STATS, CUDNN_DATA_FLOAT, D4(B, H, SQ, 1), D4(SQ * H, 1, H, 1),
                      false, false, t.off_s);
  t.scale = sg_tensor(g, "attn_scale", U_SCALE, CUDNN_DATA_FLOAT, one, one, false, true, NULL);
  t.neg_inf = sg_tensor(g, "mask_value", U_NEG_INF, CUDNN_DATA_FLOAT, one, one, false, true, NULL);
  return t;
}

// s_masked = s where row < seq_len_q[b] and col < seq_len_kv[b], else -inf.
static cudnnBackendDescriptor_t sg_padding_mask(sdpa_graph *g, const kcu_sdpa_key *k,
                                                const sg_io *t, cudnnBackendDescriptor_t s) {
  const int64_t B = k->b, SQ = k->sq, SKV = k->skv, H = k->h;
  const d4 sd = D4(B, H, SQ, SKV), ss = D4(H * SQ * SKV, SQ * SKV, SKV, 1);
  cudnnBackendDescriptor_t row = sg_virtual(g, "row_index", CUDNN_DATA_INT32, sd, ss);
  cudnnBackendDescriptor_t col = sg_virtual(g, "col_index", CUDNN_DATA_INT32, sd, ss);
  cudnnBackendDescriptor_t row_ok = sg_virtual(g, "row_in_sequence", CUDNN_DATA_BOOLEAN, sd, ss);
  cudnnBackendDescriptor_t col_ok = sg_virtual(g, "col_in_sequence", CUDNN_DATA_BOOLEAN, sd, ss);
  cudnnBackendDescriptor_t keep = sg_virtual(g, "padding_mask", CUDNN_DATA_BOOLEAN, sd, ss);
  cudnnBackendDescriptor_t out = sg_virtual(g, "S_masked", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "gen_row_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, NULL, NULL, row, 2);
  sg_pw(g, "gen_col_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s, NULL, NULL, col, 3);
  sg_pw(g, "row_lt_seq_q", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, row, t->seq_q, NULL, row_ok, -1);
  sg_pw(g, "col_lt_seq_kv", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, col, t->seq_kv, NULL, col_ok, -1);
  sg_pw(g, "row_and_col", CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, row_ok, col_ok, NULL, keep, -1);
  // BINARY_SELECT: y = t ? x : b.
  sg_pw(g, "select_padding", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, t->neg_inf, keep, out, -1);
  return out;
}

// S = mask(scale * Q K^T) (fp32, virtual).
static cudnnBackendDescriptor_t sg_scores(sdpa_graph *g, const kcu_sdpa_key *k, const sg_io *t) {
  const int64_t B = k->b, SQ = k->sq, SKV = k->skv, H = k->h;
  const d4 sd = D4(B, H, SQ, SKV), ss = D4(H * SQ * SKV, SQ * SKV, SKV, 1);
  cudnnBackendDescriptor_t qk = sg_virtual(g, "QK^T", CUDNN_DATA_FLOAT, sd, ss);
  sg_matmul(g, "matmul_Q_KT", t->q, t->kt, qk, t->seq_q, t->seq_kv, NULL);
  cudnnBackendDescriptor_t s = sg_virtual(g, "S", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "mul_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, qk, t->scale, NULL, s, -1);
  return sg_padding_mask(g, k, t, s);
}

static void sg_forward(sdpa_graph *g, const kcu_sdpa_key *k) {
  const int64_t B = k->b, SQ = k->sq, SKV = k->skv, H = k->h, D = k->d;
  const d4 sd = D4(B, H, SQ, SKV), ss = D4(H * SQ * SKV, SQ * SKV, SKV, 1);
  const d4 rd = D4(B, H, SQ, 1), rs = D4(H * SQ, SQ, 1, 1);
  sg_io t = sg_common(g, k);
  cudnnBackendDescriptor_t v = sg_tensor(g, "V", U_V, CUDNN_DATA_BFLOAT16, D4(B, H, SKV, D),
                                         D4(SKV * H * D, D, H * D, 1), false, false, t.off_v);
  cudnnBackendDescriptor_t s = sg_scores(g, k, &t);
  cudnnBackendDescriptor_t m = sg_virtual(g, "rowmax", CUDNN_DATA_FLOAT, rd, rs);
  sg_reduce(g, "reduce_max", CUDNN_REDUCE_TENSOR_MAX, s, m);
  cudnnBackendDescriptor_t sm = sg_virtual(g, "S-M", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "sub_max", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s, m, NULL, sm, -1);
  cudnnBackendDescriptor_t e = sg_virtual(g, "exp(S-M)", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, sm, NULL, NULL, e, -1);
  cudnnBackendDescriptor_t z = sg_virtual(g, "rowsum", CUDNN_DATA_FLOAT, rd, rs);
  sg_reduce(g, "reduce_sum", CUDNN_REDUCE_TENSOR_ADD, e, z);
  cudnnBackendDescriptor_t lz = sg_virtual(g, "log(rowsum)", CUDNN_DATA_FLOAT, rd, rs);
  sg_pw(g, "log", CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, z, NULL, NULL, lz, -1);
  sg_pw(g, "stats", CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, lz, NULL, t.stats, -1);
  cudnnBackendDescriptor_t p = sg_virtual(g, "P", CUDNN_DATA_BFLOAT16, sd, ss);
  sg_pw(g, "div_rowsum", CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, NULL, p, -1);
  sg_matmul(g, "matmul_P_V", p, v, t.o, t.seq_q, NULL, t.seq_kv);
}

static void sg_backward(sdpa_graph *g, const kcu_sdpa_key *k) {
  const int64_t B = k->b, SQ = k->sq, SKV = k->skv, H = k->h, D = k->d;
  const d4 sd = D4(B, H, SQ, SKV), ss = D4(H * SQ * SKV, SQ * SKV, SKV, 1);
  const d4 td = D4(B, H, SKV, SQ), ts = D4(H * SQ * SKV, SQ * SKV, 1, SKV);  // S^T views
  const d4 rd = D4(B, H, SQ, 1), rs = D4(H * SQ, SQ, 1, 1);
  const d4 qd = D4(B, H, SQ, D), qs = D4(SQ * H * D, D, H * D, 1);
  const d4 kd = D4(B, H, SKV, D), ks = D4(SKV * H * D, D, H * D, 1);
  const d4 one = D4(1, 1, 1, 1);
  sg_io t = sg_common(g, k);
  cudnnBackendDescriptor_t vt = sg_tensor(g, "V^T", U_V, CUDNN_DATA_BFLOAT16, D4(B, H, D, SKV),
                                          D4(SKV * H * D, D, 1, H * D), false, false, t.off_v);
  cudnnBackendDescriptor_t dout = sg_tensor(g, "dO", U_DO, CUDNN_DATA_BFLOAT16, qd, qs, false, false, t.off_o);
  cudnnBackendDescriptor_t dq = sg_tensor(g, "dQ", U_DQ, CUDNN_DATA_BFLOAT16, qd, qs, false, false, t.off_q);
  cudnnBackendDescriptor_t dk = sg_tensor(g, "dK", U_DK, CUDNN_DATA_BFLOAT16, kd, ks, false, false, t.off_k);
  cudnnBackendDescriptor_t dv = sg_tensor(g, "dV", U_DV, CUDNN_DATA_BFLOAT16, kd, ks, false, false, t.off_v);
  cudnnBackendDescriptor_t one_t = sg_tensor(g, "one", U_ONE, CUDNN_DATA_FLOAT, one, one, false, true, NULL);
  // delta = rowsum(dO * O), kept in fp32 like the lse (same layout and offsets).
  cudnnBackendDescriptor_t dodo = sg_virtual(g, "dO*O", CUDNN_DATA_FLOAT, qd, D4(H * SQ * D, SQ * D, H * D, 1));
  sg_pw(g, "mul_dO_O", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dout, t.o, NULL, dodo, -1);
  cudnnBackendDescriptor_t rsum = sg_virtual(g, "rowsum(dO*O)", CUDNN_DATA_FLOAT, rd, rs);
  sg_reduce(g, "reduce_dO_O", CUDNN_REDUCE_TENSOR_ADD, dodo, rsum);
  cudnnBackendDescriptor_t delta = sg_tensor(g, "softmax_sum", U_DELTA, CUDNN_DATA_FLOAT, rd,
                                             D4(SQ * H, 1, H, 1), false, false, t.off_s);
  sg_pw(g, "delta", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, rsum, one_t, NULL, delta, -1);
  // P = exp(S - lse).
  cudnnBackendDescriptor_t s = sg_scores(g, k, &t);
  cudnnBackendDescriptor_t sl = sg_virtual(g, "S-lse", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "sub_stats", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, s, t.stats, NULL, sl, -1);
  cudnnBackendDescriptor_t p = sg_virtual(g, "P", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "exp", CUDNN_POINTWISE_EXP, CUDNN_DATA_FLOAT, sl, NULL, NULL, p, -1);
  // dV = P^T dO.
  cudnnBackendDescriptor_t pt = sg_virtual(g, "P^T", CUDNN_DATA_BFLOAT16, td, ts);
  sg_reshape(g, "reshape_P", p, pt);
  sg_matmul(g, "matmul_PT_dO", pt, dout, dv, t.seq_kv, NULL, t.seq_q);
  // dS = scale * P * (dO V^T - delta).
  cudnnBackendDescriptor_t dp = sg_virtual(g, "dP", CUDNN_DATA_FLOAT, sd, ss);
  sg_matmul(g, "matmul_dO_VT", dout, vt, dp, t.seq_q, t.seq_kv, NULL);
  cudnnBackendDescriptor_t dpd = sg_virtual(g, "dP-delta", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "sub_delta", CUDNN_POINTWISE_SUB, CUDNN_DATA_FLOAT, dp, delta, NULL, dpd, -1);
  cudnnBackendDescriptor_t pdp = sg_virtual(g, "P*(dP-delta)", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "mul_P", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, dpd, p, NULL, pdp, -1);
  cudnnBackendDescriptor_t ds = sg_virtual(g, "dS", CUDNN_DATA_FLOAT, sd, ss);
  sg_pw(g, "mul_dS_attn_scale", CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, pdp, t.scale, NULL, ds, -1);
  // dK = dS^T Q.
  cudnnBackendDescriptor_t dst = sg_virtual(g, "dS^T", CUDNN_DATA_BFLOAT16, td, ts);
  sg_reshape(g, "reshape_dS", ds, dst);
  sg_matmul(g, "matmul_dST_Q", dst, t.q, dk, t.seq_kv, NULL, t.seq_q);
  // dQ = dS K (K as (b, h, s, d) again).
  cudnnBackendDescriptor_t kr = sg_tensor(g, "K", 0, CUDNN_DATA_FLOAT, kd, ks, true, false, t.off_k);
  sg_reshape(g, "reshape_K", t.kt, kr);
  if (k->deterministic) {
    sg_matmul(g, "matmul_dS_K", ds, kr, dq, t.seq_q, NULL, t.seq_kv);
  } else {
    // fp32 accumulator that cuDNN's atomic dQ kernels add into, then converted to bf16.
    cudnnBackendDescriptor_t acc = sg_tensor(g, "dQ_accum", U_DQ_ACC, CUDNN_DATA_FLOAT, qd, qs,
                                             false, false, t.off_q);
    sg_matmul(g, "matmul_dS_K", ds, kr, acc, t.seq_q, NULL, t.seq_kv);
    sg_pw(g, "identity_dQ", CUDNN_POINTWISE_IDENTITY, CUDNN_DATA_FLOAT, acc, NULL, NULL, dq, -1);
  }
}

// ---- plans ---------------------------------------------------------------------------------
struct sdpa_plan {
  kcu_sdpa_key key;
  int state;  // 0 empty slot, 1 ready, -1 the build failed (err says why), 2 compiled offline
  sdpa_graph *g;
  cudnnBackendDescriptor_t plan;
  int64_t workspace;
  int64_t engine;
  char notes[96];  // the engine's numerical notes
  unsigned long long used;  // LRU clock
  unsigned long calls;      // calls served (or, failed: sent to the own kernels)
  char err[768];
};

// The names of an engine's numerical notes, comma-separated.
static void sdpa_note_names(const cudnnBackendNumericalNote_t *notes, int64_t n, char *out, size_t size) {
  static const char *const names[] = {"TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION",
                                      "FFT", "NONDETERMINISTIC", "WINOGRAD", "WINOGRAD_4x4",
                                      "WINOGRAD_6x6", "WINOGRAD_13x13", "STRICT_NAN_PROP"};
  size_t used = 0;
  out[0] = 0;
  for (int64_t j = 0; j < n && used < size; j++) {
    int v = (int)notes[j];
    const char *name = v >= 0 && v < (int)(sizeof names / sizeof names[0]) ? names[v] : "?";
    used += (size_t)snprintf(out + used, size - used, "%s%s", j ? "," : "", name);
  }
}

// Builds the graph of key and an execution plan for it into p. handle or devprop (a device
// description for planning without a GPU) says which device. Heuristics mode A, then the
// fallback list; the first engine configuration that finalizes, has no NONDETERMINISTIC note
// when key->deterministic, and needs at most max_ws bytes of workspace wins. offline (with
// devprop, no GPU and maybe only the driver's stub library): a configuration whose kernels
// cuDNN compiled but could not load (CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER) counts as
// built (state 2, no plan; workspace from the engine configuration).
static int sdpa_build(sdpa_plan *p, const kcu_sdpa_key *key, cudnnHandle_t handle,
                      cudnnBackendDescriptor_t devprop, int64_t max_ws, int offline) {
  p->key = *key;
  p->state = -1;
  p->plan = NULL;
  p->workspace = 0;
  p->engine = -1;
  p->notes[0] = 0;
  p->err[0] = 0;
  sdpa_graph *g = (sdpa_graph *)calloc(1, sizeof(sdpa_graph));
  if (!g) {
    snprintf(p->err, sizeof p->err, "out of host memory");
    return 0;
  }
  p->g = g;
  g->next_uid = U_VIRTUAL;
  const char *kind = kcu_sdpa_kind_name((kcu_sdpa_kind)key->kind);
  if (kcu_sdpa_backward_kind(key->kind)) sg_backward(g, key);
  else sg_forward(g, key);
  cudnnBackendDescriptor_t graph = sg_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "graph");
  SG_SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "graph");
  if (handle) SG_SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph");
  sg_finalize(g, graph, "graph");
  if (g->st != CUDNN_STATUS_SUCCESS) {
    char last[256];
    cudnnGetLastErrorString(last, sizeof last);
    snprintf(p->err, sizeof p->err, "cuDNN %s graph: %s: %s (%s)", kind, g->what,
             cudnnGetErrorString(g->st), last);
    return 0;
  }
  char reasons[256] = "";
  int tried = 0, skipped_nondet = 0, skipped_ws = 0;
  const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
  for (int mi = 0; mi < 2 && p->state < 0; mi++) {
    cudnnBackendDescriptor_t heur = sg_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
    SG_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heuristics");
    SG_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi], "heuristics");
    if (devprop) SG_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &devprop, "heuristics");
    sg_finalize(g, heur, "heuristics");
    int64_t count = 0;
    if (g->st == CUDNN_STATUS_SUCCESS)
      sg_fail(g, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                          0, &count, NULL), "CUDNN_ATTR_ENGINEHEUR_RESULTS", "count");
    if (count > 8) count = 8;
    cudnnBackendDescriptor_t cfg[8];
    for (int64_t i = 0; i < count; i++) cfg[i] = sg_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    int64_t got = 0;
    if (g->st == CUDNN_STATUS_SUCCESS && count > 0)
      sg_fail(g, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                          count, &got, cfg), "CUDNN_ATTR_ENGINEHEUR_RESULTS", "configs");
    if (g->st != CUDNN_STATUS_SUCCESS) break;
    for (int64_t i = 0; i < got && i < count && p->state < 0; i++) {
      tried++;
      // The engine of the configuration: its index and numerical notes.
      cudnnBackendDescriptor_t eng = sg_new(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
      if (g->st != CUDNN_STATUS_SUCCESS) break;
      int64_t n = 0, index = -1, n_notes = 0;
      cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
      int nondet = 0;
      if (cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                   &eng) == CUDNN_STATUS_SUCCESS) {
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
        if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n_notes, notes) != CUDNN_STATUS_SUCCESS)
          n_notes = 0;
        if (n_notes > CUDNN_NUMERICAL_NOTE_TYPE_COUNT) n_notes = CUDNN_NUMERICAL_NOTE_TYPE_COUNT;
        for (int64_t j = 0; j < n_notes; j++) nondet |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
      }
      if (key->deterministic && nondet) {
        skipped_nondet++;
        continue;
      }
      // The configuration's workspace, when cuDNN knows it before compiling: skip early.
      int64_t cfg_ws = 0;
      if (cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                   &cfg_ws) == CUDNN_STATUS_SUCCESS && cfg_ws > max_ws) {
        skipped_ws++;
        continue;
      }
      cudnnBackendDescriptor_t plan = NULL;
      cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
      if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
      if (s == CUDNN_STATUS_SUCCESS && devprop)
        s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &devprop);
      if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
      int64_t ws = 0;
      if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
      if (offline && s == CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER) {
        cudnnBackendDestroyDescriptor(plan);
        plan = NULL;
        ws = 0;
        cudnnBackendGetAttribute(cfg[i], CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
        p->state = 2;
        p->workspace = ws;
        p->engine = index;
        sdpa_note_names(notes, n_notes, p->notes, sizeof p->notes);
        break;
      }
      if (s == CUDNN_STATUS_SUCCESS && ws > max_ws) {
        skipped_ws++;
        s = CUDNN_STATUS_NOT_SUPPORTED;
      } else if (s != CUDNN_STATUS_SUCCESS && !reasons[0]) {
        char last[200];
        cudnnGetLastErrorString(last, sizeof last);
        snprintf(reasons, sizeof reasons, "engine %lld: %s (%s)", (long long)index, cudnnGetErrorString(s), last);
      }
      if (s != CUDNN_STATUS_SUCCESS) {
        if (plan) cudnnBackendDestroyDescriptor(plan);
        continue;
      }
      p->plan = plan;
      p->state = 1;
      p->workspace = ws;
      p->engine = index;
      sdpa_note_names(notes, n_notes, p->notes, sizeof p->notes);
    }
  }
  if (g->st != CUDNN_STATUS_SUCCESS) {
    char last[256];
    cudnnGetLastErrorString(last, sizeof last);
    snprintf(p->err, sizeof p->err, "cuDNN %s plan: %s: %s (%s)", kind, g->what,
             cudnnGetErrorString(g->st), last);
    if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
    p->plan = NULL;
    p->state = -1;
    return 0;
  }
  if (p->state < 0) {
    snprintf(p->err, sizeof p->err, "cuDNN %s: no engine of %d candidates builds a plan "
             "(%d nondeterministic skipped, %d over the %lld-byte workspace limit)%s%s%s", kind,
             tried, skipped_nondet, skipped_ws, (long long)max_ws, reasons[0] ? "; first failure: " : "",
             reasons, skipped_ws && key->deterministic
                          ? "; the deterministic backward's workspace is a dense b x H x sq x skv dS: "
                            "TESSERA_CUDA_ATTENTION_DETERMINISTIC=0 (the default) selects the atomic one"
                          : "");
    return 0;
  }
  return 1;
}

static void sdpa_plan_clear(sdpa_plan *p) {
  if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
  sg_destroy(p->g);
  memset(p, 0, sizeof *p);
}

// ---- state in the context -----------------------------------------------------------------
enum { SDPA_CACHE = 32 };
struct sdpa_state {
  tsr_status setup;  // TSR_OK, or why cuDNN is unusable (message in err)
  char err[400];
  kcu_attn_mode mode;
  int deterministic;
  cudnnHandle_t handle;
  kcu_sdpa_device dev;
  int64_t max_workspace;
  sdpa_plan cache[SDPA_CACHE];
  unsigned long long clock;
  unsigned long own_calls[KCU_SDPA_KINDS];  // sent to the own kernels without a plan lookup
};

// The state of kb (created on first use: environment switches, cuDNN handle on the
// backend's stream). TSR_EINVAL only for a bad switch value; a cuDNN setup failure is kept
// in ->setup (auto: own kernels; cudnn: each call reports it).
static tsr_status sdpa_state_of(kb_t *kb, sdpa_state **out) {
  kcu_ctx *x = kcu(kb);
  sdpa_state *S = (sdpa_state *)x->sdpa;
  if (!S) {
    S = (sdpa_state *)calloc(1, sizeof(sdpa_state));
    if (!S) return err_set(TSR_ENOMEM, "attention: out of host memory for the cuDNN state");
    x->sdpa = S;
    tsr_status st = kcu_attn_mode_parse(getenv("TESSERA_CUDA_ATTENTION"), &S->mode);
    if (!st) st = kcu_sdpa_deterministic_parse(getenv("TESSERA_CUDA_ATTENTION_DETERMINISTIC"), &S->deterministic);
    if (st) {
      S->setup = st;
      snprintf(S->err, sizeof S->err, "%s", err_msg());
    } else if (S->mode != KCU_ATTN_OWN) {
      int major = 0, minor = 0;
      size_t free_b = 0, total_b = 0;
      cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, x->device);
      if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, x->device);
      if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
      S->dev.sm = 10 * major + minor;
      S->dev.cudnn = (long)cudnnGetVersion();
      // A plan may ask for at most an eighth of the device's memory as workspace.
      S->max_workspace = (int64_t)(total_b / 8);
      cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
      if (e != cudaSuccess) {
        S->setup = TSR_EIO;
        snprintf(S->err, sizeof S->err, "device attributes: %s", cudaGetErrorString(e));
      } else if ((s = cudnnCreate(&S->handle)) != CUDNN_STATUS_SUCCESS ||
                 (s = cudnnSetStream(S->handle, x->stream)) != CUDNN_STATUS_SUCCESS) {
        S->setup = TSR_EIO;
        snprintf(S->err, sizeof S->err, "cudnnCreate/cudnnSetStream: %s", cudnnGetErrorString(s));
      }
    }
  }
  if (S->setup == TSR_EINVAL) return err_set(TSR_EINVAL, "%s", S->err);
  *out = S;
  return TSR_OK;
}

// The ready plan of key, building it on a miss (LRU eviction). *plan = NULL when the build
// failed: TSR_OK in auto mode (own kernels), the error in cudnn mode.
static tsr_status sdpa_plan_of(sdpa_state *S, const char *op, const kcu_sdpa_key *key,
                               sdpa_plan **plan) {
  *plan = NULL;
  sdpa_plan *hit = NULL, *victim = NULL;  // victim: the first empty slot, else the oldest
  for (int i = 0; i < SDPA_CACHE && !hit; i++) {
    sdpa_plan *p = &S->cache[i];
    if (p->state != 0 && kcu_sdpa_key_eq(&p->key, key)) hit = p;
    else if (!victim || (victim->state != 0 && (p->state == 0 || p->used < victim->used))) victim = p;
  }
  if (!hit) {
    sdpa_plan_clear(victim);
    sdpa_build(victim, key, S->handle, NULL, S->max_workspace, 0);
    hit = victim;
  }
  hit->used = ++S->clock;
  hit->calls++;
  if (hit->state == 1) {
    *plan = hit;
    return TSR_OK;
  }
  if (S->mode == KCU_ATTN_CUDNN)
    return err_set(TSR_EIO, "%s: TESSERA_CUDA_ATTENTION=cudnn: %s (b = %d sequences, %d x %d tokens, "
                   "%d heads of %d)", op, hit->err, key->b, key->sq, key->skv, key->h, key->d);
  return TSR_OK;
}

static tsr_status sdpa_cudnn_fail(const char *op, const char *call, cudnnStatus_t s) {
  char last[256];
  cudnnGetLastErrorString(last, sizeof last);
  tsr_status code = s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
                            s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
                        ? TSR_ENOMEM
                        : TSR_EIO;
  return err_set(code, "%s: %s: cuDNN %s (%s)", op, call, cudnnGetErrorString(s), last);
}

// Runs plan p with the tensors uids[i] -> ptrs[i] and the workspace ws.
static tsr_status sdpa_execute(const char *op, sdpa_state *S, sdpa_plan *p, const int64_t *uids,
                               void **ptrs, int n, void *ws) {
  cudnnBackendDescriptor_t vp = NULL;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(vp);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendExecute(S->handle, p->plan, vp);
  tsr_status st = s == CUDNN_STATUS_SUCCESS ? TSR_OK : sdpa_cudnn_fail(op, "cudnnBackendExecute", s);
  if (vp) cudnnBackendDestroyDescriptor(vp);
  if (!st) KCU_LAUNCHED(op);
  return st;
}

// ---- device side: ragged description, rows without keys --------------------------------
// Sequence c < b of the plan (kcu_sdpa_ragged): lengths, at most max_q / max_k (the plan's
// sq / skv are no smaller), and offsets in elements of the (L, H, Dh) tensors and of the
// (L, H) lse; offsets[b] = the end.
__global__ void k_sdpa_ragged(int32_t *seq_q, int32_t *seq_kv, int64_t *off_q, int64_t *off_k,
                              int64_t *off_s, const int32_t *cu_q, const int32_t *cu_k,
                              int n_clips, int b, int max_q, int max_k, int Lq, int Lk, int H,
                              int Dh) {
  const int64_t row = (int64_t)H * Dh;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c <= b; c += gridDim.x * blockDim.x) {
    if (c == b) {
      off_q[b] = Lq * row;
      off_k[b] = Lk * row;
      off_s[b] = (int64_t)Lq * H;
      continue;
    }
    int32_t sq, lq, sk, lk;
    kcu_sdpa_ragged(cu_q, n_clips, Lq, max_q, c, &sq, &lq);
    kcu_sdpa_ragged(cu_k, n_clips, Lk, max_k, c, &sk, &lk);
    seq_q[c] = lq;
    seq_kv[c] = lk;
    off_q[c] = sq * row;
    off_k[c] = sk * row;
    off_s[c] = (int64_t)sq * H;
  }
}

// Partial forward: a query whose clip has no key in the block gets out = 0, lse = -inf (the
// contract; cuDNN's fully masked rows are not that). One warp per (token, head) row.
__global__ void k_sdpa_no_keys(act_t *out, float *lse, const int32_t *seq_kv, const int32_t *cu_q,
                               int n_clips, int Lq, int H, int Dh) {
  const int lane = threadIdx.x & 31;
  const size_t rows = (size_t)Lq * H;
  for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < rows;
       r += (size_t)gridDim.x * blockDim.x / 32) {
    int c = kcu_clip_of(cu_q, n_clips, (int)(r / H));
    if (seq_kv[c] != 0) continue;
    for (int d = lane; d < Dh; d += 32) kcu_st(out, r * Dh + d, 0.0f);
    if (lane == 0) lse[r] = -INFINITY;
  }
}

// ---- the entries ------------------------------------------------------------------------
// The ragged tensors of a call, then its own buffers, then cuDNN's workspace: one
// kcu_scratch request, 256-byte aligned pieces.
struct sdpa_mem {
  int32_t *seq_q, *seq_kv;
  int64_t *off_q, *off_k, *off_s;
  char *next;  // the rest, handed out by sdpa_take
};

static size_t sdpa_round(size_t n) { return (n + 255) / 256 * 256; }
static size_t sdpa_ragged_bytes(int b) {
  return 2 * sdpa_round(sizeof(int32_t) * b) + 3 * sdpa_round(sizeof(int64_t) * (b + 1));
}
static void *sdpa_take(sdpa_mem *m, size_t bytes) {
  void *p = m->next;
  m->next += sdpa_round(bytes);
  return p;
}

// Claims `extra` bytes after the ragged tensors plus the workspace, fills the ragged
// tensors from cu_q / cu_k (lengths clamped to max_q / max_k).
static tsr_status sdpa_prepare(kb_t *kb, const char *op, const kcu_sdpa_key *key, size_t extra,
                               int64_t workspace, const int32_t *cu_q, const int32_t *cu_k,
                               int n_clips, int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                               sdpa_mem *m) {
  const int b = key->b;
  void *base;
  tsr_status st = kcu_scratch(kb, op, sdpa_ragged_bytes(b) + extra + sdpa_round((size_t)workspace), &base);
  if (st) return st;
  m->next = (char *)base;
  m->seq_q = (int32_t *)sdpa_take(m, sizeof(int32_t) * b);
  m->seq_kv = (int32_t *)sdpa_take(m, sizeof(int32_t) * b);
  m->off_q = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  m->off_k = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  m->off_s = (int64_t *)sdpa_take(m, sizeof(int64_t) * (b + 1));
  k_sdpa_ragged<<<kcu_blocks((size_t)b + 1, 256), 256, 0, kcu(kb)->stream>>>(
      m->seq_q, m->seq_kv, m->off_q, m->off_k, m->off_s, cu_q, cu_k, n_clips, b, max_q, max_k, Lq,
      Lk, H, Dh);
  KCU_LAUNCHED(op);
  return TSR_OK;
}

// 1 when every given pointer (NULL passes) has the 16-byte alignment the graphs declare
// (slices of a larger tensor at an odd token may not).
static int sdpa_aligned(const void *const *ptrs, int n) {
  for (int i = 0; i < n; i++)
    if ((uintptr_t)ptrs[i] % 16 != 0) return 0;
  return 1;
}

// The shared start of every entry: state, choice, plan. *plan = NULL: own kernels.
static tsr_status sdpa_begin(kb_t *kb, const char *op, const kcu_sdpa_shape *sh, int aligned,
                             int need_plan, sdpa_state **S_out, kcu_sdpa_key *key, sdpa_plan **plan,
                             int *use) {
  *plan = NULL;
  *use = 0;
  sdpa_state *S;
  tsr_status st = sdpa_state_of(kb, &S);
  if (st) return st;
  if (S->mode == KCU_ATTN_OWN || (S->setup && S->mode == KCU_ATTN_AUTO)) {
    S->own_calls[sh->kind]++;
    return TSR_OK;
  }
  if (S->setup)
    return err_set(S->setup, "%s: TESSERA_CUDA_ATTENTION=cudnn but cuDNN is not usable: %s", op, S->err);
  if ((st = kcu_sdpa_choose(S->mode, op, sh, &S->dev, use))) return st;
  if (*use && !aligned) {
    *use = 0;
    if (S->mode == KCU_ATTN_CUDNN)
      return err_set(TSR_EINVAL, "%s: TESSERA_CUDA_ATTENTION=cudnn but a tensor is not 16-byte aligned "
                     "(cuDNN's requirement; a slice at an odd token?)", op);
  }
  if (!*use) {
    S->own_calls[sh->kind]++;
    return TSR_OK;
  }
  *key = kcu_sdpa_key_of(sh, S->deterministic);
  *S_out = S;
  if (!need_plan) return TSR_OK;
  if ((st = sdpa_plan_of(S, op, key, plan))) return st;
  if (!*plan) *use = 0;  // auto mode, the build failed: own kernels
  return TSR_OK;
}

tsr_status kcu_sdpa_forward(kb_t *kb, const char *op, int partial, int *done, void *out,
                            float *lse, const void *q, const void *k, const void *v,
                            const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q,
                            int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  *done = 0;
  kcu_sdpa_shape sh = {partial ? KCU_SDPA_PARTIAL_FWD : KCU_SDPA_FWD, n_clips, max_q, max_k, Lq,
                       Lk, H, Dh};
  sdpa_state *S = NULL;
  kcu_sdpa_key key;
  sdpa_plan *p;
  int use;
  const void *args[] = {out, lse, q, Lk > 0 ? k : NULL, Lk > 0 ? v : NULL};
  // An empty block needs no plan: every row is "no key" below.
  tsr_status st = sdpa_begin(kb, op, &sh, sdpa_aligned(args, 5), Lk > 0, &S, &key, &p, &use);
  if (st || !use) return st;
  sdpa_mem m;
  if ((st = sdpa_prepare(kb, op, &key, 0, p ? p->workspace : 0, cu_q, cu_k, n_clips, max_q, max_k, Lq,
                         Lk, H, Dh, &m)))
    return st;
  if (p) {
    float neg_inf = -INFINITY;
    int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF, U_SEQ_Q, U_SEQ_KV,
                      U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S};
    void *ptrs[] = {(void *)q, (void *)k, (void *)v, out, lse, &scale, &neg_inf, m.seq_q, m.seq_kv,
                    m.off_q, m.off_k, m.off_k, m.off_q, m.off_s};
    if ((st = sdpa_execute(op, S, p, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), m.next))) return st;
  }
  if (partial) {
    size_t rows = (size_t)Lq * H;
    k_sdpa_no_keys<<<kcu_blocks(rows * 32, 256), 256, 0, kcu(kb)->stream>>>(
        (act_t *)out, lse, m.seq_kv, cu_q, n_clips, Lq, H, Dh);
    KCU_LAUNCHED(op);
  }
  *done = 1;
  return TSR_OK;
}

// Partial backward: dst += src (fp32 sum, rounded once) on the token rows of the clips whose
// partners in the call are not empty (seq_other[c] > 0, the ragged lengths of the other
// side); the other rows' share is zero by definition, and cuDNN leaves them unwritten. One
// warp per token row of E = H * Dh elements.
__global__ void k_sdpa_accumulate(act_t *dst, const act_t *src, const int32_t *cu,
                                  const int32_t *seq_other, int n_clips, int L, int E) {
  KCU_WARP_ROW(t, L)
    if (seq_other[kcu_clip_of(cu, n_clips, t)] == 0) continue;
    const size_t base = (size_t)t * E;
    for (int e = lane; e < E; e += 32) kcu_st(dst, base + e, kcu_ld(dst, base + e) + kcu_ld(src, base + e));
  KCU_WARP_ROW_END
}

// The backward graph's calls. attention_backward (kind BWD, cu_q == cu_k, Lq == Lk): cuDNN
// writes dq, dk, dv (a NULL one into scratch, dropped). attention_partial_backward (kind
// PARTIAL_BWD; out, lse the queries' final ones): cuDNN writes the call's share into scratch
// and k_sdpa_accumulate adds it to dq, dk, dv (those given). A partial call without queries
// or keys has no share: done without a plan.
static tsr_status sdpa_backward(kb_t *kb, const char *op, kcu_sdpa_kind kind, int *done, void *dq,
                                void *dk, void *dv, const void *dout, const void *q, const void *k,
                                const void *v, const void *out, const float *lse,
                                const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q,
                                int max_k, int Lq, int Lk, int H, int Dh, float scale) {
  *done = 0;
  const int partial = kind == KCU_SDPA_PARTIAL_BWD, work = Lq > 0 && Lk > 0;
  kcu_sdpa_shape sh = {kind, n_clips, max_q, max_k, Lq, Lk, H, Dh};
  sdpa_state *S = NULL;
  kcu_sdpa_key key;
  sdpa_plan *p;
  int use;
  // the gradients cuDNN writes itself (not the partial call's: those are scratch)
  const void *args[] = {dout, q, k, v, out, lse, partial ? NULL : dq, partial ? NULL : dk,
                        partial ? NULL : dv};
  tsr_status st = sdpa_begin(kb, op, &sh, sdpa_aligned(args, 9), work, &S, &key, &p, &use);
  if (st || !use) return st;
  if (!work) {
    *done = 1;
    return TSR_OK;
  }
  const size_t nq = (size_t)Lq * H * Dh, nk = (size_t)Lk * H * Dh, rows = (size_t)Lq * H;
  // Scratch gradients: the partial call's share, or a gradient the caller does not want
  // (cuDNN writes all three).
  const int own_q = partial || !dq, own_kv = partial || !dk;
  // delta (fp32, like the lse), the fp32 dQ accumulator without determinism, the scratch
  // gradients.
  size_t extra = sdpa_round(rows * sizeof(float)) + (key.deterministic ? 0 : sdpa_round(nq * sizeof(float))) +
                 (own_q ? sdpa_round(nq * sizeof(act_t)) : 0) + (own_kv ? 2 * sdpa_round(nk * sizeof(act_t)) : 0);
  sdpa_mem m;
  if ((st = sdpa_prepare(kb, op, &key, extra, p->workspace, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk,
                         H, Dh, &m)))
    return st;
  void *delta = sdpa_take(&m, rows * sizeof(float));
  void *acc = key.deterministic ? NULL : sdpa_take(&m, nq * sizeof(float));
  void *gq = own_q ? sdpa_take(&m, nq * sizeof(act_t)) : dq;
  void *gk = own_kv ? sdpa_take(&m, nk * sizeof(act_t)) : dk;
  void *gv = own_kv ? sdpa_take(&m, nk * sizeof(act_t)) : dv;
  cudaStream_t stream = kcu(kb)->stream;
  if (acc) KCU_CUDA(op, cudaMemsetAsync(acc, 0, nq * sizeof(float), stream));
  float neg_inf = -INFINITY, one = 1.0f;
  int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_DO, U_DQ, U_DK, U_DV, U_SCALE, U_NEG_INF, U_ONE,
                    U_SEQ_Q, U_SEQ_KV, U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S, U_DELTA, U_DQ_ACC};
  void *ptrs[] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)lse, (void *)dout, gq, gk, gv,
                  &scale, &neg_inf, &one, m.seq_q, m.seq_kv, m.off_q, m.off_k, m.off_k, m.off_q,
                  m.off_s, delta, acc};
  int nt = (int)(sizeof uids / sizeof uids[0]) - (acc ? 0 : 1);
  if ((st = sdpa_execute(op, S, p, uids, ptrs, nt, m.next))) return st;
  if (partial && dq) {
    k_sdpa_accumulate<<<kcu_warp_blocks(Lq), 256, 0, stream>>>((act_t *)dq, (const act_t *)gq, cu_q,
                                                               m.seq_kv, n_clips, Lq, H * Dh);
    KCU_LAUNCHED(op);
  }
  if (partial && dk) {
    k_sdpa_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dk, (const act_t *)gk, cu_k,
                                                               m.seq_q, n_clips, Lk, H * Dh);
    KCU_LAUNCHED(op);
    k_sdpa_accumulate<<<kcu_warp_blocks(Lk), 256, 0, stream>>>((act_t *)dv, (const act_t *)gv, cu_k,
                                                               m.seq_q, n_clips, Lk, H * Dh);
    KCU_LAUNCHED(op);
  }
  *done = 1;
  return TSR_OK;
}

tsr_status kcu_sdpa_backward(kb_t *kb, const char *op, int *done, void *dq, void *dk, void *dv,
                             const void *dout, const void *q, const void *k, const void *v,
                             const void *out, const float *lse, const int32_t *cu, int n_clips,
                             int max_len, int L, int H, int Dh, float scale) {
  return sdpa_backward(kb, op, KCU_SDPA_BWD, done, dq, dk, dv, dout, q, k, v, out, lse, cu, cu,
                       n_clips, max_len, max_len, L, L, H, Dh, scale);
}

tsr_status kcu_sdpa_partial_backward(kb_t *kb, const char *op, int *done, void *dq, void *dk,
                                     void *dv, const void *dout, const void *q, const void *k,
                                     const void *v, const void *out, const float *lse,
                                     const int32_t *cu_q, const int32_t *cu_k, int n_clips,
                                     int max_q, int max_k, int Lq, int Lk, int H, int Dh,
                                     float scale) {
  return sdpa_backward(kb, op, KCU_SDPA_PARTIAL_BWD, done, dq, dk, dv, dout, q, k, v, out, lse,
                       cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale);
}

// ---- planning without a GPU (tests) ----------------------------------------------------------
extern "C" tsr_status kcu_sdpa_plan_offline(const kcu_sdpa_key *key, const char *device_json,
                                            int64_t max_workspace, int64_t *workspace, char *info,
                                            size_t n) {
  cudnnBackendDescriptor_t dp = NULL;
  cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &dp);
  if (s == CUDNN_STATUS_SUCCESS)
    s = cudnnBackendSetAttribute(dp, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                 (int64_t)strlen(device_json), device_json);
  if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(dp);
  if (s != CUDNN_STATUS_SUCCESS) {
    tsr_status st = sdpa_cudnn_fail("kcu_sdpa_plan_offline", "device properties from JSON", s);
    if (dp) cudnnBackendDestroyDescriptor(dp);
    return st;
  }
  sdpa_plan p;
  memset(&p, 0, sizeof p);
  int ok = sdpa_build(&p, key, NULL, dp, max_workspace, 1);
  tsr_status st = TSR_OK;
  if (ok) {
    *workspace = p.workspace;
    if (info && n)
      snprintf(info, n, "engine %lld [%s]%s", (long long)p.engine, p.notes,
               p.state == 2 ? ", compiled (not loaded: no CUDA driver)" : "");
  } else {
    st = err_set(TSR_EIO, "%s", p.err);
  }
  sdpa_plan_clear(&p);
  cudnnBackendDestroyDescriptor(dp);
  return st;
}

// ---- report (cuda.h) ---------------------------------------------------------------------
extern "C" void kernels_cuda_attention_report(char *buf, size_t n) {
  if (!buf || !n) return;
  buf[0] = 0;
  const kernels_backend *kb = kernels_cuda();
  sdpa_state *S = kb ? (sdpa_state *)kcu(kb)->sdpa : NULL;
  if (!S) return;
  static const char *const modes[] = {"auto", "cudnn", "own"};
  size_t u = 0;
#define REPORT(...)                                                       \
  do {                                                                    \
    if (u < n) u += (size_t)snprintf(buf + u, n - u, __VA_ARGS__);       \
  } while (0)
  REPORT("attention: TESSERA_CUDA_ATTENTION=%s, deterministic backward %d, cuDNN %ld, sm_%d, "
         "workspace limit %lld bytes%s%s\n", modes[S->mode], S->deterministic, S->dev.cudnn, S->dev.sm,
         (long long)S->max_workspace, S->setup ? "; cuDNN not usable: " : "", S->setup ? S->err : "");
  REPORT("  own kernels without a plan lookup: forward %lu, backward %lu, partial forward %lu, "
         "partial backward %lu calls\n", S->own_calls[KCU_SDPA_FWD], S->own_calls[KCU_SDPA_BWD],
         S->own_calls[KCU_SDPA_PARTIAL_FWD], S->own_calls[KCU_SDPA_PARTIAL_BWD]);
  for (int i = 0; i < SDPA_CACHE; i++) {
    const sdpa_plan *p = &S->cache[i];
    if (p->state == 0) continue;
    REPORT("  %s b %d sq %d skv %d H %d Dh %d%s: ", kcu_sdpa_kind_name((kcu_sdpa_kind)p->key.kind),
           p->key.b, p->key.sq, p->key.skv, p->key.h, p->key.d,
           kcu_sdpa_backward_kind(p->key.kind) ? (p->key.deterministic ? " deterministic" : " atomic dQ")
                                               : "");
    if (p->state == 1)
      REPORT("cuDNN engine %lld [%s], workspace %lld bytes, %lu calls\n", (long long)p->engine, p->notes,
             (long long)p->workspace, p->calls);
    else
      REPORT("no plan (%s), %lu calls on the own kernels\n", p->err, p->calls);
  }
#undef REPORT
}