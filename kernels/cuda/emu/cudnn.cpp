// kernels/cuda/emu/cudnn.cpp — the emulated device's cuDNN (cuemu.h). By default there is
// none: cudnnCreate and every backend-API call answer CUDNN_STATUS_NOT_SUPPORTED, so the
// CUDA backend's attention takes its own kernels (TESSERA_CUDA_ATTENTION=auto), which is
// what most emulation tests test; TESSERA_CUDA_ATTENTION=cudnn fails with cuDNN's error, as
// it would on a GPU where cuDNN refuses the graphs.
//
// With TESSERA_EMU_CUDNN=1 (read at each cudnnGetVersion / cudnnCreate) it is a stand-in
// for the fused attention the backend builds (kernels/cuda/attention_cudnn_graph.h): every
// descriptor keeps its attributes; the heuristics offer one engine (index 0, no notes, no
// workspace) for any graph; executing a plan runs the SDPA of that graph's tensors from the
// variant pack, in stream order: the forward graph (O, stats) or, where the pack binds dO,
// the backward graph (delta, dQ, dK, dV; dK, dV at their own offsets where the pack binds
// them), per sequence b and head h over rows
// [0, seq_len_q[b]) x [0, seq_len_kv[b]) at the tensors' ragged offsets, token-major
// (rows of H x Dh elements: the layout those graphs declare). Roundings as cuDNN's: P
// (forward) and P, dS (backward) to bf16 before their products, fp32 sums, bf16 stores;
// in the forward, a query row of a sequence without keys gets NaN (cuDNN does not define
// those rows: the backend must not use them). It checks the backend's use of cuDNN — the ragged
// descriptions, the variant packs, what it does with the results (the masked pair list
// too) — not cuDNN's graph rules (tests/kernels/test_cuda_sdpa_plan.c plans the graphs
// with the real cuDNN) or its kernels.
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <vector>

#include "kernels/cuda/attention_cudnn_graph.h"
#include "kernels/cuda/emu/emu_internal.h"

namespace {

bool emu_on() {
  const char *v = getenv("TESSERA_EMU_CUDNN");
  return v && !strcmp(v, "1");
}

struct attr_val {
  cudnnBackendAttributeType_t type;
  int64_t n;
  std::vector<unsigned char> bytes;
};

struct emu_desc {
  cudnnBackendDescriptorType_t type;
  std::map<int, attr_val> attrs;
  emu_desc *graph = nullptr;  // heuristics, engine configs, engines, plans: the op graph
};

size_t elem_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE: return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64: return 8;
    case CUDNN_TYPE_FLOAT: return 4;
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_VOID_PTR: return sizeof(void *);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_CHAR: return 1;
    default: return 4;  // the enums
  }
}

const attr_val *get(const emu_desc *d, cudnnBackendAttributeName_t n) {
  auto it = d->attrs.find((int)n);
  return it == d->attrs.end() ? nullptr : &it->second;
}

template <class T> T first(const attr_val *a) {
  T v;
  memcpy(&v, a->bytes.data(), sizeof v);
  return v;
}

emu_desc *desc_attr(const emu_desc *d, cudnnBackendAttributeName_t n) {
  const attr_val *a = get(d, n);
  return a && a->n > 0 ? first<emu_desc *>(a) : nullptr;
}

float bf(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
uint16_t to_bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
float round_bf(float f) { return bf(to_bf(f)); }

// One execution: the graph's sizes and the pack's pointers by uid.
struct sdpa_call {
  int64_t B = 0, H = 0, D = 0;
  bool backward = false;
  std::map<int64_t, void *> ptr;
  float scale = 1.0f;
};

void run_sdpa(const sdpa_call &c) {
  auto P = [&](int64_t uid) { auto it = c.ptr.find(uid); return it == c.ptr.end() ? nullptr : it->second; };
  const uint16_t *q = (const uint16_t *)P(U_Q), *k = (const uint16_t *)P(U_K), *v = (const uint16_t *)P(U_V);
  const int32_t *seq_q = (const int32_t *)P(U_SEQ_Q), *seq_kv = (const int32_t *)P(U_SEQ_KV);
  const int64_t *off_q = (const int64_t *)P(U_OFF_Q), *off_k = (const int64_t *)P(U_OFF_K);
  const int64_t *off_v = (const int64_t *)P(U_OFF_V), *off_o = (const int64_t *)P(U_OFF_O);
  const int64_t *off_s = (const int64_t *)P(U_OFF_S);
  // the masked backward's graph: dK, dV at offsets of their own
  const int64_t *off_dk = P(U_OFF_DKV) ? (const int64_t *)P(U_OFF_DKV) : off_k;
  const int64_t *off_dv = P(U_OFF_DKV) ? (const int64_t *)P(U_OFF_DKV) : off_v;
  const int64_t H = c.H, D = c.D, row = H * D;
  std::vector<float> s, p;
  for (int64_t b = 0; b < c.B; b++) {
    const int64_t nq = seq_q[b], nk = seq_kv[b];
    s.assign((size_t)(nq * nk), 0.0f);
    p.assign((size_t)(nq * nk), 0.0f);
    for (int64_t h = 0; h < H; h++) {
      auto Q = [&](int64_t i, int64_t d) { return bf(q[off_q[b] + i * row + h * D + d]); };
      auto K = [&](int64_t j, int64_t d) { return bf(k[off_k[b] + j * row + h * D + d]); };
      auto V = [&](int64_t j, int64_t d) { return bf(v[off_v[b] + j * row + h * D + d]); };
      for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < nk; j++) {
          float a = 0.0f;
          for (int64_t d = 0; d < D; d++) a += Q(i, d) * K(j, d);
          s[i * nk + j] = c.scale * a;
        }
      if (!c.backward) {
        uint16_t *o = (uint16_t *)P(U_O);
        float *stats = (float *)P(U_STATS);
        for (int64_t i = 0; i < nq; i++) {
          float m = -INFINITY, z = 0.0f;
          for (int64_t j = 0; j < nk; j++) m = fmaxf(m, s[i * nk + j]);
          for (int64_t j = 0; j < nk; j++) z += expf(s[i * nk + j] - m);
          stats[off_s[b] + i * H + h] = nk ? m + logf(z) : NAN;
          for (int64_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < nk; j++) acc += round_bf(expf(s[i * nk + j] - m) / z) * V(j, d);
            o[off_o[b] + i * row + h * D + d] = to_bf(nk ? acc : NAN);
          }
        }
        continue;
      }
      const uint16_t *o = (const uint16_t *)P(U_O), *dout = (const uint16_t *)P(U_DO);
      const float *stats = (const float *)P(U_STATS);
      float *delta = (float *)P(U_DELTA);
      uint16_t *dq = (uint16_t *)P(U_DQ), *dk = (uint16_t *)P(U_DK), *dv = (uint16_t *)P(U_DV);
      auto dO = [&](int64_t i, int64_t d) { return bf(dout[off_o[b] + i * row + h * D + d]); };
      std::vector<float> dl((size_t)nq);
      for (int64_t i = 0; i < nq; i++) {
        float a = 0.0f;
        for (int64_t d = 0; d < D; d++) a += dO(i, d) * bf(o[off_o[b] + i * row + h * D + d]);
        dl[i] = a;
        delta[off_s[b] + i * H + h] = a;
      }
      // p: P, s: dS (both rounded to bf16 for the products)
      for (int64_t i = 0; i < nq; i++)
        for (int64_t j = 0; j < nk; j++) {
          float pij = expf(s[i * nk + j] - stats[off_s[b] + i * H + h]), dp = 0.0f;
          for (int64_t d = 0; d < D; d++) dp += dO(i, d) * V(j, d);
          p[i * nk + j] = round_bf(pij);
          s[i * nk + j] = round_bf(c.scale * pij * (dp - dl[i]));
        }
      for (int64_t i = 0; i < nq; i++)
        for (int64_t d = 0; d < D; d++) {
          float a = 0.0f;
          for (int64_t j = 0; j < nk; j++) a += s[i * nk + j] * K(j, d);
          dq[off_q[b] + i * row + h * D + d] = to_bf(a);
        }
      for (int64_t j = 0; j < nk; j++)
        for (int64_t d = 0; d < D; d++) {
          float gk = 0.0f, gv = 0.0f;
          for (int64_t i = 0; i < nq; i++) {
            gk += s[i * nk + j] * Q(i, d);
            gv += p[i * nk + j] * dO(i, d);
          }
          dk[off_dk[b] + j * row + h * D + d] = to_bf(gk);
          dv[off_dv[b] + j * row + h * D + d] = to_bf(gv);
        }
    }
  }
}

// The tensor descriptors of the graph's operations, by uid.
void graph_tensors(const emu_desc *graph, std::map<int64_t, const emu_desc *> *out) {
  const attr_val *ops = get(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS);
  if (!ops) return;
  for (int64_t i = 0; i < ops->n; i++) {
    emu_desc *op;
    memcpy(&op, ops->bytes.data() + i * sizeof op, sizeof op);
    for (auto &kv : op->attrs) {
      if (kv.second.type != CUDNN_TYPE_BACKEND_DESCRIPTOR) continue;
      for (int64_t j = 0; j < kv.second.n; j++) {
        emu_desc *t;
        memcpy(&t, kv.second.bytes.data() + j * sizeof t, sizeof t);
        if (!t || t->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR) continue;
        const attr_val *uid = get(t, CUDNN_ATTR_TENSOR_UNIQUE_ID);
        if (uid) (*out)[first<int64_t>(uid)] = t;
      }
    }
  }
}

}  // namespace

extern "C" {

size_t cudnnGetVersion(void) { return emu_on() ? 91900 : 0; }
const char *cudnnGetErrorString(cudnnStatus_t s) {
  return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS"
                                   : "CUDNN_STATUS_NOT_SUPPORTED (no cuDNN on the emulated device)";
}
void cudnnGetLastErrorString(char *message, size_t max_size) {
  if (message && max_size) snprintf(message, max_size, "no cuDNN on the emulated device");
}

struct cudnnContext {
  cudaStream_t stream;
};

cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
  *h = NULL;
  if (!emu_on()) return CUDNN_STATUS_NOT_SUPPORTED;
  *h = new cudnnContext{0};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  delete h;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  if (!h) return CUDNN_STATUS_NOT_SUPPORTED;
  h->stream = s;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *d) {
  *d = NULL;
  if (!emu_on()) return CUDNN_STATUS_NOT_SUPPORTED;
  emu_desc *e = new emu_desc;
  e->type = t;
  *d = (cudnnBackendDescriptor_t)e;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d) {
  delete (emu_desc *)d;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t d) {
  if (!d) return CUDNN_STATUS_NOT_SUPPORTED;
  emu_desc *e = (emu_desc *)d;
  if (e->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    e->graph = desc_attr(e, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
  if (e->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
    emu_desc *cfg = desc_attr(e, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
    e->graph = cfg ? cfg->graph : nullptr;
    if (!e->graph) return CUDNN_STATUS_BAD_PARAM;
  }
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n,
                                       cudnnBackendAttributeType_t t, int64_t c, const void *v) {
  if (!d) return CUDNN_STATUS_NOT_SUPPORTED;
  attr_val a;
  a.type = t;
  a.n = c;
  a.bytes.assign((const unsigned char *)v, (const unsigned char *)v + c * elem_size(t));
  ((emu_desc *)d)->attrs[(int)n] = a;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t n,
                                       cudnnBackendAttributeType_t t, int64_t want, int64_t *got,
                                       void *v) {
  if (got) *got = 0;
  if (!d) return CUDNN_STATUS_NOT_SUPPORTED;
  emu_desc *e = (emu_desc *)d;
  switch (n) {
    case CUDNN_ATTR_ENGINEHEUR_RESULTS:  // one engine configuration, into the caller's
    case CUDNN_ATTR_ENGINECFG_ENGINE:    // its engine, likewise
      if (got) *got = 1;
      if (want > 0) ((emu_desc **)v)[0]->graph = e->graph;
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_ENGINE_GLOBAL_INDEX:
    case CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE:
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
      if (got) *got = 1;
      *(int64_t *)v = 0;
      return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
      return CUDNN_STATUS_SUCCESS;
    default:
      (void)t;
      return CUDNN_STATUS_NOT_SUPPORTED;
  }
}
cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
  if (!h || !plan || !pack) return CUDNN_STATUS_NOT_SUPPORTED;
  const emu_desc *pl = (const emu_desc *)plan, *vp = (const emu_desc *)pack;
  std::map<int64_t, const emu_desc *> tensors;
  graph_tensors(pl->graph, &tensors);
  const attr_val *uids = get(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const attr_val *ptrs = get(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  auto qt = tensors.find(U_Q);
  if (!uids || !ptrs || uids->n != ptrs->n || qt == tensors.end()) return CUDNN_STATUS_BAD_PARAM;
  sdpa_call c;
  const attr_val *dims = get(qt->second, CUDNN_ATTR_TENSOR_DIMENSIONS);
  if (!dims || dims->n != 4) return CUDNN_STATUS_BAD_PARAM;
  int64_t dv[4];
  memcpy(dv, dims->bytes.data(), sizeof dv);
  c.B = dv[0], c.H = dv[1], c.D = dv[3];
  for (int64_t i = 0; i < uids->n; i++) {
    int64_t u;
    void *p;
    memcpy(&u, uids->bytes.data() + i * 8, 8);
    memcpy(&p, ptrs->bytes.data() + i * sizeof p, sizeof p);
    c.ptr[u] = p;
  }
  const int64_t need[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_SEQ_Q, U_SEQ_KV,
                          U_OFF_Q, U_OFF_K, U_OFF_V, U_OFF_O, U_OFF_S};
  for (int64_t u : need)
    if (!c.ptr.count(u) || !c.ptr[u]) return CUDNN_STATUS_BAD_PARAM;
  c.backward = c.ptr.count(U_DO) != 0;
  if (c.backward)
    for (int64_t u : {U_DO, U_DQ, U_DK, U_DV, U_DELTA})
      if (!c.ptr.count(u) || !c.ptr[u]) return CUDNN_STATUS_BAD_PARAM;
  c.scale = *(const float *)c.ptr[U_SCALE];  // by value: read now
  cuemu_stream_work(h->stream, [c]() { run_sdpa(c); });
  return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
