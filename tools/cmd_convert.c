// tools/cmd_convert.c — `tessera convert`: Wan transformer checkpoints between diffusers'
// folder (or the original Wan checkpoint) and tessera's checkpoint (model/io/wan_convert.h).
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "model/io/lora_io.h"
#include "model/io/wan_convert.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/opt.h"
#include "tools/parse.h"

enum { O_OUT = 1, O_TO, O_SET, O_DTYPE, O_EMA, O_MERGE, O_LAYOUT };

// The options, in the order of --help (tools/opt.h).
static const opt_def convert_opts[] = {
    OPT("out", "DST", O_OUT, NULL, "output checkpoint (or folder, --to diffusers)   [required]"),
    OPT("to", "T", O_TO, NULL, "tessera or diffusers                             [tessera]"),
    OPT("set", "KEY=VALUE", O_SET, NULL,
        "override a key of the converted config, e.g.\n"
        "model.text_len=226 or model.recompute=2; repeatable"),
    OPT("dtype", "D", O_DTYPE, NULL, "--to diffusers: fp32 or bf16 (nearest even)      [fp32]"),
    OPT("ema", NULL, O_EMA, NULL, "--to diffusers: the checkpoint's EMA weights"),
    OPT("merge-lora", "FILE", O_MERGE, NULL, "fold the adapters of FILE into checkpoint SRC"),
    OPT("lora-format", "L", O_LAYOUT, NULL,
        "SRC a LoRA file -> DST in layout diffusers, wan or kohya"),
    OPT_END};

void cmd_convert_usage(FILE *f) {
  fprintf(f,
          "usage: tessera convert SRC --out DST [options]\n\n"
          "Converts the transformer of Wan 2.1/2.2 (diffusers' WanTransformer3DModel) one tensor\n"
          "at a time (memory: the largest tensor). SRC is a diffusers folder (config.json and\n"
          "diffusion_pytorch_model*.safetensors, sharded with the index or not, F32 or BF16),\n"
          "or an original Wan checkpoint (Wan-AI's naming: one .safetensors file, or a folder\n"
          "of them with the index; the config from the tensors' shapes, the heads hidden / 128\n"
          "unless config.json's num_heads or --set model.heads=N says otherwise),\n"
          "and DST a tessera checkpoint of model.family = wan, weights only: start training from\n"
          "it with `tessera train --init DST`, sample with `tessera sample --raw`. With\n"
          "--to diffusers, SRC is a tessera checkpoint and DST a folder that\n"
          "WanTransformer3DModel.from_pretrained loads. docs/model.md, \"The Wan family\".\n"
          "With --merge-lora ADAPTERS, SRC is a tessera checkpoint and DST the same model with\n"
          "the LoRA adapters of ADAPTERS (a LoRA file in the diffusers/PEFT, wan or kohya\n"
          "layout, told by its keys: docs/model.md \"LoRA adapters\") folded into its weights,\n"
          "weights only. With --lora-format L alone, SRC is a LoRA file (any layout) and DST\n"
          "the same adapters in layout L: wan and kohya are the keys ComfyUI loads for Wan.\n\n"
          "options:\n");
  opt_help(f, convert_opts, 19);
}

static int report(const char *what, const char *src, const char *dst, const wan_convert_stats *s,
                  double secs) {
  printf("convert: %s %s -> %s: %d tensors, %lld parameters (%.2f GB read from %d file%s, "
         "%.2f GB written) in %.1f s\n", what, src, dst, s->tensors, (long long)s->params,
         s->bytes_in / 1e9, s->files_in, s->files_in == 1 ? "" : "s", s->bytes_out / 1e9, secs);
  return 0;
}

static int merge_lora(const char *src, const char *adapters, const char *out) {
  // the CPU's fp32 kernels: a merge is two small GEMMs a linear, and the weights are fp32
  if (lora_merge_checkpoint(kernels_cpu(), src, adapters, out)) return cli_error("convert");
  printf("convert: %s + LoRA %s -> %s (adapters merged into the weights)\n", src, adapters, out);
  return 0;
}

static int convert_lora(const char *src, const char *out, lora_layout l) {
  if (lora_convert_file(src, out, l)) return cli_error("convert");
  printf("convert: LoRA %s -> %s (%s layout)\n", src, out, lora_layout_name(l));
  return 0;
}

int cmd_convert(int argc, char **argv) {
  const char *out = NULL, *to = "tessera", *merge = NULL, *layout = NULL;
  char *sets[64];
  int nsets = 0, ema = 0;
  tsr_status st = TSR_OK;
  kernels_dtype kd = KERNELS_F32;
  int c;
  opt_parser op;
  opt_begin(&op, convert_opts, argc, argv);
  while (!st && (c = opt_next(&op)) != -1) {
    switch (c) {
    case O_OUT: out = optarg; break;
    case O_TO: to = optarg; break;
    case O_SET: st = parse_config_set(&op, sets, 64, &nsets); break;
    case O_DTYPE: st = parse_dtype("--dtype", optarg, &kd); break;
    case O_EMA: ema = 1; break;
    case O_MERGE: merge = optarg; break;
    case O_LAYOUT: layout = optarg; break;
    default: st = TSR_EINVAL;  // opt_next said why
    }
  }
  int back = !strcmp(to, "diffusers");
  if (!st) st = cli_positionals(argc, argv, 1, 1, "SRC");
  if (!st && !out) st = err_set(TSR_EINVAL, "missing --out DST");
  if (!st && !back && strcmp(to, "tessera"))
    st = err_set(TSR_EINVAL, "--to %s: use tessera or diffusers", to);
  int fp32 = kd == KERNELS_F32;  // --dtype's value (any spelling)
  if (!st && !back && (ema || !fp32))
    st = err_set(TSR_EINVAL, "--dtype and --ema are for --to diffusers (a tessera checkpoint is fp32)");
  if (!st && back && nsets)
    st = err_set(TSR_EINVAL, "--set is for --to tessera (the checkpoint's config is exported)");
  if (!st && merge && (back || nsets || ema || !fp32))
    st = err_set(TSR_EINVAL, "--merge-lora takes no --to diffusers, --set, --dtype or --ema "
                 "(merge, then convert the merged checkpoint)");
  lora_layout ll = LORA_LAYOUT_DIFFUSERS;
  if (!st && layout) st = lora_layout_parse(layout, &ll);
  if (!st && layout && (merge || back || nsets || ema || !fp32))
    st = err_set(TSR_EINVAL, "--lora-format converts a LoRA file alone (--merge-lora reads "
                 "every layout as it is)");
  if (st) return cli_usage_error("convert");
  const char *src = argv[optind];
  if (merge) return merge_lora(src, merge, out);
  if (layout) return convert_lora(src, out, ll);
  wan_convert_stats s;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  st = back ? wan_to_diffusers(src, out, !fp32, ema, &s)
            : wan_from_diffusers(src, out, sets, nsets, &s);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (st) return cli_error("convert");
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return report(back ? "tessera checkpoint" : "Wan transformer", src, out, &s, secs);
}
