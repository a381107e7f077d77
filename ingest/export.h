// ingest/export.h — rebuild a stored clip from its tokens and encode it as MP4, so a
// person sees exactly what the model will see.
#ifndef TESSERA_INGEST_EXPORT_H
#define TESSERA_INGEST_EXPORT_H

#include <stdint.h>
#include "core/err.h"

// Exports clip `clip_id` of the store at `dir` to `out_path` (H.264, the store's fps,
// frame size (H*ph, W*pw)). The clip's checksum is verified first. crf as in encode.h.
tsr_status export_clip_mp4(const char *dir, int64_t clip_id, const char *out_path, int crf);

// Writes the clip's raw frames instead, (frames, h, w, 3) uint8 rgb24, for exact tests.
tsr_status export_clip_raw(const char *dir, int64_t clip_id, const char *out_path);

#endif
