// store/shard_format.h — the sizes of a shard file's parts, which the shard reader and
// writer (store/shard.h) and every check of an index row's offsets use.
//
// Layout (little-endian; docs/store-format.md):
//   [0, 4096)      shard header: magic "TSRSHARD", version (3; 1 and 2 are read too), header
//                  size, token geometry (pt, ph, pw, channels, dtype), version 2: the store's
//                  fps, short side and max seconds, version 3: a latent store's VAE strides;
//                  XXH3-64 of the header's bytes
//   then blocks at 4096-aligned offsets, each:
//     64-byte block header: magic "TSRCLIP1", T, H, W, metadata bytes, payload bytes,
//                           payload XXH3-64, metadata XXH3-64, header XXH3-64
//     payload: T*H*W tokens, each pt*ph*pw*channels values in (t, y, x, c) order;
//              tokens in (T, H, W) row-major order
//     version 2: metadata trailer (JSON, store/clip_meta.h) describing the clip and its
//              source, so the index can be rebuilt from the shards (0 bytes in version 1)
//     zero padding to the next multiple of 4096
//   version 3: a caption block (magic "TSRTEXT1") may come before the clip blocks of a
//     source: 64-byte header (tokens, width, dtype, text bytes, embedding bytes, embedding
//     XXH3-64, text XXH3-64, header XXH3-64), the caption embedding (tokens x width values,
//     row-major, bf16 or f32), the caption text (UTF-8), zero padding to 4096. Clip rows
//     point at it (store_clip.caption_offset); as it precedes them, a shard's committed end
//     (the end of its last clip block) covers it.
// A clip never spans two shards. Blocks are written by one writer only.
#ifndef TESSERA_STORE_SHARD_FORMAT_H
#define TESSERA_STORE_SHARD_FORMAT_H

#define SHARD_HEADER_BYTES 4096
#define SHARD_BLOCK_HEADER_BYTES 64
#define SHARD_ALIGN 4096
#define SHARD_META_MAX 65536  // largest metadata trailer of a block (bytes)

#endif
