// model/train/mix.h — dataset mixes: a DATASET.ini (the configs' INI format, core/ini.h)
// listing token stores, each with a weight or a repeat count, trained on as one dataset
// (`tessera train --data DATASET.ini`, docs/train.md "Dataset mixes").
//
//   [store.clips]          ; one section a store, in the order of the mix (store 0, 1, ...)
//   path = /data/clips     ; absolute, or relative to the INI's folder
//   weight = 3             ; or: repeat = 2 (neither: repeat = 1)
//
// Epoch quotas (clips a store contributes to one epoch of the mix, mix_quotas):
//   repeat = r: every training clip of the store r times (r * its clips);
//   weight = w: the weighted stores together give as many draws as they hold clips, split
//     between them in proportion to their weights (largest remainders, ties to the earlier
//     store); a store whose share rounds to no draw at all is refused, naming it.
// So stores that all have `repeat = 1` are their concatenation (each clip once an epoch),
// equal weights give every store the same number of draws whatever its size, and a mix of
// one store (either key, repeat 1) draws exactly what the store alone draws.
//
// The sampler's epochs of a mix: data_sampler_init_mix (model/train/data.h).
//
// Ids: the clip of id `id` of store s is clip (s << MIX_ID_SHIFT) | id of the mix (store 0
// keeps its ids), so ids stay unique across the mix and the objective's per-clip keys of a
// one-store mix are the store's own.
#ifndef TESSERA_MODEL_TRAIN_MIX_H
#define TESSERA_MODEL_TRAIN_MIX_H

#include <limits.h>
#include <stdint.h>

#include "core/err.h"

enum { MIX_MAX_STORES = 256, MIX_NAME_MAX = 64, MIX_ID_SHIFT = 40 };
#define MIX_MAX_REPEAT 1000000

typedef struct {
  char name[MIX_NAME_MAX];  // NAME of its [store.NAME] section
  char path[PATH_MAX];      // the store's folder, resolved against the INI's folder
  double weight;            // > 0 for a weighted store, 0 for a repeated one
  int64_t repeat;           // >= 1 for a repeated store, 0 for a weighted one
} mix_store;

typedef struct mix_spec {
  char path[PATH_MAX];  // the INI
  int n;                // stores (1..MIX_MAX_STORES)
  mix_store *store;     // (n) in the file's order
} mix_spec;

// 1 when `path` names a regular file (a DATASET.ini; a store is a folder), else 0.
int mix_is_spec(const char *path);
// Reads the INI at `path`. TSR_EFORMAT/EINVAL naming the file, line and key for: a key
// outside a [store.NAME] section, another section, an unknown or repeated key, a store
// without `path`, both `weight` and `repeat`, a weight that is not a finite number > 0, a
// repeat that is not an integer in 1..MIX_MAX_REPEAT, a name used twice, no store, more
// than MIX_MAX_STORES. TSR_EIO if the file cannot be read. mix_free releases it.
tsr_status mix_read(const char *path, mix_spec *out);
void mix_free(mix_spec *m);

// Epoch quotas: quota[s] draws of store s per epoch, for clips[s] (>= 1) training clips of
// each store (both (m->n)). TSR_EINVAL naming the store if a quota would be 0 or overflow.
tsr_status mix_quotas(const mix_spec *m, const int64_t *clips, int64_t *quota);
// Held-out clips of each store, val[s] (m->n), for n_val in all: with n_val >= m->n one
// each first, then (or with fewer, all of them) in proportion to the stores' epoch quotas
// over all their clips (clips: (m->n)), largest remainders. Fails as mix_quotas does.
tsr_status mix_val_counts(const mix_spec *m, const int64_t *clips, int64_t n_val, int64_t *val);
// What an epoch of the mix draws when no clip is held out (`tessera index stats
// DATASET.ini`): quota[s] of each store as mix_quotas gives them for clips[s] clips (both
// (m->n)), *draws their sum. TSR_EINVAL naming the mix, the store and its folder when a
// store has no clips, or as mix_quotas fails.
tsr_status mix_epoch_draws(const mix_spec *m, const int64_t *clips, int64_t *quota,
                           int64_t *draws);

#endif
