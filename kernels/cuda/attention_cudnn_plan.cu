// kernels/cuda/attention_cudnn_plan.cu — execution plans of the cuDNN attention graphs
// (attention_cudnn_plan.h): the engine search, the plan cache in the backend's context,
// running a plan, planning without a GPU (tests), and the path report (cuda.h).
//
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
// retrying). The softmax scale is a by-value input, so it is not part of the key.
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention_cudnn_plan.h"

extern "C" {
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/sdpa.h"
}

// ---- plans ---------------------------------------------------------------------------------

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
  cudnnBackendDescriptor_t graph = NULL;
  sdpa_graph *g = sdpa_graph_build(key, handle, &graph);
  if (!g) {
    snprintf(p->err, sizeof p->err, "out of host memory");
    return 0;
  }
  p->g = g;
  const char *kind = kcu_sdpa_kind_name((kcu_sdpa_kind)key->kind);
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

// The state of kb (created on first use: environment switches, cuDNN handle on the
// backend's stream). TSR_EINVAL only for a bad switch value; a cuDNN setup failure is kept
// in ->setup (auto: own kernels; cudnn: each call reports it).
tsr_status sdpa_state_of(kb_t *kb, sdpa_state **out) {
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
tsr_status sdpa_plan_of(sdpa_state *S, const char *op, const kcu_sdpa_key *key, sdpa_plan **plan) {
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
tsr_status sdpa_execute(const char *op, sdpa_state *S, sdpa_plan *p, const int64_t *uids, void **ptrs,
                        int n, void *ws) {
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
  static const char *const masks[] = {"block_causal", "window"};
  for (int i = 0; i < 2; i++)
    REPORT("  masked (%s) on cuDNN's pair list: forward %lu, backward %lu calls (the gated own "
           "kernels take a call whose layout does not fit)\n", masks[i], S->mask_calls[i][KCU_SDPA_PARTIAL_FWD],
           S->mask_calls[i][KCU_SDPA_PARTIAL_BWD] + S->mask_calls[i][KCU_SDPA_MASKED_BWD]);
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
