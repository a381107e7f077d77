// kernels/entries.h — every entry of kernels_backend, one row each: the one list of them.
//
// A plain C X-macro list (as LLVM's .def files): no include guard, no declarations of its
// own. An includer defines
//   KERNELS_ENTRY(RET, NAME, CLASS, ACT, PARAMS, ARGS, BYTES, FLOPS)
// includes this file and undefines the macro; each row then expands to what it needs:
// kernels.h the function-pointer members of kernels_backend (`RET (*NAME) PARAMS;`, in this
// order) and the unsupported-entry stubs, kernels/profile.c the timed forwarders, the
// names and the classes, tests/kernels/test_backend_ops.c its list of the entries it must
// cover, the backends their declarations and tables (kernels/cpu/cpu.h, backend.c;
// kernels/cuda/kcu.h, backend.cu). A row's fields:
//   RET     tsr_status (every entry but free and graph_free, which return nothing)
//   NAME    the member's name (what the profiler and the tests print)
//   CLASS   the profiler's kernel class (kernels/profile.h KERNELS_PROFILE_<CLASS>), or NONE
//           for the optional entries a backend may leave NULL (graph_*, path_stats): those
//           are not timed, and a caller tests them for NULL
//   ACT     ACT: the entry has [act] tensor arguments (void *), so its math is written per
//           act dtype (the CPU: an fp32 adapter f32_NAME and a bf16 kbf_NAME); ANY: one
//           function serves every act dtype (memory, [f32] helpers, cast, optimizer)
//   PARAMS  the signature, once: the backend first, then the entry's arguments
//   ARGS    the names of PARAMS in order (the forwarders pass them on)
//   BYTES   the bytes a call must move at least, an expression of the arguments: every
//           input read once, every output written once, an accumulated output read and
//           written; A(n) bytes of n [act] elements, F(n) of n fp32 (int32 index entries
//           are counted as F too); per-clip vectors once per clip; 0 where not counted
//   FLOPS   the floating-point operations of a call (the GEMMs' 2 m n k), 0 where the
//           entry is bound by memory or its work depends on device-resident indices
// The comment above a row is the entry's contract (with the contract of every entry at the
// top of kernels/kernels.h). Adding an entry: docs/kernels.md "Adding an entry".
//
// Every entry with a CLASS other than NONE and a status to return may be unsupported by a
// backend (left NULL in its table): kernels_fill_unsupported (kernels.h) sets it to a stub
// that returns TSR_EINVAL naming the entry and the backend, and kernels_has tells.

// ---- memory --------------------------------------------------------------------
// *ptr = `bytes` of zero-filled backend memory, 64-byte aligned (bytes == 0 gives a
// valid pointer to free). TSR_ENOMEM when it cannot be had, with a message naming the
// bytes asked, what the backend holds and how to get more.
// CPU: one host allocation per call. CUDA: a suballocation (256-byte aligned) of ONE
// device allocation per run, the arena, which also holds the backend's own workspaces
// (cuBLASLt's, reduction scratch): no cudaMalloc after it exists, none in a training
// step. The arena is made by `reserve`, or else by the first alloc, with the size of
// TESSERA_CUDA_ARENA when set (bytes with an optional K/M/G/T suffix, e.g. "60G", or
// a percentage of the device's free memory, e.g. "80%") and otherwise this process's
// share of the device's free memory less its own headroom for the CUDA libraries:
// free / S - max(1 GiB, 4% of the device's total memory), rounded down to 2 MiB, where S
// is the number of processes sharing the device (ceil(MPI local ranks / visible devices),
// 1 with a device each); each process keeps a headroom because each has its own CUDA
// context and library workspaces (kernels/arena.h kernels_arena_default_size);
// TESSERA_CUDA_ARENA=none: a cudaMalloc per allocation (for compute-sanitizer).
KERNELS_ENTRY(tsr_status, alloc, MEMORY, ANY,
              (const kernels_backend *kb, void **ptr, size_t bytes),
              (kb, ptr, bytes),
              0, 0)
// Frees memory from alloc; NULL is ignored.
KERNELS_ENTRY(void, free, MEMORY, ANY,
              (const kernels_backend *kb, void *ptr),
              (kb, ptr),
              0, 0)
KERNELS_ENTRY(tsr_status, to_device, MEMORY, ANY,
              (const kernels_backend *kb, void *dst, const void *src_host, size_t bytes),
              (kb, dst, src_host, bytes),
              0, 0)
KERNELS_ENTRY(tsr_status, to_host, MEMORY, ANY,
              (const kernels_backend *kb, void *dst_host, const void *src, size_t bytes),
              (kb, dst_host, src, bytes),
              0, 0)
// Device-to-device copy; the ranges must not overlap.
KERNELS_ENTRY(tsr_status, copy, MEMORY, ANY,
              (const kernels_backend *kb, void *dst, const void *src, size_t bytes),
              (kb, dst, src, bytes),
              2.0 * (double)bytes, 0)
// Strided device-to-device copy of `rows` rows of row_bytes bytes: row i from
// src + i * src_pitch to dst + i * dst_pitch (pitches in bytes, >= row_bytes); the ranges
// must not overlap. Ulysses attention's head slices (model/dist/ulysses_attention.h).
KERNELS_ENTRY(tsr_status, copy_2d, MEMORY, ANY,
              (const kernels_backend *kb, void *dst, size_t dst_pitch, const void *src,
               size_t src_pitch, size_t row_bytes, size_t rows),
              (kb, dst, dst_pitch, src, src_pitch, row_bytes, rows),
              2.0 * (double)row_bytes * (double)rows, 0)
KERNELS_ENTRY(tsr_status, memset_zero, MEMORY, ANY,
              (const kernels_backend *kb, void *ptr, size_t bytes),
              (kb, ptr, bytes),
              (double)bytes, 0)
// Waits for every queued entry to finish (no-op on the CPU).
KERNELS_ENTRY(tsr_status, sync, OTHER, ANY,
              (const kernels_backend *kb),
              (kb),
              0, 0)
// Sizes the backend's memory for this run: on CUDA, makes the arena of exactly `bytes`
// (0, or TESSERA_CUDA_ARENA set: the sizing of alloc; the trainer reserves its memory
// model's count, so a run takes what it needs, not the device). Call it before the
// first alloc; once the arena
// exists, TSR_EINVAL unless bytes is 0 or its size. A no-op on the CPU (host memory is
// allocated per call).
KERNELS_ENTRY(tsr_status, reserve, OTHER, ANY,
              (const kernels_backend *kb, size_t bytes),
              (kb, bytes),
              0, 0)
// Memory of the backend, in bytes, host values: in_use (allocated now, by alloc and the
// backend's own workspaces), peak (the largest in_use so far) and capacity (the arena's
// size; 0 where the backend allocates per call, the CPU). Any pointer may be NULL.
KERNELS_ENTRY(tsr_status, memory_stats, OTHER, ANY,
              (const kernels_backend *kb, size_t *in_use_host, size_t *peak_host,
               size_t *capacity_host),
              (kb, in_use_host, peak_host, capacity_host),
              0, 0)
// ---- recorded graphs (optional: NULL where the backend records nothing, the CPU) ----
// graph_begin starts recording: until graph_end, entries are recorded, not run, and each
// records the pointers and sizes it was given. Between the two, nothing may wait for the
// device, allocate or read back (sync, to_host, to_device, sumsq, alloc, free, reserve):
// the recording then fails. graph_end stops recording and gives *graph, replayable by
// graph_launch (queued like an entry; the same pointers, sizes and scalars, the contents
// of device memory as they are at replay), freed by graph_free. A recording that failed
// (any entry's error, an unsupported call, the backend's scratch moving) returns that
// error from graph_end, *graph = NULL, and leaves the backend as before graph_begin (the
// recorded entries never ran: run them again eagerly). graph_launch sets *stale = 1 and
// queues nothing when the graph depends on backend memory that has moved since it was
// recorded (the scratch grew): free it, run eagerly, record again. CUDA: stream capture into a CUDA graph (kernels/cuda/graph.cu);
// filled only with TESSERA_CUDA_GRAPHS=1 (docs/gpu.md). kernels/graph_cache.h decides
// what to record and when.
KERNELS_ENTRY(tsr_status, graph_begin, NONE, ANY,
              (const kernels_backend *kb),
              (kb),
              0, 0)
KERNELS_ENTRY(tsr_status, graph_end, NONE, ANY,
              (const kernels_backend *kb, void **graph),
              (kb, graph),
              0, 0)
KERNELS_ENTRY(tsr_status, graph_launch, NONE, ANY,
              (const kernels_backend *kb, void *graph, int *stale),
              (kb, graph, stale),
              0, 0)
KERNELS_ENTRY(void, graph_free, NONE, ANY,
              (const kernels_backend *kb, void *graph),
              (kb, graph),
              0, 0)
// Memory of the backend's space that can still be had and its total, in bytes: host
// MemAvailable and MemTotal (/proc/meminfo; shared by every process of the node) on the
// CPU, cudaMemGetInfo of the device on CUDA. For the trainer's memory model.
KERNELS_ENTRY(tsr_status, mem_info, OTHER, ANY,
              (const kernels_backend *kb, size_t *free_bytes, size_t *total_bytes),
              (kb, free_bytes, total_bytes),
              0, 0)
// Which implementation ran the calls so far (optional: NULL where every entry has one
// path, the CPU). Counts since the backend was created, host values. A GEMM that the
// vendor library (cuBLASLt) has no algorithm for runs the backend's plain kernel, many
// times slower; attention runs the vendor's fused kernel (cuDNN) or the backend's own.
// Benchmarks report them so that a slow step names its cause.
KERNELS_ENTRY(tsr_status, path_stats, NONE, ANY,
              (const kernels_backend *kb, kernels_path_stats *out_host),
              (kb, out_host),
              0, 0)

// ---- dtype conversion ------------------------------------------------------------
// dst = src converted elementwise (fp32 -> bf16 rounds to nearest even; bf16 -> fp32 is
// exact; same dtype copies). For the working copy of the weights (master fp32 -> act
// after init, load and every optimizer step) and for reading activations back as fp32.
// Any pair of kernels_dtype works on every backend, whatever its act_dtype.
// dst: (n) [dst_dtype], src: (n) [src_dtype]; must not overlap.
KERNELS_ENTRY(tsr_status, cast, ELEMENTWISE, ANY,
              (const kernels_backend *kb, void *dst, kernels_dtype dst_dtype, const void *src,
               kernels_dtype src_dtype, size_t n),
              (kb, dst, dst_dtype, src, src_dtype, n),
              (double)n * (double)(kernels_dtype_size(dst_dtype) + kernels_dtype_size(src_dtype)),
              0)

// ---- small elementwise helpers (n elements) ----------------------------------------
// fill, scale, add, axpy are [f32]: for parameters, their gradients, t and statistics
// (model/cond.c scales t). add_act and axpy_act are their [act] forms, for activations
// and activation gradients (model/cond.c adds the label embedding to c,
// model/layers.c adds the second path of the residual-stream gradient).
// x: (n) [f32]
KERNELS_ENTRY(tsr_status, fill, ELEMENTWISE, ANY,
              (const kernels_backend *kb, float *x, float value, size_t n),
              (kb, x, value, n),
              F(n), 0)
// x *= alpha [f32]
KERNELS_ENTRY(tsr_status, scale, ELEMENTWISE, ANY,
              (const kernels_backend *kb, float *x, float alpha, size_t n),
              (kb, x, alpha, n),
              F(2.0 * n), 0)
// out = a + b. out: (n), a: (n), b: (n) [f32]
KERNELS_ENTRY(tsr_status, add, ELEMENTWISE, ANY,
              (const kernels_backend *kb, float *out, const float *a, const float *b, size_t n),
              (kb, out, a, b, n),
              F(3.0 * n), 0)
// y += alpha * x. y: (n), x: (n) [f32]
KERNELS_ENTRY(tsr_status, axpy, ELEMENTWISE, ANY,
              (const kernels_backend *kb, float *y, float alpha, const float *x, size_t n),
              (kb, y, alpha, x, n),
              F(3.0 * n), 0)
// out = a + b. out, a, b: (n) [act] (out may equal a or b)
KERNELS_ENTRY(tsr_status, add_act, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const void *a, const void *b, size_t n),
              (kb, out, a, b, n),
              A(3.0 * n), 0)
// y += alpha * x. y, x: (n) [act]
KERNELS_ENTRY(tsr_status, axpy_act, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *y, float alpha, const void *x, size_t n),
              (kb, y, alpha, x, n),
              A(3.0 * n), 0)
// out = a * in + b, e.g. a = 2/255, b = -1 maps uint8 pixels to [-1, 1].
// out: (n) [act], in: (n) uint8
KERNELS_ENTRY(tsr_status, u8_affine, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const uint8_t *in, float a, float b, size_t n),
              (kb, out, in, a, b, n),
              (double)n + A(n), 0)

// ---- GEMM (OpenBLAS sgemm on the CPU) -----------------------------------------
// General row-major GEMM: c = alpha * op(a) * op(b) + beta * c, op(x) = x or x^T.
// c: (m, n) [act]; a: (m, k), or (k, m) if trans_a [act]; b: (k, n), or (n, k) if
// trans_b [act]. beta == 0 overwrites c (its old contents are ignored, NaN included);
// otherwise c is read, the sum formed in fp32 and rounded once.
KERNELS_ENTRY(tsr_status, gemm, GEMM, ACT,
              (const kernels_backend *kb, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const void *a, const void *b, float beta, void *c),
              (kb, trans_a, trans_b, m, n, k, alpha, a, b, beta, c),
              A((double)m * k + (double)k * n + (double)m * n * (beta != 0.0f ? 2 : 1)),
              2.0 * m * n * k)
// gemm on column slices of wider matrices, with a choice of output dtype (LoRA's adapters
// that share an input: one down-projection for all of them, each adapter reading its
// columns; model/lora.c). c = alpha op(a) op(b) + beta c exactly as gemm, but row i of
// each operand starts ld elements after row i - 1: a is (m, k) rows of lda >= k, or
// (k, m) rows of lda >= m if trans_a; b is (k, n) rows of ldb >= n, or (n, k) rows of
// ldb >= k if trans_b; c is (m, n) rows of ldc >= n. The elements between a row's end
// and the next row's start are neither read nor written. c_dtype is kb->act_dtype (c is
// [act], rounded once as gemm's) or KERNELS_F32 (c is [f32], a parameter gradient formed
// and accumulated in fp32 at any act dtype, as linear_backward's dw). a, b: [act]. With
// dense strides and c_dtype = act it computes what gemm computes (bitwise on the CPU).
// TSR_EINVAL for a stride below its row's length or another c_dtype.
KERNELS_ENTRY(tsr_status, gemm_strided, GEMM, ACT,
              (const kernels_backend *kb, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const void *a, int lda, const void *b, int ldb, float beta, void *c,
               int ldc, kernels_dtype c_dtype),
              (kb, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, c_dtype),
              A((double)m * k + (double)k * n) +
                  (double)m * n * (beta != 0.0f ? 2 : 1) * (double)kernels_dtype_size(c_dtype),
              2.0 * m * n * k)
// Strided-batched GEMM: `batch` problems of one shape, for i < batch
//   c_i = alpha op(a_i) op(b_i) + beta c_i + bias_i (bias_i added to every row of c_i)
// where x_i = x + i * stride_x elements (a, b, c, bias): a stride of 0 gives every problem
// the same a, b or bias (q, k, v of a block: one input, three weights and biases, three
// outputs; their dW: one input, three output gradients; model/layers.c dit_linears_*).
// Operands dense and row-major as gemm's (a: (m, k), or (k, m) if trans_a; b: (k, n), or
// (n, k) if trans_b; c: (m, n)) [act]; c of c_dtype as gemm_strided's (act: rounded once;
// KERNELS_F32: [f32], formed and accumulated in fp32, as linear_backward's dw); bias: (n)
// [f32] per problem or NULL. beta == 0 ignores c's old contents. Problem i computes what
// linear_forward computes (alpha 1, beta 0, no transposes, c act, with bias) or
// gemm_strided on dense strides (without bias): bitwise so on the CPU, which runs them one
// after another. TSR_EINVAL for batch < 0, a negative stride, stride_c < m n with batch > 1
// (the outputs would overlap), another c_dtype.
KERNELS_ENTRY(tsr_status, gemm_batched, GEMM, ACT,
              (const kernels_backend *kb, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const void *a, int64_t stride_a, const void *b, int64_t stride_b,
               float beta, void *c, int64_t stride_c, kernels_dtype c_dtype, const float *bias,
               int64_t stride_bias, int batch),
              (kb, trans_a, trans_b, m, n, k, alpha, a, stride_a, b, stride_b, beta, c, stride_c,
               c_dtype, bias, stride_bias, batch),
              A((double)m * k * (stride_a ? batch : 1) + (double)k * n * (stride_b ? batch : 1)) +
                  (double)batch * m * n * (beta != 0.0f ? 2 : 1) *
                      (double)kernels_dtype_size(c_dtype) +
                  (bias ? F((double)n * (stride_bias ? batch : 1)) : 0),
              2.0 * m * n * k * batch)
// Linear layer: out = inp * w + bias (weights stored (in, out), i.e. PyTorch's
// nn.Linear weight transposed). bias may be NULL.
// out: (M, N) [act], inp: (M, K) [act], w: (K, N) [act] working copy, bias: (N) [f32]
KERNELS_ENTRY(tsr_status, linear_forward, GEMM, ACT,
              (const kernels_backend *kb, void *out, const void *inp, const void *w,
               const float *bias, int M, int K, int N),
              (kb, out, inp, w, bias, M, K, N),
              A((double)M * K + (double)K * N + (double)M * N) + (bias ? F(N) : 0), 2.0 * M * K * N)
// dinp = dout * w^T (overwritten); dw += inp^T * dout; dbias += column sums of dout.
// dinp: (M, K) [act], dw: (K, N) [f32], dbias: (N) [f32], dout: (M, N) [act],
// inp: (M, K) [act], w: (K, N) [act]. inp is needed only for dw, w only for dinp.
KERNELS_ENTRY(tsr_status, linear_backward, GEMM, ACT,
              (const kernels_backend *kb, void *dinp, float *dw, float *dbias, const void *dout,
               const void *inp, const void *w, int M, int K, int N),
              (kb, dinp, dw, dbias, dout, inp, w, M, K, N),
              A((double)M * N + (double)K * N + (double)M * K * (dinp ? 2 : 1))
                  + (dw ? F(2.0 * K * N) : 0) + (dbias ? F(2.0 * N) : 0),
              2.0 * M * K * N * ((dinp != NULL) + (dw != NULL)))

// ---- normalisation -------------------------------------------------------------
// LayerNorm without affine over the last dimension: out = (inp - mean) * rstd,
// rstd = 1 / sqrt(var + eps), var biased (divide by D). Statistics in double.
// out: (L, D) [act], mean: (L) [f32] or NULL, rstd: (L) [f32] or NULL (saved for
// backward), inp: (L, D) [act]
KERNELS_ENTRY(tsr_status, layernorm_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, float *mean, float *rstd, const void *inp,
               int L, int D, float eps),
              (kb, out, mean, rstd, inp, L, D, eps),
              A(2.0 * L * D) + F(2.0 * L), 0)
// dinp = rstd * (dout - mean(dout) - xhat * mean(dout * xhat)), xhat = (inp-mean)*rstd.
// dinp: (L, D) [act] overwritten, dout: (L, D) [act], inp: (L, D) [act], mean: (L) [f32],
// rstd: (L) [f32]
KERNELS_ENTRY(tsr_status, layernorm_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, const void *dout, const void *inp,
               const float *mean, const float *rstd, int L, int D),
              (kb, dinp, dout, inp, mean, rstd, L, D),
              A(3.0 * L * D) + F(2.0 * L), 0)
// RMSNorm with a learned weight over rows of C values: out = inp * rstd * weight,
// rstd = 1 / sqrt(mean(inp^2) + eps). For QK-norm per head pass q as R = L*H rows of
// C = Dh (the weight (Dh) is shared by all heads).
// out: (R, C) [act], rstd: (R) [f32] or NULL, inp: (R, C) [act], weight: (C) [f32]
KERNELS_ENTRY(tsr_status, rmsnorm_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, float *rstd, const void *inp,
               const float *weight, int R, int C, float eps),
              (kb, out, rstd, inp, weight, R, C, eps),
              A(2.0 * R * C) + F((double)R + C), 0)
// dinp overwritten; dweight += sum over rows of dout * inp * rstd.
// dinp: (R, C) [act], dweight: (C) [f32], dout: (R, C) [act], inp: (R, C) [act],
// weight: (C) [f32], rstd: (R) [f32]
KERNELS_ENTRY(tsr_status, rmsnorm_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, float *dweight, const void *dout,
               const void *inp, const float *weight, const float *rstd, int R, int C),
              (kb, dinp, dweight, dout, inp, weight, rstd, R, C),
              A((dinp ? 3.0 : 2.0) * R * C) + F((double)R + C + (dweight ? 2.0 * C : 0)), 0)

// ---- adaLN modulation (per clip) -----------------------------------------------
// The per-clip vectors (shift, scale, gate) are rows of a (C, mstride) array, so they can
// point into the adaLN linear's output (C, 6*D) directly: clip c's vector is
// shift[c * mstride + 0 .. D). mstride >= D. Their gradients use the same layout. Being
// rows of a linear's output (and the dout of its backward), they are [act]; only the D
// values of each row are read or written (the rest of the stride is untouched).
//
// out = inp * (1 + scale[c]) + shift[c] for every token of clip c.
// out: (L, D) [act], inp: (L, D) [act], shift/scale: (C, mstride) [act],
// cu_seqlens: (C + 1) int32
KERNELS_ENTRY(tsr_status, modulate_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const void *inp, const void *shift,
               const void *scale, int mstride, const int32_t *cu_seqlens, int n_clips, int L,
               int D),
              (kb, out, inp, shift, scale, mstride, cu_seqlens, n_clips, L, D),
              A(2.0 * L * D + 2.0 * n_clips * D) + F(n_clips + 1.0), 0)
// dinp = dout * (1 + scale[c]); dshift[c] = sum over clip c's tokens of dout;
// dscale[c] = sum of dout * inp. All overwritten (activation gradients); a clip with no
// tokens gets zeros. The sums are formed in fp32/double and rounded once.
// dinp: (L, D) [act], dshift/dscale: (C, mstride) [act], dout: (L, D) [act],
// inp: (L, D) [act], scale: (C, mstride) [act]
KERNELS_ENTRY(tsr_status, modulate_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, void *dshift, void *dscale, const void *dout,
               const void *inp, const void *scale, int mstride, const int32_t *cu_seqlens,
               int n_clips, int L, int D),
              (kb, dinp, dshift, dscale, dout, inp, scale, mstride, cu_seqlens, n_clips, L, D),
              A((double)L * D * (1 + (dinp != NULL) + (dscale != NULL)) +
                (double)n_clips * D * ((dinp != NULL) + (dshift != NULL) + (dscale != NULL)))
                  + F(n_clips + 1.0),
              0)
// Gated residual: out = res + gate[c] * inp (out may equal res).
// out: (L, D) [act], res: (L, D) [act], inp: (L, D) [act], gate: (C, mstride) [act]
KERNELS_ENTRY(tsr_status, gate_residual_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const void *res, const void *inp,
               const void *gate, int mstride, const int32_t *cu_seqlens, int n_clips, int L, int D),
              (kb, out, res, inp, gate, mstride, cu_seqlens, n_clips, L, D),
              A(3.0 * L * D + (double)n_clips * D) + F(n_clips + 1.0), 0)
// dinp = gate[c] * dout; dgate[c] = sum over clip c's tokens of dout * inp (both
// overwritten). The gradient to res is dout itself.
// dinp: (L, D) [act], dgate: (C, mstride) [act], dout: (L, D) [act], inp: (L, D) [act],
// gate: (C, mstride) [act]
KERNELS_ENTRY(tsr_status, gate_residual_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, void *dgate, const void *dout,
               const void *inp, const void *gate, int mstride, const int32_t *cu_seqlens,
               int n_clips, int L, int D),
              (kb, dinp, dgate, dout, inp, gate, mstride, cu_seqlens, n_clips, L, D),
              A((double)L * D * (1 + (dinp != NULL) + (dgate != NULL)) +
                (double)n_clips * D * ((dinp != NULL) + (dgate != NULL)))
                  + F(n_clips + 1.0),
              0)

// ---- 3D rotary position embedding ----------------------------------------------
// Split of the head dimension (as in Wan 2.1): Dh even; d_h = d_w = 2 * (Dh / 6)
// (integer division), d_t = Dh - d_h - d_w. The Dh/2 rotation pairs are the adjacent
// elements (2p, 2p+1); pairs [0, d_t/2) rotate by the time position t, the next d_h/2
// pairs by the row y, the last d_w/2 by the column x. Inside a group of width d_g the
// j-th pair has frequency theta^(-2j / d_g) and angle = position * frequency (computed
// in double). Rotation: (a, b) -> (a cos - b sin, a sin + b cos).
// out: (L, H, Dh) [act], inp: (L, H, Dh) [act] (out may equal inp), pos: (L, 3) int32
// (t, y, x)
KERNELS_ENTRY(tsr_status, rope_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const void *inp, const int32_t *pos, int L,
               int H, int Dh, float theta),
              (kb, out, inp, pos, L, H, Dh, theta),
              A(2.0 * L * H * Dh) + F(3.0 * L), 0)
// The inverse rotation: dinp = R^T dout. dinp: (L, H, Dh) [act], dout: (L, H, Dh) [act],
// pos: (L, 3)
KERNELS_ENTRY(tsr_status, rope_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, const void *dout, const int32_t *pos, int L,
               int H, int Dh, float theta),
              (kb, dinp, dout, pos, L, H, Dh, theta),
              A(2.0 * L * H * Dh) + F(3.0 * L), 0)

// ---- activations ---------------------------------------------------------------
// GELU, tanh approximation (PyTorch approximate='tanh'):
// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). out, inp: (n) [act]
KERNELS_ENTRY(tsr_status, gelu_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const void *inp, size_t n),
              (kb, out, inp, n),
              A(2.0 * n), 0)
// dinp = gelu'(inp) * dout. dinp, dout, inp: (n) [act]
KERNELS_ENTRY(tsr_status, gelu_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, const void *dout, const void *inp, size_t n),
              (kb, dinp, dout, inp, n),
              A(3.0 * n), 0)
// SiLU y = x / (1 + exp(-x)). out, inp: (n) [act]
KERNELS_ENTRY(tsr_status, silu_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const void *inp, size_t n),
              (kb, out, inp, n),
              A(2.0 * n), 0)
// dinp, dout, inp: (n) [act]
KERNELS_ENTRY(tsr_status, silu_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, const void *dout, const void *inp, size_t n),
              (kb, dinp, dout, inp, n),
              A(3.0 * n), 0)

// ---- conditioning --------------------------------------------------------------
// Sinusoidal timestep embedding (DiT): half = dim/2, f_j = exp(-ln(max_period) j / half),
// out[i] = [cos(t_i f_0..half-1), sin(t_i f_0..half-1)], a last zero column if dim is odd.
// t is used as given (scale it, e.g. by 1000, before). Computed in double.
// out: (n, dim) [act], t: (n) [f32] (a noise level: bf16 would keep 3 digits of it)
KERNELS_ENTRY(tsr_status, timestep_embedding, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const float *t, int n, int dim,
               float max_period),
              (kb, out, t, n, dim, max_period),
              F(n) + A((double)n * dim), 0)
// Row gather (class labels): out[i] = table[ids[i]].
// out: (n, D) [act], table: (V, D) [f32] parameter, ids: (n) int32
KERNELS_ENTRY(tsr_status, embedding_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, const float *table, const int32_t *ids, int n,
               int V, int D),
              (kb, out, table, ids, n, V, D),
              A((double)n * D) + F((double)n * D + n), 0)
// dtable[ids[i]] += dout[i], in order of i. dtable: (V, D) [f32], dout: (n, D) [act], ids: (n)
KERNELS_ENTRY(tsr_status, embedding_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, float *dtable, const void *dout, const int32_t *ids,
               int n, int V, int D),
              (kb, dtable, dout, ids, n, V, D),
              A((double)n * D) + F(n + 2.0 * n * D), 0)

// ---- attention over packed clips -----------------------------------------------
// q, k, v, out: (L, H, Dh) [act] (= (L, D) activations); lse: (L, H) [f32], the natural
// log of the softmax denominator of each query row (in units of the scaled scores),
// token-major like every activation so a CP chunk of tokens is a contiguous slice. scale
// is the softmax scale (1/sqrt(Dh) for standard attention). Each query attends
// bidirectionally to every key of its own clip only. Tiled online softmax: memory is
// O(threads * tile * Dh), never (L x L).
// max_len (max_q, max_k for the partial entries: queries' and keys' clips) is an upper
// bound on every clip's token count, given by the caller, who packed the clips and knows
// their lengths on the host (FlashAttention's max_seqlen): a fused kernel sizes its plan,
// workspace and launch grid by it instead of by the packed total (CUDA: cuDNN's sequence
// dimension, docs/gpu.md "Attention"). Any value >= the longest clip is correct (L
// always is; kernels_attention_max_len (kernels.h) rounds the longest clip so that one plan
// and one recorded graph serve many packings); a smaller one is TSR_EINVAL naming the
// clip (CPU: at the call; CUDA: checked on the device and reported by the next sync,
// the call's results undefined but its reads and writes inside its tensors). Negative:
// TSR_EINVAL.
//
// Full attention (one rank holds whole clips): out, lse overwritten.
KERNELS_ENTRY(tsr_status, attention_forward, ATTENTION, ACT,
              (const kernels_backend *kb, void *out, float *lse, const void *q, const void *k,
               const void *v, const int32_t *cu_seqlens, int n_clips, int max_len, int L, int H,
               int Dh, float scale),
              (kb, out, lse, q, k, v, cu_seqlens, n_clips, max_len, L, H, Dh, scale),
              A(4.0 * L * H * Dh) + F((double)L * H + n_clips + 1.0), 0)
// dq, dk, dv overwritten; recomputes the scores tile by tile from q, k, lse and
// delta = rowsum(dout * out). dq, dk, dv, dout, q, k, v, out: (L, H, Dh) [act],
// lse: (L, H) [f32]
KERNELS_ENTRY(tsr_status, attention_backward, ATTENTION, ACT,
              (const kernels_backend *kb, void *dq, void *dk, void *dv, const void *dout,
               const void *q, const void *k, const void *v, const void *out, const float *lse,
               const int32_t *cu_seqlens, int n_clips, int max_len, int L, int H, int Dh,
               float scale),
              (kb, dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, n_clips, max_len, L, H, Dh,
               scale),
              A(8.0 * L * H * Dh) + F((double)L * H + n_clips + 1.0), 0)
// Partial attention for ring attention: Lq local queries against one block of Lk
// keys/values. Clip c's queries [cu_q[c], cu_q[c+1]) attend to the block's keys
// [cu_k[c], cu_k[c+1]) only. out is normalised over this block's keys and lse is this
// block's log-sum-exp; a query whose clip has no key in the block gets out = 0 and
// lse = -INFINITY. Combine blocks with attention_merge.
// out: (Lq, H, Dh) [act], lse: (Lq, H) [f32], q: (Lq, H, Dh) [act], k, v: (Lk, H, Dh)
// [act], cu_q, cu_k: (C + 1) int32 (cu_q[C] == Lq, cu_k[C] == Lk); max_q, max_k bound
// the clips' lengths in cu_q and in cu_k
KERNELS_ENTRY(tsr_status, attention_partial_forward, ATTENTION, ACT,
              (const kernels_backend *kb, void *out, float *lse, const void *q, const void *k,
               const void *v, const int32_t *cu_q, const int32_t *cu_k, int n_clips, int max_q,
               int max_k, int Lq, int Lk, int H, int Dh, float scale),
              (kb, out, lse, q, k, v, cu_q, cu_k, n_clips, max_q, max_k, Lq, Lk, H, Dh, scale),
              A(2.0 * Lq * H * Dh + 2.0 * Lk * H * Dh) + F((double)Lq * H + 2.0 * (n_clips + 1)),
              0)
// Merges partial b into the accumulator a, exactly (up to rounding):
// lse = log(exp(lse_a) + exp(lse_b)), out_a = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b.
// -INFINITY lse (empty partial) is handled; merging in any order gives the full result.
// out_a: (L, H, Dh) [act] updated (rounded once per merge), lse_a: (L, H) [f32] updated,
// out_b: (L, H, Dh) [act], lse_b: (L, H) [f32]
KERNELS_ENTRY(tsr_status, attention_merge, ATTENTION, ACT,
              (const kernels_backend *kb, void *out_a, float *lse_a, const void *out_b,
               const float *lse_b, int L, int H, int Dh),
              (kb, out_a, lse_a, out_b, lse_b, L, H, Dh),
              A(3.0 * L * H * Dh) + F(3.0 * L * H), 0)
// delta = rowsum over Dh of dout * out (computed in double), the D_i of the backward.
// delta: (L, H) [f32], dout, out: (L, H, Dh) [act]
KERNELS_ENTRY(tsr_status, attention_delta, ATTENTION, ACT,
              (const kernels_backend *kb, float *delta, const void *dout, const void *out, int L,
               int H, int Dh),
              (kb, delta, dout, out, L, H, Dh),
              A(2.0 * L * H * Dh) + F((double)L * H), 0)
// Backward of one K/V block given the FINAL out, lse and delta of the local queries (the
// output and lse of all blocks merged, delta = attention_delta(dout, out)):
// with P = exp(scale q.k - lse), dS = P * (dout.v - delta):
// dq += scale dS k, dk += scale dS^T q, dv += P^T dout — all three ACCUMULATED (dq over
// the blocks of the ring, dk/dv are the block's gradients travelling with it; with bf16
// activations each call loads them, adds in fp32 and rounds once; CUDA's cuDNN path rounds
// the block's share to bf16 before that add: docs/gpu.md "Attention").
// A backend may use delta or derive it from out (cuDNN's backward does), so both are
// required and must agree.
// dq may be NULL; dk and dv are given together or both NULL (same for attention_backward).
// dq: (Lq, H, Dh) [act], dk, dv: (Lk, H, Dh) [act], dout, q, out: (Lq, H, Dh) [act],
// k, v: (Lk, H, Dh) [act], lse, delta: (Lq, H) [f32], cu_q, cu_k: (C + 1); max_q, max_k
// as in attention_partial_forward
KERNELS_ENTRY(tsr_status, attention_partial_backward, ATTENTION, ACT,
              (const kernels_backend *kb, void *dq, void *dk, void *dv, const void *dout,
               const void *q, const void *k, const void *v, const void *out, const float *lse,
               const float *delta, const int32_t *cu_q, const int32_t *cu_k, int n_clips,
               int max_q, int max_k, int Lq, int Lk, int H, int Dh, float scale),
              (kb, dq, dk, dv, dout, q, k, v, out, lse, delta, cu_q, cu_k, n_clips, max_q, max_k,
               Lq, Lk, H, Dh, scale),
              A((double)Lq * H * Dh * (2 + (dq ? 2 : 0)) +
                (double)Lk * H * Dh * (2 + (dk ? 4 : 0))) +
                  F(2.0 * Lq * H + 2.0 * (n_clips + 1)),
              0)
// Masked attention (model.attn_mask, docs/model.md "Attention masks"): as the entries
// above, but query i attends only to the keys j of its clip that kernels_mask allows for
// their grid positions pos_q[i], pos_k[j] ((t, y, x), the RoPE positions: a CP chunk's
// are its true positions in the clip), the softmax taken over those keys alone; a query
// with none gets out = 0, lse = -INFINITY. KERNELS_MASK_FULL is the unmasked entry's
// result. cu_q may equal cu_k (whole clips: attention_forward's case).
// OPTIONAL: NULL in a backend without them (CUDA for now); the model then refuses a
// masked config naming the entry and the backend.
// attention_partial_forward's tensors, plus pos_q: (Lq, 3), pos_k: (Lk, 3) int32
KERNELS_ENTRY(tsr_status, attention_masked_forward, ATTENTION, ACT,
              (const kernels_backend *kb, void *out, float *lse, const void *q, const void *k,
               const void *v, const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
               const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q, int max_k, int Lq,
               int Lk, int H, int Dh, float scale),
              (kb, out, lse, q, k, v, cu_q, cu_k, pos_q, pos_k, mask, n_clips, max_q, max_k, Lq, Lk,
               H, Dh, scale),
              A(2.0 * Lq * H * Dh + 2.0 * Lk * H * Dh) +
                  F((double)Lq * H + 2.0 * (n_clips + 1) + 3.0 * ((double)Lq + Lk)),
              0)
// attention_backward's contract (dq, dk, dv overwritten) under the mask; pos: (L, 3)
KERNELS_ENTRY(tsr_status, attention_masked_backward, ATTENTION, ACT,
              (const kernels_backend *kb, void *dq, void *dk, void *dv, const void *dout,
               const void *q, const void *k, const void *v, const void *out, const float *lse,
               const int32_t *cu_seqlens, const int32_t *pos, kernels_mask mask, int n_clips,
               int max_len, int L, int H, int Dh, float scale),
              (kb, dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, pos, mask, n_clips, max_len, L,
               H, Dh, scale),
              A(8.0 * L * H * Dh) + F((double)L * H + n_clips + 1.0 + 3.0 * L),
              0)
// attention_partial_backward's contract (dq, dk, dv accumulated; out, lse, delta final)
// under the mask
KERNELS_ENTRY(tsr_status, attention_masked_partial_backward, ATTENTION, ACT,
              (const kernels_backend *kb, void *dq, void *dk, void *dv, const void *dout,
               const void *q, const void *k, const void *v, const void *out, const float *lse,
               const float *delta, const int32_t *cu_q, const int32_t *cu_k, const int32_t *pos_q,
               const int32_t *pos_k, kernels_mask mask, int n_clips, int max_q, int max_k, int Lq,
               int Lk, int H, int Dh, float scale),
              (kb, dq, dk, dv, dout, q, k, v, out, lse, delta, cu_q, cu_k, pos_q, pos_k, mask,
               n_clips, max_q, max_k, Lq, Lk, H, Dh, scale),
              A((double)Lq * H * Dh * (2 + (dq ? 2 : 0)) +
                (double)Lk * H * Dh * (2 + (dk ? 4 : 0))) +
                  F(2.0 * Lq * H + 2.0 * (n_clips + 1) + 3.0 * ((double)Lq + Lk)),
              0)

// ---- objective and sampler (no host work per step) ---------------------------------
// The rectified-flow inputs of a packed microbatch, from the stored tokens and the keys
// of core/rng.h, exactly as model/objective.h defines them (the CPU fp32 entry is
// bitwise equal to objective_build): for clip c with key (seed, step, clip_id) and
// token j = first_token + i of its own token index (i-th row of the clip here),
//   z = rng_normal({seed, step, clip_id, TIMESTEP}, t_index)   (the key's t_index, 0 for a clip)
//   t' = the noise level of kernels_t_dist td (its z from the key above), a float
//   x0 = u8 * (2/255) - 1 for uint8 pixels; x0 = the value itself (exact in fp32) for bf16
//        or f32 latents
//   e = (float)rng_normal({seed, step, clip_id, NOISE}, j P + v)
//   x_t = (1 - t') x0 + t' e;  target = e - x0           (float arithmetic, no FMA)
// t: (C) [f32] out, x_t, target: (L, P) [act] out, tokens: (L, P) of tokens_dtype,
// clips: (C) kernels_clip_key, cu_seqlens: (C + 1) int32
KERNELS_ENTRY(tsr_status, objective_inputs, OBJECTIVE, ACT,
              (const kernels_backend *kb, float *t, void *x_t, void *target, const void *tokens,
               kernels_tokens tokens_dtype, const kernels_clip_key *clips,
               const int32_t *cu_seqlens, int n_clips, int L, int P, uint64_t seed, uint64_t step,
               kernels_t_dist td),
              (kb, t, x_t, target, tokens, tokens_dtype, clips, cu_seqlens, n_clips, L, P, seed,
               step, td),
              (double)L * P * (double)kernels_tokens_size(tokens_dtype) + A(2.0 * L * P) +
                  F(2.0 * n_clips + 1.0) + (double)n_clips * (double)sizeof(kernels_clip_key),
              0)
// One Euler step of the sampler with classifier-free guidance (model/sample/sample.h):
//   v = v_uncond + cfg (v_cond - v_uncond)   (v = v_cond when v_uncond is NULL)
//   x += dt v                                (float arithmetic, no FMA)
// x is the sampler's state, kept in fp32 like master weights: with bf16 the increment
// dt v of a 50-step run is below half an ulp of x for |x| > ~1 and would be lost; cast
// it to the act dtype for the model's input.
// x: (n) [f32] updated, v_cond, v_uncond: (n) [act] (the model's two predictions)
KERNELS_ENTRY(tsr_status, euler_update, OBJECTIVE, ACT,
              (const kernels_backend *kb, float *x, const void *v_cond, const void *v_uncond,
               float cfg, float dt, size_t n),
              (kb, x, v_cond, v_uncond, cfg, dt, n),
              F(2.0 * n) + A((v_uncond ? 2.0 : 1.0) * n), 0)

// ---- loss ------------------------------------------------------------------------
// Weighted per-clip squared error: sse[c] = sum over clip c's local tokens and D values
// of (pred - target)^2 (double accumulation), loss[0] = sum_c weight[c] * sse[c].
// For the training objective (mean over B clips of each clip's mean) use
// weight[c] = 1 / (B * T_c * D) with T_c the clip's total token count, so CP chunks
// and microbatches of one global batch sum to the global loss (see kernels_mse_weight).
// loss: (1) [f32], sse: (C) [f32] or NULL, pred, target: (L, D) [act], weight: (C) [f32]
KERNELS_ENTRY(tsr_status, mse_forward, OBJECTIVE, ACT,
              (const kernels_backend *kb, float *loss, float *sse, const void *pred,
               const void *target, const float *weight, const int32_t *cu_seqlens, int n_clips,
               int L, int D),
              (kb, loss, sse, pred, target, weight, cu_seqlens, n_clips, L, D),
              A(2.0 * L * D) + F(3.0 * n_clips + 2.0), 0)
// dpred = 2 * weight[c] * (pred - target) (overwritten). dpred, pred, target: (L, D) [act]
KERNELS_ENTRY(tsr_status, mse_backward, OBJECTIVE, ACT,
              (const kernels_backend *kb, void *dpred, const void *pred, const void *target,
               const float *weight, const int32_t *cu_seqlens, int n_clips, int L, int D),
              (kb, dpred, pred, target, weight, cu_seqlens, n_clips, L, D),
              A(3.0 * L * D) + F(2.0 * n_clips + 1.0), 0)

// ---- optimizer (all [f32]) -----------------------------------------------------------
// *result_host = sum of x^2 in double (fixed blocks, fixed order). Sum it over tensors
// (and ranks) for the global gradient norm; see kernels_clip_scale. x: (n)
KERNELS_ENTRY(tsr_status, sumsq, OPTIMIZER, ANY,
              (const kernels_backend *kb, double *result_host, const float *x, size_t n),
              (kb, result_host, x, n),
              F(n), 0)
// AdamW, PyTorch's torch.optim.AdamW (non-fused, non-amsgrad) order of operations, with
// g = grad * grad_scale (grad_scale = clipping factor, 1 for none), step t >= 1:
//   param *= 1 - lr * weight_decay
//   m = m + (g - m) * (1 - beta1)          (lerp)
//   v = v * beta2 + (1 - beta2) * g * g
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   param -= (lr / (1 - beta1^t)) * m / denom
// param, m, v: (n) updated; grad: (n)
KERNELS_ENTRY(tsr_status, adamw_update, OPTIMIZER, ANY,
              (const kernels_backend *kb, float *param, const float *grad, float *m, float *v,
               size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
               int64_t step, float grad_scale),
              (kb, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale),
              F(7.0 * n), 0)
// EMA of weights: ema = ema * decay + param * (1 - decay). ema, param: (n)
KERNELS_ENTRY(tsr_status, ema_update, OPTIMIZER, ANY,
              (const kernels_backend *kb, float *ema, const float *param, size_t n, float decay),
              (kb, ema, param, n, decay),
              F(3.0 * n), 0)
// AdamW over every tensor of flat buffers in one call (one launch on CUDA): for each
// segment s, adamw_update on the elements [segs[s].offset, + segs[s].numel) with
// weight_decay if segs[s].decay else 0 — bitwise equal to those n_segs calls. Segments
// in increasing offset order, not overlapping, inside [0, n); elements in no segment
// are untouched. EMA and the gradient's sum of squares need no such table: ema_update
// and sumsq over the whole flat buffer are already one call each.
// work, unless NULL, is the act-dtype working copy of param: each updated element is also
// stored there rounded as `cast` rounds it, so AdamW then cast of the segments gives the
// same bits in one pass over the weights (elements in no segment untouched there too).
// param, m, v: (n) updated; grad: (n); work: (n) [act] or NULL, not overlapping param;
// segs: (n_segs) kernels_param_segment (backend memory; checked on the CPU, on CUDA a bad
// table is reported by the next sync). Bytes: param, m, v read and written, grad read; the
// working copy written.
KERNELS_ENTRY(tsr_status, adamw_update_multi, OPTIMIZER, ANY,
              (const kernels_backend *kb, float *param, const float *grad, float *m, float *v,
               void *work, size_t n, const kernels_param_segment *segs, int n_segs, float lr,
               float beta1, float beta2, float eps, float weight_decay, int64_t step,
               float grad_scale),
              (kb, param, grad, m, v, work, n, segs, n_segs, lr, beta1, beta2, eps, weight_decay,
               step, grad_scale),
              F(7.0 * n) + (work ? A(n) : 0.0), 0)

// ---- fused entries (kernels.h "Fused entries" in the shared contract) -----------
// LayerNorm + adaLN modulation, = layernorm_forward then modulate_forward:
//   out = LN(inp) (1 + scale[c]) + shift[c]; mean, rstd saved (LN(inp) itself is not:
//   the backward recomputes it from inp, mean and rstd, bitwise as the forward made it).
// out: (L, D) [act], mean, rstd: (L) [f32] (required), inp: (L, D) [act],
// shift/scale: (C, mstride) [act], cu_seqlens: (C + 1)
KERNELS_ENTRY(tsr_status, layernorm_modulate_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *out, float *mean, float *rstd, const void *inp,
               const void *shift, const void *scale, int mstride, const int32_t *cu_seqlens,
               int n_clips, int L, int D, float eps),
              (kb, out, mean, rstd, inp, shift, scale, mstride, cu_seqlens, n_clips, L, D, eps),
              A(2.0 * L * D + 2.0 * n_clips * D) + F(2.0 * L + n_clips + 1.0), 0)
// Its backward, = modulate_backward (with ln = (inp - mean) rstd) then
// layernorm_backward then dinp += that gradient (axpy_act with alpha 1): dinp is
// ACCUMULATED (the residual stream's gradient), dshift/dscale overwritten as in
// modulate_backward. dinp: (L, D) [act], dshift/dscale: (C, mstride) [act],
// dout, inp: (L, D) [act], mean, rstd: (L) [f32], scale: (C, mstride) [act]
KERNELS_ENTRY(tsr_status, layernorm_modulate_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dinp, void *dshift, void *dscale, const void *dout,
               const void *inp, const float *mean, const float *rstd, const void *scale,
               int mstride, const int32_t *cu_seqlens, int n_clips, int L, int D),
              (kb, dinp, dshift, dscale, dout, inp, mean, rstd, scale, mstride, cu_seqlens, n_clips,
               L, D),
              A((double)L * D * (1 + (dinp || dscale) + 2 * (dinp != NULL)) +
                (double)n_clips * D * ((dinp != NULL) + (dshift != NULL) + (dscale != NULL)))
                  + F(((dinp || dscale) ? 2.0 * L : 0) + n_clips + 1.0),
              0)
// QK-norm and 3D RoPE of q and k together, = for x in (q, k):
//   rmsnorm_forward(x_out, x_rstd, x_in, x_weight, L*H rows, Dh, eps) then
//   rope_forward(x_out, x_out, pos, L, H, Dh, theta)   (the angles computed once for both)
// q_out, k_out: (L, H, Dh) [act], q_rstd, k_rstd: (L*H) [f32] (required),
// q_in, k_in: (L, H, Dh) [act], q_weight, k_weight: (Dh) [f32], pos: (L, 3) int32
KERNELS_ENTRY(tsr_status, qk_norm_rope_forward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *q_out, void *k_out, float *q_rstd, float *k_rstd,
               const void *q_in, const void *k_in, const float *q_weight, const float *k_weight,
               const int32_t *pos, int L, int H, int Dh, float eps, float theta),
              (kb, q_out, k_out, q_rstd, k_rstd, q_in, k_in, q_weight, k_weight, pos, L, H, Dh, eps,
               theta),
              A(4.0 * L * H * Dh) + F(2.0 * L * H + 2.0 * Dh + 3.0 * L), 0)
// Its backward, = for x in (q, k): rope_backward(tmp, dx, pos) then
//   rmsnorm_backward(dx_in, dx_weight, tmp, x_in, x_weight, x_rstd, L*H rows, Dh)
// (tmp kept in fp32). dq_in, dk_in overwritten; dq_weight, dk_weight accumulated (either
// may be NULL). dq_in, dk_in: (L, H, Dh) [act], dq_weight, dk_weight: (Dh) [f32],
// dq, dk: (L, H, Dh) [act] gradients of q_out, k_out, q_in, k_in: (L, H, Dh) [act],
// q_weight, k_weight: (Dh) [f32], q_rstd, k_rstd: (L*H) [f32], pos: (L, 3) int32
KERNELS_ENTRY(tsr_status, qk_norm_rope_backward, ELEMENTWISE, ACT,
              (const kernels_backend *kb, void *dq_in, void *dk_in, float *dq_weight,
               float *dk_weight, const void *dq, const void *dk, const void *q_in, const void *k_in,
               const float *q_weight, const float *k_weight, const float *q_rstd,
               const float *k_rstd, const int32_t *pos, int L, int H, int Dh, float theta),
              (kb, dq_in, dk_in, dq_weight, dk_weight, dq, dk, q_in, k_in, q_weight, k_weight,
               q_rstd, k_rstd, pos, L, H, Dh, theta),
              A(6.0 * L * H * Dh)
                  + F(2.0 * L * H + 2.0 * Dh + 3.0 * L +
                      ((dq_weight ? 2.0 * Dh : 0) + (dk_weight ? 2.0 * Dh : 0))),
              0)
// Linear layer with a GELU (tanh) epilogue, = linear_forward(pre, inp, w, bias) then
// gelu_forward(out, pre), GELU applied to the fp32 sum (pre is rounded only for
// storing). pre is kept for the backward (linear_backward_dgelu). On CUDA: cuBLASLt's
// GELU_AUX(_BIAS) epilogue where it takes the shape, else the GEMM and a GELU kernel.
// out, pre: (M, N) [act], inp: (M, K) [act], w: (K, N) [act], bias: (N) [f32] or NULL
KERNELS_ENTRY(tsr_status, linear_gelu_forward, GEMM, ACT,
              (const kernels_backend *kb, void *out, void *pre, const void *inp, const void *w,
               const float *bias, int M, int K, int N),
              (kb, out, pre, inp, w, bias, M, K, N),
              A((double)M * K + (double)K * N + 2.0 * M * N) + (bias ? F(N) : 0), 2.0 * M * K * N)
// Backward of a linear layer whose input is GELU(pre) (the MLP's second linear), with
// GELU's backward fused into its dinp: = linear_backward(tmp, dw, dbias, dout, inp, w)
// then gelu_backward(dpre, tmp, pre), tmp kept in fp32. dpre overwritten, dw and dbias
// accumulated. On CUDA: cuBLASLt's DGELU epilogue where it takes the shape.
// dpre: (M, K) [act], dw: (K, N) [f32], dbias: (N) [f32], dout: (M, N) [act],
// inp = GELU(pre): (M, K) [act] (for dw), w: (K, N) [act], pre: (M, K) [act]
KERNELS_ENTRY(tsr_status, linear_backward_dgelu, GEMM, ACT,
              (const kernels_backend *kb, void *dpre, float *dw, float *dbias, const void *dout,
               const void *inp, const void *w, const void *pre, int M, int K, int N),
              (kb, dpre, dw, dbias, dout, inp, w, pre, M, K, N),
              A(3.0 * M * N + (double)K * N + (double)M * K) + (dw ? F(2.0 * K * N) : 0)
                  + (dbias ? F(2.0 * N) : 0),
              2.0 * M * K * N * ((dpre != NULL) + (dw != NULL)))
