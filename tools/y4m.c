// tools/y4m.c — YUV4MPEG2 writer (tools/y4m.h).
#include "tools/y4m.h"

#include <stdlib.h>

tsr_status y4m_write_header(FILE *f, int width, int height, int fps_num, int fps_den) {
  if (fprintf(f, "YUV4MPEG2 W%d H%d F%d:%d Ip A1:1 C444\n", width, height, fps_num, fps_den) < 0)
    return err_set(TSR_EIO, "y4m: writing the header failed");
  return TSR_OK;
}

static uint8_t clamp_u8(double v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)(v + 0.5); }

tsr_status y4m_write_frame_rgb(FILE *f, const uint8_t *rgb, int width, int height) {
  size_t n = (size_t)width * height;
  uint8_t *yuv = malloc(3 * n);
  if (!yuv) return err_set(TSR_ENOMEM, "y4m: no memory for a %dx%d frame", width, height);
  for (size_t i = 0; i < n; i++) {
    double r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
    // BT.601, limited range: Y = 16 + 219 * Y', Cb/Cr = 128 + 224 * (B' - Y') / 1.772 ...
    yuv[i] = clamp_u8(16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255);
    yuv[n + i] = clamp_u8(128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255);
    yuv[2 * n + i] = clamp_u8(128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255);
  }
  int ok = fputs("FRAME\n", f) >= 0 && fwrite(yuv, 1, 3 * n, f) == 3 * n;
  free(yuv);
  return ok ? TSR_OK : err_set(TSR_EIO, "y4m: writing a frame failed");
}
