// tools/y4m.h — write RGB frames as a YUV4MPEG2 (.y4m) video, without FFmpeg: what
// `tessera sample` writes when built without media (TESSERA_MEDIA=OFF) or asked for .y4m.
// Format: header "YUV4MPEG2 W H F<num>:<den> Ip A1:1 C444", then per frame "FRAME\n" and
// the full-size Y, Cb, Cr planes (4:4:4, no chroma subsampling, so nothing is lost to
// resampling), BT.601 limited range ("studio swing", Y 16..235, Cb/Cr 16..240), the
// default that players and ffmpeg assume for Y4M.
#ifndef TESSERA_TOOLS_Y4M_H
#define TESSERA_TOOLS_Y4M_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

// Writes the stream header to f. TSR_EIO on a write error.
tsr_status y4m_write_header(FILE *f, int width, int height, int fps_num, int fps_den);
// Converts one rgb24 frame (height x width x 3, row-major) and writes it to f.
tsr_status y4m_write_frame_rgb(FILE *f, const uint8_t *rgb, int width, int height);

#endif
