#!/usr/bin/env python3
# tests/kernels/attention_bf16_error.py — where test_backend_ops's tolerance for cuDNN's
# attention (3 * 2^-8 of the max-norm) comes from: the error of a flash-attention kernel that
# rounds P (forward) and P, dS (backward) to bf16 before its products, emulated in double on
# test_backend_ops's inputs (packings with empty and 1-token clips, Dh 16/64/128, q, k in
# [-2, 2], v, dout in [-1, 1], bf16-rounded), against the exact double result; outputs
# rounded to bf16 once as stored. Prints the largest error per output and head dim over the
# draws. Run with the Python that has torch: /usr/bin/python3 attention_bf16_error.py [draws]
import math
import sys

import torch


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float64)


def draw(shape, lo, hi):
    return bf16(torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo)


PACKINGS = [(131, [0, 0, 1, 1, 66, 66, 131]), (70, [0, 17, 17, 69, 70])]
HEADS = [(16, 2), (64, 2), (128, 1)]  # (Dh, H) as in test_backend_ops


def errors(L, cu, Dh, H):
    scale = 1 / math.sqrt(Dh)
    q, k = draw((L, H, Dh), -2, 2), draw((L, H, Dh), -2, 2)
    v, dout = draw((L, H, Dh), -1, 1), draw((L, H, Dh), -1, 1)
    exact = {n: torch.zeros(L, H, Dh, dtype=torch.float64) for n in ("out", "dq", "dk", "dv")}
    rounded = {n: torch.zeros_like(t) for n, t in exact.items()}
    for c in range(len(cu) - 1):
        a, b = cu[c], cu[c + 1]
        if a == b:
            continue
        for h in range(H):
            Q, K, V, dO = q[a:b, h], k[a:b, h], v[a:b, h], dout[a:b, h]
            S = Q @ K.T * scale
            P = torch.exp(S - torch.logsumexp(S, 1, keepdim=True))
            O = P @ V
            delta = (dO * bf16(O)).sum(1, keepdim=True)  # from the stored out, as the entries
            dS = P * (dO @ V.T - delta) * scale
            exact["out"][a:b, h], rounded["out"][a:b, h] = O, bf16(P) @ V
            exact["dv"][a:b, h], rounded["dv"][a:b, h] = P.T @ dO, bf16(P).T @ dO
            exact["dk"][a:b, h], rounded["dk"][a:b, h] = dS.T @ Q, bf16(dS).T @ Q
            exact["dq"][a:b, h], rounded["dq"][a:b, h] = dS @ K, bf16(dS) @ K
    return {n: ((bf16(rounded[n]) - exact[n]).abs().max() / exact[n].abs().max()).item() for n in exact}


def main():
    draws = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    torch.manual_seed(0)
    worst = {}
    for _ in range(draws):
        for L, cu in PACKINGS:
            for Dh, H in HEADS:
                for name, e in errors(L, cu, Dh, H).items():
                    worst[(name, Dh)] = max(worst.get((name, Dh), 0.0), e)
    for (name, Dh), e in sorted(worst.items()):
        print(f"{name:4s} Dh {Dh:3d}: {e:.3g} = 2^{math.log2(e):.2f}")
    print(f"max {max(worst.values()):.3g}; tolerance 3 * 2^-8 = {3 * 2 ** -8:.3g}")


if __name__ == "__main__":
    main()
