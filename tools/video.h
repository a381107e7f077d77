// tools/video.h — a sampled clip (model/sample/sample.h) as a video file, for `tessera
// sample` and the trainer's samples during training: H.264 MP4 at the frame rate of the
// store the model was trained on (ingest/encode.h, FFmpeg), or YUV4MPEG2 (tools/y4m.h)
// when the path ends in .y4m, which is also the only format of a build without media.
// Written atomically (PATH.tmp, renamed).
#ifndef TESSERA_TOOLS_VIDEO_H
#define TESSERA_TOOLS_VIDEO_H

#include <stddef.h>

#include "core/err.h"
#include "model/sample/sample.h"

// Writes s to path: Y4M if it ends in .y4m (any case), else MP4 (TSR_EINVAL in a build
// without media). Pixel clips must be RGB (3 channels); a latent clip (s->store latent)
// is written as its PREVIEW: latent channels 0, 1, 2 as red, green, blue over their range
// in the clip, a latent frame per frame at the latent frame rate (not the decoded video:
// the VAE's decoder makes that from the latents, which `tessera sample` writes beside it).
tsr_status video_write(const char *path, const sample_result *s);
// "mp4", or "y4m" in a build without media.
const char *video_default_ext(void);
// path_noext + "." + video_default_ext(), written with video_write; the path in written
// (cap bytes). The trainer's write_video (model/train/options.h).
tsr_status video_write_default(const char *path_noext, const sample_result *s, char *written,
                               size_t cap);

#endif
