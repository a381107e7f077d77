// kernels/cuda/attention_cudnn_graph.cu — the cuDNN operation graphs of the CUDA backend's
// fused attention (attention_cudnn_graph.h), built with cuDNN's graph/backend API
// (cudnnBackend* descriptors: the C++ cudnn_frontend is not a dependency). Plans of them are
// attention_cudnn_plan.cu's, the entries that run them attention_cudnn.cu's.
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
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/attention_cudnn_graph.h"

// ---- the builder (attention_cudnn_graph.h) ------------------------------------------------
void sg_fail(sdpa_graph *g, cudnnStatus_t s, const char *call, const char *name) {
  if (g->st != CUDNN_STATUS_SUCCESS || s == CUDNN_STATUS_SUCCESS) return;
  g->st = s;
  snprintf(g->what, sizeof g->what, "%s (%s)", call, name);
}

void sg_destroy(sdpa_graph *g) {
  if (!g) return;
  for (int i = g->n_desc - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(g->desc[i]);
  free(g);
}

cudnnBackendDescriptor_t sg_new(sdpa_graph *g, cudnnBackendDescriptorType_t type, const char *name) {
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

void sg_set(sdpa_graph *g, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
            cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *attr_name,
            const char *name) {
  if (g->st != CUDNN_STATUS_SUCCESS) return;
  sg_fail(g, cudnnBackendSetAttribute(d, attr, type, n, v), attr_name, name);
}

void sg_finalize(sdpa_graph *g, cudnnBackendDescriptor_t d, const char *name) {
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
  // the masked backward writes dK, dV into per-sequence scratch: offsets of their own
  cudnnBackendDescriptor_t off_dkv =
      k->kind == KCU_SDPA_MASKED_BWD
          ? sg_tensor(g, "offset_dkv", U_OFF_DKV, CUDNN_DATA_INT64, D4(B + 1, 1, 1, 1), one, false, false, NULL)
          : NULL;
  cudnnBackendDescriptor_t dk = sg_tensor(g, "dK", U_DK, CUDNN_DATA_BFLOAT16, kd, ks, false, false,
                                          off_dkv ? off_dkv : t.off_k);
  cudnnBackendDescriptor_t dv = sg_tensor(g, "dV", U_DV, CUDNN_DATA_BFLOAT16, kd, ks, false, false,
                                          off_dkv ? off_dkv : t.off_v);
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

sdpa_graph *sdpa_graph_build(const kcu_sdpa_key *key, cudnnHandle_t handle,
                             cudnnBackendDescriptor_t *graph) {
  sdpa_graph *g = (sdpa_graph *)calloc(1, sizeof(sdpa_graph));
  if (!g) return NULL;
  g->next_uid = U_VIRTUAL;
  if (kcu_sdpa_backward_kind(key->kind)) sg_backward(g, key);
  else sg_forward(g, key);
  *graph = sg_new(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "graph");
  SG_SET(g, *graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->n_ops, g->ops, "graph");
  if (handle) SG_SET(g, *graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph");
  sg_finalize(g, *graph, "graph");
  return g;
}
