#!/usr/bin/env python3
"""kernels/cuda/emu/translate.py IN.cu OUT.cpp — the CUDA backend's source as C++ for the
emulated device (kernels/cuda/emu/cuemu.h says what that is).

Three rewrites, nothing else, so that the emulated code is the real code:
  NAME<<<grid, block[, smem[, stream]]>>>(args)  ->  cuemu_launch(NAME, grid, block[, ...])(args)
  extern __shared__ T name[];                    ->  T *name = (T *)cuemu_dyn_smem();
  __launch_bounds__(N) before a kernel           ->  recorded (the launch checks the block
                                                     size against it, as the hardware does)
and a table at the end registering every __global__ function's name and bound.
"""
import re
import sys

LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*<<<(.*?)>>>\s*\(", re.S)
DYN_SMEM = re.compile(r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w ]+?)\s+(\w+)\s*\[\s*\]\s*;")
KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\(\s*([^)]*?)\s*\)\s+)?([A-Za-z_]\w*)\s*\(")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    kernels = [(m.group(2), m.group(1) or "0") for m in KERNEL.finditer(text)]
    text = KERNEL.sub(lambda m: "__global__ void %s(" % m.group(2), text)
    text = LAUNCH.sub(lambda m: "cuemu_launch(%s, %s)(" % (m.group(1), m.group(2)), text)
    text = DYN_SMEM.sub(lambda m: "%s *%s = (%s *)cuemu_dyn_smem();" % (m.group(1), m.group(2), m.group(1)), text)
    if "<<<" in text or ">>>" in text or "extern __shared__" in text:
        sys.exit("translate.py: %s: a launch or dynamic shared array it cannot rewrite" % src)
    out = ['#line 1 "%s"\n' % src, text, "\n"]
    if kernels:
        out.append("static const cuemu_kernel_info cuemu_kernels_of_this_file[] = {\n")
        for name, bound in kernels:
            out.append('    {(const void *)&%s, "%s", (int)(%s)},\n' % (name, name, bound))
        out.append("};\nstatic const int cuemu_registered_ = cuemu_register_kernels(\n"
                   "    cuemu_kernels_of_this_file, (int)(sizeof cuemu_kernels_of_this_file /"
                   " sizeof cuemu_kernels_of_this_file[0]));\n")
    with open(dst, "w") as f:
        f.writelines(out)


if __name__ == "__main__":
    main()
