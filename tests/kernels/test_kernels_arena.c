// tests/kernels/test_kernels_arena.c — the memory arena of the CUDA backend.
//
// Without arguments (label kernels): the bookkeeping of kernels/arena.h against a model of
// it — random allocations and frees checked for alignment, no overlap, the in-use/peak
// counts and the largest free range computed from a byte map, best fit, merging back to
// one free range, the ENOMEM message (bytes asked, size, in use, largest free range), a bad
// free; the sizes TESSERA_CUDA_ARENA takes (kernels_arena_parse_size); the default size of
// ranks sharing a device against closed forms (kernels_arena_default_size); and the CPU
// backend's memory_stats (in use follows alloc/free) and reserve (no-op).
//
// With --cuda (gpu_arena, label gpu: needs a device): the CUDA backend's arena from a fresh
// process: reserve(96 MiB) makes it, memory_stats reports its size and the cuBLASLt
// workspace in use, an allocation beyond it fails with TSR_ENOMEM naming the bytes and
// TESSERA_CUDA_ARENA, a freed and reused range comes back zero-filled, and a second
// reserve of another size is refused.
//
// With --cuda-shared (gpu_arena_shared, label gpu): the default arena of a rank that shares
// its GPU with others (test_cuda_shared).
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/arena.h"
#include "kernels/kernels.h"

enum { CAP = 1 << 20, AL = 256, SLOTS = 64 };

static void test_bookkeeping(void) {
  kernels_arena *a = NULL;
  CHECK(kernels_arena_create(&a, 100, 3) == TSR_EINVAL, "alignment 3 accepted");
  CHECK(kernels_arena_create(&a, 100, 256) == TSR_EINVAL, "a region smaller than one unit accepted");
  CHECK_OK(kernels_arena_create(&a, CAP + 100, AL));  // rounded down to CAP
  if (!a) return;
  static unsigned char used[CAP / AL];  // the model: which units are taken
  size_t off[SLOTS], len[SLOTS];
  int live[SLOTS] = {0};
  uint64_t r = 12345;
  size_t peak = 0;
  for (int it = 0; it < 4000; it++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    int s = (int)((r >> 33) % SLOTS);
    if (live[s]) {
      CHECK_OK(kernels_arena_free(a, off[s]));
      for (size_t u = off[s] / AL; u < (off[s] + len[s]) / AL; u++) used[u] = 0;
      live[s] = 0;
    } else {
      size_t want = (size_t)((r >> 20) % 40000);
      size_t o;
      tsr_status st = kernels_arena_alloc(a, want, &o);
      size_t units = want ? (want + AL - 1) / AL : 1;
      // the model's best fit: the smallest free run that holds `units`, lowest on a tie
      size_t best = (size_t)-1, best_len = (size_t)-1, run = 0;
      for (size_t u = 0; u <= CAP / AL; u++) {
        if (u < CAP / AL && !used[u]) {
          run++;
          continue;
        }
        if (run >= units && run < best_len) best = u - run, best_len = run;
        run = 0;
      }
      if (best == (size_t)-1) {
        CHECK(st == TSR_ENOMEM, "alloc of %zu failed to fail with no room", want);
        CHECK(strstr(err_msg(), "bytes asked") && strstr(err_msg(), "largest free range"),
              "ENOMEM message: %s", err_msg());
        continue;
      }
      CHECK(st == TSR_OK, "alloc of %zu failed with room: %s", want, err_msg());
      if (st) continue;
      CHECK(o % AL == 0 && o == best * AL, "alloc of %zu at %zu, best fit is %zu", want, o, best * AL);
      for (size_t u = o / AL; u < o / AL + units; u++) {
        CHECK(!used[u], "unit %zu handed out twice", u);
        used[u] = 1;
      }
      off[s] = o, len[s] = units * AL, live[s] = 1;
    }
    size_t in_use = 0, largest = 0, run = 0, n_live = 0;
    for (size_t u = 0; u < CAP / AL; u++) {
      in_use += used[u] ? AL : 0;
      run = used[u] ? 0 : run + 1;
      if (run * AL > largest) largest = run * AL;
    }
    for (int k = 0; k < SLOTS; k++) n_live += live[k];
    if (in_use > peak) peak = in_use;
    kernels_arena_stats st = kernels_arena_get_stats(a);
    CHECK(st.capacity == CAP && st.in_use == in_use && st.peak == peak &&
              st.largest_free == largest && st.allocations == n_live,
          "step %d: stats %zu/%zu/%zu/%zu/%zu, model %zu/%zu/%zu/%zu", it, st.capacity, st.in_use,
          st.peak, st.largest_free, st.allocations, in_use, peak, largest, n_live);
  }
  for (int s = 0; s < SLOTS; s++)
    if (live[s]) CHECK_OK(kernels_arena_free(a, off[s]));
  kernels_arena_stats st = kernels_arena_get_stats(a);
  CHECK(st.in_use == 0 && st.largest_free == CAP && st.allocations == 0,
        "all freed: %zu in use, largest free %zu (free ranges did not merge)", st.in_use,
        st.largest_free);
  CHECK(kernels_arena_free(a, 512) == TSR_EINVAL, "freeing what is not allocated accepted");
  size_t o;
  CHECK(kernels_arena_alloc(a, CAP + 1, &o) == TSR_ENOMEM, "more than the region allocated");
  CHECK(strstr(err_msg(), "1048577 bytes asked") != NULL, "message: %s", err_msg());
  kernels_arena_destroy(a);
}

static void test_parse(void) {
  const size_t G = (size_t)1 << 30;
  struct {
    const char *text;
    size_t want;
  } cases[] = {{"60G", 60 * G}, {"512M", (size_t)512 << 20}, {"512MB", (size_t)512 << 20},
               {"1.5g", 3 * G / 2}, {"1073741824", G}, {"2T", 2048 * G}, {"64k", 65536},
               {"80%", 8 * G}, {"100%", 10 * G}, {"101%", 0}, {"0", 0}, {"-5G", 0},
               {"60X", 0}, {"G", 0}, {"", 0}, {"60G ", 0}, {"1e30", 0}, {"none", 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t got = kernels_arena_parse_size(cases[i].text, 10 * G);
    CHECK(got == cases[i].want, "\"%s\" -> %zu, want %zu", cases[i].text, got, cases[i].want);
  }
}

// The default arena's rule (kernels_arena_default_size): each rank sharing a device takes
// its share of the free memory less ITS OWN headroom, max(1 GiB, 4% of the device).
static void test_default_size(void) {
  const size_t G = (size_t)1 << 30, M2 = (size_t)2 << 20;
  CHECK(kernels_arena_headroom(80 * G) == 80 * G / 25, "headroom of 80 GiB: %zu",
        kernels_arena_headroom(80 * G));
  CHECK(kernels_arena_headroom(16 * G) == G, "headroom of 16 GiB: %zu, want the 1 GiB floor",
        kernels_arena_headroom(16 * G));
  struct {
    int local, devices, want;
  } sh[] = {{4, 1, 4}, {8, 8, 1}, {8, 2, 4}, {5, 2, 3}, {1, 1, 1}, {2, 4, 1}, {0, 1, 1}, {4, 0, 1}};
  for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
    CHECK(kernels_arena_sharers(sh[i].local, sh[i].devices) == sh[i].want,
          "%d ranks on %d devices: %d sharers, want %d", sh[i].local, sh[i].devices,
          kernels_arena_sharers(sh[i].local, sh[i].devices), sh[i].want);
  // 80 GiB free of 80, 4 ranks on one GPU: 20 GiB - 3.2 GiB = 16.8 GiB each, which is
  // 8601.6 units of 2 MiB: 8601 units. (Free memory less one headroom, divided by 4, would
  // give 19.2 GiB each and leave three of the four ranks no room for their libraries.)
  size_t got = kernels_arena_default_size(80 * G, 80 * G, 4);
  CHECK(got == 8601 * M2, "80 GiB, 4 ranks: %zu, want %zu", got, 8601 * M2);
  CHECK(4 * (got + kernels_arena_headroom(80 * G)) <= 80 * G,
        "4 ranks' arenas and headrooms exceed the device");
  // One rank: 80 GiB - 3.2 GiB = 76.8 GiB = 39321.6 units: 39321.
  got = kernels_arena_default_size(80 * G, 80 * G, 1);
  CHECK(got == 39321 * M2, "80 GiB, 1 rank: %zu, want %zu", got, 39321 * M2);
  // 0 sharers counts as one; a 16 GiB device keeps the 1 GiB floor: 6 GiB free, 2 ranks:
  // 3 GiB - 1 GiB = 2 GiB exactly.
  CHECK(kernels_arena_default_size(80 * G, 80 * G, 0) == 39321 * M2, "0 sharers");
  got = kernels_arena_default_size(6 * G, 16 * G, 2);
  CHECK(got == 2 * G, "6 GiB free of 16, 2 ranks: %zu, want %zu", got, 2 * G);
  // No room once each rank keeps its headroom (no underflow): 4 GiB free, 4 ranks.
  CHECK(kernels_arena_default_size(4 * G, 80 * G, 4) == 0, "underflow: %zu",
        kernels_arena_default_size(4 * G, 80 * G, 4));
  CHECK(kernels_arena_default_size(0, 80 * G, 1) == 0, "no free memory");
  CHECK(kernels_arena_default_size(G, 16 * G, 1) == 0, "exactly the headroom free");
}

static void test_cpu_stats(void) {
  const kernels_backend *kb = kernels_cpu();
  size_t u0, p0, cap;
  CHECK_OK(kb->reserve(kb, 12345));  // host memory: nothing to size
  CHECK_OK(kb->memory_stats(kb, &u0, &p0, &cap));
  CHECK(cap == 0, "the CPU backend reports a capacity of %zu", cap);
  void *p;
  CHECK_OK(kb->alloc(kb, &p, 1 << 20));
  size_t u1, p1;
  CHECK_OK(kb->memory_stats(kb, &u1, &p1, NULL));
  CHECK(u1 >= u0 + (1 << 20) && p1 >= u1, "in use %zu -> %zu, peak %zu", u0, u1, p1);
  kb->free(kb, p);
  size_t u2;
  CHECK_OK(kb->memory_stats(kb, &u2, NULL, NULL));
  CHECK(u2 == u0, "in use after free %zu, before %zu", u2, u0);
}

// The "cuda" backend of this build, or NULL after a failed check.
static const kernels_backend *cuda_backend(void) {
  const kernels_backend *all[8], *kb = NULL;
  int n = kernels_backends(all, 8);
  for (int i = 0; i < n && i < 8; i++)
    if (!strcmp(all[i]->name, "cuda")) kb = all[i];
  CHECK(kb != NULL, "no usable cuda backend");
  return kb;
}

static void test_cuda(void) {
  const kernels_backend *kb = cuda_backend();
  if (!kb) return;
  const size_t cap = (size_t)96 << 20, ws = (size_t)32 << 20;
  CHECK_OK(kb->reserve(kb, cap));
  size_t in_use, peak, c;
  CHECK_OK(kb->memory_stats(kb, &in_use, &peak, &c));
  CHECK(c == cap && in_use == ws, "arena %zu (want %zu), in use %zu (want the %zu-byte workspace)",
        c, cap, in_use, ws);
  CHECK(kb->reserve(kb, cap / 2) == TSR_EINVAL, "a second reserve of another size accepted");
  CHECK_OK(kb->reserve(kb, 0));
  void *a = NULL, *b = NULL;
  CHECK_OK(kb->alloc(kb, &a, (size_t)40 << 20));
  CHECK(kb->alloc(kb, &b, (size_t)40 << 20) == TSR_ENOMEM, "allocated past the arena");
  CHECK(strstr(err_msg(), "41943040 bytes asked") && strstr(err_msg(), "TESSERA_CUDA_ARENA"),
        "ENOMEM message: %s", err_msg());
  // dirty the range, free it, allocate it again: zero-filled
  unsigned char *h = malloc((size_t)1 << 20);
  memset(h, 0xab, (size_t)1 << 20);
  CHECK_OK(kb->to_device(kb, a, h, (size_t)1 << 20));
  kb->free(kb, a);
  CHECK_OK(kb->alloc(kb, &b, (size_t)1 << 20));
  CHECK(b == a, "the freed range was not reused (best fit, lowest first)");
  CHECK_OK(kb->to_host(kb, h, b, (size_t)1 << 20));
  size_t nz = 0;
  for (size_t i = 0; i < ((size_t)1 << 20); i++) nz += h[i] != 0;
  CHECK(nz == 0, "%zu bytes of a reused allocation are not zero", nz);
  CHECK_OK(kb->memory_stats(kb, &in_use, &peak, NULL));
  CHECK(in_use == ws + ((size_t)1 << 20) && peak == ws + ((size_t)40 << 20),
        "in use %zu, peak %zu", in_use, peak);
  kb->free(kb, b);
  free(h);
}

// The default arena of a rank that shares its GPU, in a fresh process: the launcher's
// variables are set before the backend exists, CUDA_VISIBLE_DEVICES=0 makes one GPU visible
// (so the sharing is the same on any machine) and the emulated device gets 16 GiB. 64 ranks
// leave no room after each rank's headroom: TSR_ENOMEM naming the sharing, and no arena;
// then 4 ranks: the arena is kernels_arena_default_size of the memory free just before.
static void test_cuda_shared(void) {
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  setenv("CUEMU_MEMORY", "16G", 1);  // read by the emulated device only
  unsetenv("TESSERA_CUDA_ARENA");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "64", 1);
  const kernels_backend *kb = cuda_backend();
  if (!kb) return;
  size_t free_b = 0, total_b = 0, cap = 0;
  void *p = NULL;
  CHECK_OK(kb->mem_info(kb, &free_b, &total_b));
  CHECK(kb->alloc(kb, &p, 1 << 20) == TSR_ENOMEM, "64 ranks on one GPU: an arena was made");
  CHECK(strstr(err_msg(), "64 ranks on 1 GPU (OMPI_COMM_WORLD_LOCAL_SIZE=64)") &&
            strstr(err_msg(), "fewer ranks per GPU") && strstr(err_msg(), "TESSERA_CUDA_ARENA"),
        "message: %s", err_msg());
  CHECK_OK(kb->memory_stats(kb, NULL, NULL, &cap));
  CHECK(cap == 0, "a failed default sizing left an arena of %zu bytes", cap);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  CHECK_OK(kb->mem_info(kb, &free_b, &total_b));
  size_t want = kernels_arena_default_size(free_b, total_b, 4);
  CHECK_OK(kb->alloc(kb, &p, 1 << 20));
  CHECK_OK(kb->memory_stats(kb, NULL, NULL, &cap));
  CHECK(cap == want && want > 0, "4 ranks, %zu bytes free of %zu: an arena of %zu, want "
        "free / 4 - headroom = %zu", free_b, total_b, cap, want);
  kb->free(kb, p);
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--cuda")) {
    test_cuda();
  } else if (argc == 2 && !strcmp(argv[1], "--cuda-shared")) {
    test_cuda_shared();
  } else {
    test_bookkeeping();
    test_parse();
    test_default_size();
    test_cpu_stats();
  }
  return check_done();
}
