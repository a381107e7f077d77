// sched/placement.c — contiguous, zigzag, greedy, balanced and metis placements of a masked
// clip (see the header), their work and key/value receipts, and a process-wide cache of them.
#include "sched/placement.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if TESSERA_HAVE_METIS
#include <metis.h>
#endif

static const char *const kind_names[] = {"contiguous", "zigzag", "greedy", "balanced", "metis"};

const char *place_kind_name(place_kind k) {
  return k >= 0 && k <= PLACE_METIS ? kind_names[k] : "contiguous";
}

int place_kind_parse(const char *s) {
  for (int k = 0; k <= PLACE_METIS; k++)
    if (!strcmp(s, kind_names[k])) return k;
  return -1;
}

int64_t placement_block_tokens(const cost_mask *m, int64_t L) {
  if (m->kind == COST_MASK_FULL || m->rows < 1 || m->cols < 1) return L > 0 ? L : 1;
  int64_t frames = m->kind == COST_MASK_WINDOW ? m->tile_t : m->chunk;
  return m->rows * m->cols * (frames > 0 ? frames : 1);
}

void placement_keys(const cost_mask *m, int b, int nb, int *lo, int *hi) {
  if (m->kind == COST_MASK_BLOCK_CAUSAL) {
    *lo = m->window > 0 && b - m->window > 0 ? b - m->window : 0;
    *hi = b;
  } else if (m->kind == COST_MASK_WINDOW) {
    *lo = b - m->wt > 0 ? b - m->wt : 0;
    *hi = b + m->wt < nb - 1 ? b + m->wt : nb - 1;
  } else {
    *lo = 0, *hi = nb - 1;
  }
}

void placement_split(int64_t n, int k, int o, int64_t *first, int64_t *len) {
  int64_t base = n / k, rem = n % k;
  *len = base + (o < rem);
  *first = o * base + (o < rem ? o : rem);
}

// Tokens [b n, min((b + 1) n, L)) of block b of n tokens.
static int64_t block_len(int64_t L, int64_t n, int b) {
  int64_t first = (int64_t)b * n, end = first + n < L ? first + n : L;
  return end - first;
}

// Work of one query token of each of the nb blocks (header): w (nb).
static void token_work(const cost_mask *m, int64_t L, int64_t n, int nb, double *w) {
  double spatial = 1, frame = 1;
  if (m->kind == COST_MASK_WINDOW) {  // cost_clip_area of one frame is its spatial factor
    cost_model one = {.mask = *m};
    frame = (double)m->rows * (double)m->cols;
    spatial = cost_clip_area(&one, m->rows * m->cols);
  }
  for (int b = 0; b < nb; b++) {
    int lo, hi;
    placement_keys(m, b, nb, &lo, &hi);
    int64_t end = (int64_t)(hi + 1) * n < L ? (int64_t)(hi + 1) * n : L;
    double keys = (double)(end - (int64_t)lo * n);
    w[b] = m->kind == COST_MASK_WINDOW ? keys / frame * spatial / frame : keys;
  }
}

// Appends [first, first + len) held by `rank`, cut at block boundaries.
static void add_range(placement *p, int64_t n, int64_t first, int64_t len, int rank) {
  while (len > 0) {
    int b = (int)(first / n);
    int64_t end = (int64_t)(b + 1) * n, take = end - first < len ? end - first : len;
    place_seg *s = p->nseg ? &p->seg[p->nseg - 1] : NULL;
    if (s && s->rank == rank && s->block == b && s->first + s->len == first)
      s->len += take;
    else
      p->seg[p->nseg++] = (place_seg){.first = first, .len = take, .rank = rank, .block = b};
    first += take, len -= take;
  }
}

// An indexed binary min-heap of ranks by load.
typedef struct {
  int *heap, *where;
  const double *load;
  int n;
} rank_heap;

static int heap_less(const rank_heap *h, int a, int b) {
  double la = h->load[h->heap[a]], lb = h->load[h->heap[b]];
  return la < lb || (la == lb && h->heap[a] < h->heap[b]);
}

static void heap_swap(rank_heap *h, int a, int b) {
  int t = h->heap[a];
  h->heap[a] = h->heap[b], h->heap[b] = t;
  h->where[h->heap[a]] = a, h->where[h->heap[b]] = b;
}

// Restores the heap after rank r's load grew.
static void heap_down(rank_heap *h, int r) {
  int i = h->where[r];
  for (;;) {
    int l = 2 * i + 1, s = i;
    if (l < h->n && heap_less(h, l, s)) s = l;
    if (l + 1 < h->n && heap_less(h, l + 1, s)) s = l + 1;
    if (s == i) return;
    heap_swap(h, i, s);
    i = s;
  }
}

typedef struct {
  int64_t first, len;
  double work;
  int block;
} unit;

static int unit_heavier(const void *a, const void *b) {
  const unit *x = a, *y = b;
  if (x->work != y->work) return x->work > y->work ? -1 : 1;
  return x->first < y->first ? -1 : x->first > y->first;
}

static int unit_first(const void *a, const void *b) {
  const unit *x = a, *y = b;
  return x->first < y->first ? -1 : x->first > y->first;
}

// The greedy placement (header) into p, whose seg has room for the pieces.
static tsr_status place_greedy(placement *p, const double *w, int64_t n) {
  const int k = p->k, nb = p->nblocks;
  int64_t per = ((int64_t)8 * k + nb - 1) / nb;
  int64_t nu = 0;
  for (int b = 0; b < nb; b++) {
    int64_t bl = block_len(p->L, n, b);
    nu += per < bl ? per : bl;
  }
  unit *u = malloc((size_t)nu * sizeof *u);
  int *last = malloc((size_t)nb * sizeof *last);
  rank_heap h = {.heap = malloc((size_t)k * sizeof(int)), .where = malloc((size_t)k * sizeof(int)),
                 .load = p->work, .n = k};
  tsr_status st = TSR_OK;
  if (!u || !last || !h.heap || !h.where) {
    st = err_set(TSR_ENOMEM, "placement: out of memory (%lld pieces)", (long long)nu);
    goto done;
  }
  int64_t j = 0;
  double total = 0;
  for (int b = 0; b < nb; b++) {
    int64_t bl = block_len(p->L, n, b), pieces = per < bl ? per : bl;
    for (int64_t i = 0; i < pieces; i++, j++) {
      int64_t f, len;
      placement_split(bl, (int)pieces, (int)i, &f, &len);
      u[j] = (unit){.first = (int64_t)b * n + f, .len = len, .work = (double)len * w[b], .block = b};
      total += u[j].work;
    }
    last[b] = -1;
  }
  qsort(u, (size_t)nu, sizeof *u, unit_heavier);
  for (int r = 0; r < k; r++) h.heap[r] = r, h.where[r] = r;
  const double slack = 0.02 * total / k;
  double most = 0;
  for (j = 0; j < nu; j++) {
    int r = h.heap[0], c = last[u[j].block];
    if (c >= 0 && c != r && p->work[c] <= p->work[r] + slack && p->work[c] + u[j].work <= most)
      r = c;
    p->work[r] += u[j].work;
    if (p->work[r] > most) most = p->work[r];
    heap_down(&h, r);
    last[u[j].block] = r;
    u[j].block = r;  // the unit's owner, from here on
  }
  qsort(u, (size_t)nu, sizeof *u, unit_first);
  for (j = 0; j < nu; j++) add_range(p, n, u[j].first, u[j].len, u[j].block);
done:
  free(u), free(last), free(h.heap), free(h.where);
  return st;
}

// The balanced placement (header) into p: rank r's range ends at the token where the
// prefix work first reaches (r + 1)/k of the total, rounded to the nearest token.
static void place_balanced(placement *p, const double *w, int64_t n) {
  double total = 0;
  for (int b = 0; b < p->nblocks; b++) total += (double)block_len(p->L, n, b) * w[b];
  int64_t start = 0, t = 0;
  double before = 0;  // work of tokens [0, t) with t at the start of block b
  int b = 0;
  for (int r = 0; r < p->k; r++) {
    double target = total * (r + 1) / p->k;
    int64_t end = p->L;
    if (r < p->k - 1) {
      while (b < p->nblocks && before + (double)block_len(p->L, n, b) * w[b] < target)
        before += (double)block_len(p->L, n, b) * w[b], t += block_len(p->L, n, b), b++;
      end = b < p->nblocks ? t + (int64_t)llround((target - before) / w[b]) : p->L;
      if (end > p->L) end = p->L;
    }
    if (end < start) end = start;
    add_range(p, n, start, end - start, r);
    start = end;
  }
}

#if TESSERA_HAVE_METIS
// Pieces a rank the metis kind cuts a clip into: fine enough that the token cap's 5% over a
// k-th is several pieces, so METIS can meet it and the moves after it are small.
#define METIS_PIECES 16
// The most adjacency entries (twice the edges) of a metis graph: a causal clip's graph is
// dense (every piece needs every earlier one), so its pieces are halved until it fits.
#define METIS_MAX_ADJ ((int64_t)1 << 24)

// The blocks needing block c (those b with lo(b) <= c <= hi(b)) are a range, since lo and hi
// grow with b: nlo, nhi (nb) its ends; klo, khi (nb) every block's own key range.
static void block_ranges(const cost_mask *m, int nb, int *klo, int *khi, int *nlo, int *nhi) {
  for (int b = 0; b < nb; b++) placement_keys(m, b, nb, &klo[b], &khi[b]);
  for (int c = 0, b = 0, e = 0; c < nb; c++) {
    while (khi[b] < c) b++;
    while (e < nb && klo[e] <= c) e++;
    nlo[c] = b, nhi[c] = e - 1;
  }
}

// Adjacency entries of the graph of `per` pieces a block (pc, ps filled: pieces of each
// block and their prefix sums, nb + 1): a piece of block b neighbours every other piece of
// the blocks it needs or that need it.
static int64_t metis_adjacency(int nb, int64_t per, const int64_t *bl, const int *klo,
                               const int *khi, const int *nlo, const int *nhi, int64_t *pc,
                               int64_t *ps) {
  ps[0] = 0;
  for (int b = 0; b < nb; b++) pc[b] = per < bl[b] ? per : bl[b], ps[b + 1] = ps[b] + pc[b];
  int64_t adj = 0;
  for (int b = 0; b < nb; b++) {
    int lo = klo[b] < nlo[b] ? klo[b] : nlo[b], hi = khi[b] > nhi[b] ? khi[b] : nhi[b];
    adj += pc[b] * (ps[hi + 1] - ps[lo] - 1);
  }
  return adj;
}

// The metis placement (header) into p, whose seg has room for 18k + nb pieces; L > k > 1.
static tsr_status place_metis(placement *p, const cost_mask *m, const double *w, int64_t n) {
  const int k = p->k, nb = p->nblocks;
  const int64_t L = p->L;
  int *kr = malloc((size_t)nb * 4 * sizeof *kr);
  int64_t *bl = malloc((size_t)nb * 3 * sizeof *bl + sizeof *bl);
  unit *u = NULL;
  idx_t *xadj = NULL, *adj = NULL, *aw = NULL, *vw = NULL, *part = NULL;
  double *load = calloc((size_t)k, sizeof *load);
  int64_t *held = calloc((size_t)k, sizeof *held);
  tsr_status st = TSR_OK;
  if (!kr || !bl || !load || !held) {
    st = err_set(TSR_ENOMEM, "placement: out of memory (metis, %d blocks)", nb);
    goto done;
  }
  int *klo = kr, *khi = kr + nb, *nlo = kr + 2 * nb, *nhi = kr + 3 * nb;
  int64_t *pc = bl + nb, *ps = bl + 2 * nb;
  for (int b = 0; b < nb; b++) bl[b] = block_len(L, n, b);
  block_ranges(m, nb, klo, khi, nlo, nhi);
  int64_t per = ((int64_t)METIS_PIECES * k + nb - 1) / nb;
  int64_t nadj = metis_adjacency(nb, per, bl, klo, khi, nlo, nhi, pc, ps);
  while (nadj > METIS_MAX_ADJ && per > 1)
    per = (per + 1) / 2, nadj = metis_adjacency(nb, per, bl, klo, khi, nlo, nhi, pc, ps);
  if (nadj > METIS_MAX_ADJ) {
    st = err_set(TSR_EINVAL, "placement: the metis graph of a clip of %lld tokens (%d mask "
                 "blocks) over %d ranks has %lld adjacency entries, more than %lld: place it "
                 "blockwise", (long long)L, nb, k, (long long)nadj, (long long)METIS_MAX_ADJ);
    goto done;
  }
  const int64_t nv = ps[nb], room = nv + 2 * (int64_t)k;  // a move may split a piece
  u = malloc((size_t)room * sizeof *u);
  xadj = malloc((size_t)(nv + 1) * sizeof *xadj);
  adj = malloc((size_t)(nadj ? nadj : 1) * sizeof *adj);
  aw = malloc((size_t)(nadj ? nadj : 1) * sizeof *aw);
  vw = malloc((size_t)nv * 2 * sizeof *vw);
  part = malloc((size_t)nv * sizeof *part);
  if (!u || !xadj || !adj || !aw || !vw || !part) {
    st = err_set(TSR_ENOMEM, "placement: out of memory (metis graph of %lld entries)",
                 (long long)nadj);
    goto done;
  }
  double total = 0;
  int64_t maxlen = 1;
  for (int b = 0; b < nb; b++)
    for (int64_t i = 0; i < pc[b]; i++) {
      int64_t f, len;
      placement_split(bl[b], (int)pc[b], (int)i, &f, &len);
      u[ps[b] + i] = (unit){.first = (int64_t)b * n + f, .len = len, .work = (double)len * w[b], .block = b};
      total += (double)len * w[b];
      if (len > maxlen) maxlen = len;
    }
  // integer weights for idx_t: each constraint's total about 1e9, every vertex and edge >= 1
  const double sw = total > 0 ? 1e9 / total : 1, stok = L > 1000000000 ? 1e9 / (double)L : 1;
  const double se = nadj ? 1e9 / ((double)nadj * 2 * (double)maxlen) : 1;
  int64_t e = 0;
  xadj[0] = 0;
  for (int b = 0; b < nb; b++) {
    int lo = klo[b] < nlo[b] ? klo[b] : nlo[b], hi = khi[b] > nhi[b] ? khi[b] : nhi[b];
    for (int64_t i = ps[b]; i < ps[b + 1]; i++) {
      vw[2 * i] = (idx_t)fmax(1, llround(u[i].work * sw));
      vw[2 * i + 1] = (idx_t)fmax(1, llround((double)u[i].len * stok));
      for (int c = lo; c <= hi; c++) {
        // the tokens that travel were the two cut: each piece's to the other when it is
        // needed there, a piece's share of the at most k - 1 copies its needers take
        double need_c = (double)(ps[nhi[c] + 1] - ps[nlo[c]] - 1);
        double need_b = (double)(ps[nhi[b] + 1] - ps[nlo[b]] - 1);
        double gc = c >= klo[b] && c <= khi[b] ? fmin(1, (k - 1) / need_c) : 0;
        double gb = b >= klo[c] && b <= khi[c] ? fmin(1, (k - 1) / need_b) : 0;
        for (int64_t j = ps[c]; j < ps[c + 1]; j++) {
          if (j == i) continue;
          adj[e] = (idx_t)j;
          aw[e++] = (idx_t)fmax(1, llround(((double)u[j].len * gc + (double)u[i].len * gb) * se));
        }
      }
      xadj[i + 1] = (idx_t)e;
    }
  }
  idx_t nvtxs = (idx_t)nv, ncon = 2, nparts = k, cut = 0, options[METIS_NOPTIONS];
  real_t ub[2] = {(real_t)PLACE_METIS_UB_WORK, (real_t)PLACE_HOLD_SLACK};
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_SEED] = PLACE_METIS_SEED;
  int rc = METIS_PartGraphKway(&nvtxs, &ncon, xadj, adj, vw, NULL, aw, &nparts, NULL, ub,
                               options, &cut, part);
  if (rc != METIS_OK) {
    st = err_set(rc == METIS_ERROR_MEMORY ? TSR_ENOMEM : TSR_EINVAL, "placement: "
                 "METIS_PartGraphKway failed (%d) on a clip of %lld tokens over %d ranks", rc,
                 (long long)L, k);
    goto done;
  }
  for (int64_t i = 0; i < nv; i++) {
    u[i].block = (int)part[i];  // the unit's owner, from here on
    load[part[i]] += u[i].work, held[part[i]] += u[i].len;
  }
  // the token cap (placement_for's): the tail of a rank's last pieces, heaviest under a
  // causal mask, goes to the least loaded rank with room, split where that fills it
  const int64_t cap = (int64_t)floor(PLACE_HOLD_SLACK * (double)((L + k - 1) / k));
  int64_t nu = nv;
  for (int r = 0; r < k; r++)
    for (int64_t j = nv - 1; j >= 0 && held[r] > cap;) {
      if (u[j].block != r) {
        j--;
        continue;
      }
      int q = -1;
      for (int o = 0; o < k; o++)
        if (held[o] < cap && (q < 0 || load[o] < load[q])) q = o;
      int64_t take = u[j].len, over = held[r] - cap, space = cap - held[q];
      take = take < over ? take : over;
      take = take < space ? take : space;
      double tw = u[j].work / (double)u[j].len * (double)take;
      if (take == u[j].len) {
        u[j].block = q, j--;
      } else {
        u[nu++] = (unit){.first = u[j].first + u[j].len - take, .len = take, .work = tw, .block = q};
        u[j].len -= take, u[j].work -= tw;
      }
      held[r] -= take, held[q] += take, load[r] -= tw, load[q] += tw;
    }
  qsort(u, (size_t)nu, sizeof *u, unit_first);
  for (int64_t j = 0; j < nu; j++) add_range(p, n, u[j].first, u[j].len, u[j].block);
done:
  free(kr), free(bl), free(u), free(xadj), free(adj), free(aw), free(vw), free(part);
  free(load), free(held);
  return st;
}
#endif

// work (unless greedy filled it), own, held and recv of p's segments; w: per-token work.
static tsr_status account(placement *p, const cost_mask *m, const double *w, int64_t n,
                          int have_work) {
  const int k = p->k, nb = p->nblocks;
  int *order = malloc((size_t)(p->nseg ? p->nseg : 1) * sizeof *order);
  int *count = calloc((size_t)k + 1, sizeof *count);
  int64_t *mine = malloc((size_t)(nb + 1) * sizeof *mine);  // prefix over blocks: rank's tokens
  if (!order || !count || !mine) {
    free(order), free(count), free(mine);
    return err_set(TSR_ENOMEM, "placement: out of memory");
  }
  for (int i = 0; i < p->nseg; i++) count[p->seg[i].rank + 1]++;
  for (int r = 0; r < k; r++) count[r + 1] += count[r];
  for (int i = 0; i < p->nseg; i++) order[count[p->seg[i].rank]++] = i;  // by rank, in order
  for (int i = 0, r = 0; r < k; r++) {
    int first = i;
    memset(mine, 0, (size_t)(nb + 1) * sizeof *mine);
    for (int j = first; j < count[r]; j++) mine[p->seg[order[j]].block + 1] += p->seg[order[j]].len;
    for (int b = 0; b < nb; b++) mine[b + 1] += mine[b];
    // count[r] is now the end of rank r's segments; their blocks increase, and so do the
    // ends of their key ranges: the union of [lo, hi] is a sweep
    int64_t need = 0, cover_end = 0;  // tokens of the union so far, its end
    for (; i < count[r]; i++) {
      const place_seg *s = &p->seg[order[i]];
      int lo, hi;
      placement_keys(m, s->block, nb, &lo, &hi);
      int64_t a = (int64_t)lo * n, e = (int64_t)(hi + 1) * n < p->L ? (int64_t)(hi + 1) * n : p->L;
      // the share of the segment's work whose keys the rank holds (w: a query's over e - a keys)
      p->own[r] += (double)s->len * w[s->block] * (double)(mine[hi + 1] - mine[lo]) / (double)(e - a);
      if (a < cover_end) a = cover_end;
      if (e > a) need += e - a, cover_end = e;
      p->held[r] += s->len;
      if (!have_work) p->work[r] += (double)s->len * w[s->block];
    }
    p->recv[r] = need - p->held[r];
  }
  free(order), free(count), free(mine);
  return TSR_OK;
}

tsr_status placement_make(const cost_mask *m, int64_t L, int k, place_kind kind, placement *out) {
  memset(out, 0, sizeof *out);
  if (k < 1 || L < 0)
    return err_set(TSR_EINVAL, "placement: group of %d ranks, clip of %lld tokens", k, (long long)L);
  int64_t n = placement_block_tokens(m, L);
  int64_t nb = L > 0 ? (L + n - 1) / n : 0;
  if (nb > INT32_MAX / 16 || (int64_t)k * 18 > INT32_MAX / 16)
    return err_set(TSR_EINVAL, "placement: a clip of %lld blocks over %d ranks is too large",
                   (long long)nb, k);
  out->k = k, out->L = L, out->nblocks = (int)nb;
  if ((int)kind < 0 || (int)kind >= PLACE_NKINDS)
    return err_set(TSR_EINVAL, "placement: kind %s is not built here%s", place_kind_name(kind),
                   kind == PLACE_METIS ? ": " PLACE_METIS_MISSING : "");
  // segments: contiguous and zigzag at most one a chunk plus one a block; greedy and metis a
  // piece (metis: its moves split up to 2k more)
  int64_t cap = (kind == PLACE_GREEDY ? 8 * (int64_t)k + nb
                 : kind == PLACE_METIS ? 18 * (int64_t)k + nb : 2 * (int64_t)k) + nb + 1;
  out->seg = malloc((size_t)cap * sizeof *out->seg);
  out->work = calloc((size_t)k, sizeof *out->work);
  out->held = calloc((size_t)k, sizeof *out->held);
  out->recv = calloc((size_t)k, sizeof *out->recv);
  out->own = calloc((size_t)k, sizeof *out->own);
  double *w = malloc((size_t)(nb ? nb : 1) * sizeof *w);
  tsr_status st = TSR_OK;
  if (!out->seg || !out->work || !out->held || !out->recv || !out->own || !w) {
    st = err_set(TSR_ENOMEM, "placement: out of memory");
    goto done;
  }
  token_work(m, L, n, (int)nb, w);
  if (kind == PLACE_GREEDY && nb > 0) {
    st = place_greedy(out, w, n);
#if TESSERA_HAVE_METIS
  } else if (kind == PLACE_METIS && L > k && k > 1) {
    st = place_metis(out, m, w, n);
#endif
  } else if (kind == PLACE_BALANCED) {
    place_balanced(out, w, n);
  } else {
    int chunks = kind == PLACE_ZIGZAG ? 2 * k : k;
    for (int o = 0; o < chunks; o++) {
      int64_t f, len;
      placement_split(L, chunks, o, &f, &len);
      add_range(out, n, f, len, o < k ? o : chunks - 1 - o);
    }
  }
  if (!st) st = account(out, m, w, n, kind == PLACE_GREEDY);
done:
  free(w);
  if (st) placement_free(out);
  return st;
}

void placement_free(placement *p) {
  free(p->seg), free(p->work), free(p->held), free(p->recv), free(p->own);
  memset(p, 0, sizeof *p);
}

double placement_imbalance(const placement *p) {
  double sum = 0, most = 0;
  for (int r = 0; r < p->k; r++) sum += p->work[r], most = fmax(most, p->work[r]);
  return sum > 0 ? most / (sum / p->k) : 1.0;
}

// The cache: an open-addressed table of made placements, grown at half full.
typedef struct {
  cost_mask m;
  int64_t L;
  int k, kind;
  placement *p;
} cache_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache;
static size_t cache_cap, cache_used;

static uint64_t cache_hash(const cost_mask *m, int64_t L, int k, int kind) {
  const int64_t v[14] = {m->kind, m->chunk, m->window, m->wt, m->wh, m->ww, m->tile_t,
                         m->tile_h, m->tile_w, m->rows, m->cols, L, k, kind};
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < 14; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ULL;
  return h ^ (h >> 29);
}

static int mask_equal(const cost_mask *a, const cost_mask *b) {
  return a->kind == b->kind && a->chunk == b->chunk && a->window == b->window && a->wt == b->wt &&
         a->wh == b->wh && a->ww == b->ww && a->tile_t == b->tile_t && a->tile_h == b->tile_h &&
         a->tile_w == b->tile_w && a->rows == b->rows && a->cols == b->cols;
}

static int cache_match(const cache_entry *e, const cost_mask *m, int64_t L, int k, int kind) {
  return e->p && e->L == L && e->k == k && e->kind == kind && mask_equal(&e->m, m);
}

static tsr_status cache_grow(void) {
  size_t cap = cache_cap ? 2 * cache_cap : 256;
  cache_entry *t = calloc(cap, sizeof *t);
  if (!t) return err_set(TSR_ENOMEM, "placement cache: out of memory");
  for (size_t i = 0; i < cache_cap; i++) {
    const cache_entry *e = &cache[i];
    if (!e->p) continue;
    size_t j = cache_hash(&e->m, e->L, e->k, e->kind) & (cap - 1);
    while (t[j].p) j = (j + 1) & (cap - 1);
    t[j] = *e;
  }
  free(cache);
  cache = t, cache_cap = cap;
  return TSR_OK;
}

tsr_status placement_cached(const cost_mask *m, int64_t L, int k, place_kind kind,
                            const placement **out) {
  const cost_mask key = *m;
  tsr_status st = TSR_OK;
  pthread_mutex_lock(&cache_lock);
  if (2 * (cache_used + 1) > cache_cap) st = cache_grow();
  size_t j = cache_cap ? cache_hash(&key, L, k, kind) & (cache_cap - 1) : 0;
  while (!st && cache[j].p && !cache_match(&cache[j], &key, L, k, kind)) j = (j + 1) & (cache_cap - 1);
  if (!st && !cache[j].p) {
    placement *p = malloc(sizeof *p);
    if (!p) st = err_set(TSR_ENOMEM, "placement cache: out of memory");
    if (!st && (st = placement_make(&key, L, k, kind, p))) free(p);
    if (!st) cache[j] = (cache_entry){.m = key, .L = L, .k = k, .kind = kind, .p = p}, cache_used++;
  }
  *out = st ? NULL : cache[j].p;
  pthread_mutex_unlock(&cache_lock);
  return st;
}

void placement_cache_clear(void) {
  pthread_mutex_lock(&cache_lock);
  for (size_t i = 0; i < cache_cap; i++)
    if (cache[i].p) placement_free(cache[i].p), free(cache[i].p);
  free(cache);
  cache = NULL, cache_cap = cache_used = 0;
  pthread_mutex_unlock(&cache_lock);
}

// max over ranks of p's work, then of its receipts.
static void peaks(const placement *p, double *work, int64_t *recv) {
  *work = 0, *recv = 0;
  for (int r = 0; r < p->k; r++) {
    if (p->work[r] > *work) *work = p->work[r];
    if (p->recv[r] > *recv) *recv = p->recv[r];
  }
}

// 1 when c (of a clip of L tokens over k ranks) holds more than PLACE_HOLD_SLACK x
// ceil(L / k) tokens on a rank: the memory model counts ceil(L / k) a rank.
static int holds_too_much(const placement *c, int64_t L, int k) {
  int64_t most = 0;
  for (int q = 0; q < k; q++) most = c->held[q] > most ? c->held[q] : most;
  return (double)most > PLACE_HOLD_SLACK * (double)((L + k - 1) / k);
}

tsr_status placement_for(const cost_mask *m, int64_t L, int k, const placement **out) {
  if (m->place != COST_PLACE_BLOCKWISE || m->kind == COST_MASK_FULL)
    return placement_cached(m, L, k, PLACE_CONTIGUOUS, out);
  if (m->pin > 0) {
    tsr_status st = placement_cached(m, L, k, (place_kind)(m->pin - 1), out);
    if (st || !holds_too_much(*out, L, k)) return st;
    return placement_cached(m, L, k, PLACE_CONTIGUOUS, out);
  }
  // in turn (header): the first within PLACE_GOOD_ENOUGH, else the best
  const placement *best = NULL;
  double bw = 0;
  int64_t br = 0;
  static const place_kind order[] = {PLACE_ZIGZAG, PLACE_BALANCED, PLACE_GREEDY, PLACE_CONTIGUOUS};
  for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
    const placement *c;
    tsr_status st = placement_cached(m, L, k, order[i], &c);
    if (st) return st;
    double w;
    int64_t r;
    peaks(c, &w, &r);
    if (order[i] != PLACE_CONTIGUOUS && holds_too_much(c, L, k)) continue;
    if (!best || w < bw || (w == bw && r < br)) best = c, bw = w, br = r;
    if (placement_imbalance(c) <= PLACE_GOOD_ENOUGH) break;
  }
  *out = best;
  return TSR_OK;
}

tsr_status placement_group(const cost_mask *m, const int64_t *L, int n, int k, double *work,
                           int64_t *recv, int64_t *segs, double *own) {
  for (int r = 0; r < k; r++) {
    if (work) work[r] = 0;
    if (recv) recv[r] = 0;
    if (segs) segs[r] = 0;
    if (own) own[r] = 0;
  }
  for (int c = 0; c < n; c++) {
    const placement *p;
    tsr_status st = placement_for(m, L[c], k, &p);
    if (st) return st;
    for (int r = 0; r < k; r++) {
      if (work) work[r] += p->work[r];
      if (recv) recv[r] += p->recv[r];
      if (own) own[r] += p->own[r];
    }
    for (int i = 0; segs && i < p->nseg; i++) segs[p->seg[i].rank]++;
  }
  return TSR_OK;
}
