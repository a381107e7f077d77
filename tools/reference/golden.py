#!/usr/bin/env python3
"""tools/reference/golden.py FILE — checks a golden_dump file (tests/model/golden_dump.c):
recomputes the prediction, the loss and every parameter gradient of the C DiT with the
PyTorch reference (dit.py) in float64 autograd from the same weights and batch, prints a
table of relative errors (norm of difference / norm of reference) and exits 1 if any
exceeds 1e-4 (the C code runs in float32: its rounding gives ~1e-6; 1e-4 catches any
formula difference). Exit 0 with 'SKIP' if torch is missing."""
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP: python3-torch not installed")
    sys.exit(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dit  # noqa: E402
import safetensors_io  # noqa: E402

TOL = 1e-4


def rel(a, b):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    nb = b.norm().item()
    d = (a - b).norm().item()
    return d / nb if nb > 0 else d


def main():
    if len(sys.argv) != 2:
        print("usage: golden.py FILE.safetensors", file=sys.stderr)
        return 2
    tensors, meta = safetensors_io.read(sys.argv[1])
    cfg = dit.parse_config(meta["config"])
    shapes = dit.tensor_shapes(cfg)
    f64 = torch.float64
    params = {}
    for name, shape in shapes.items():
        a = tensors.get("param." + name)
        if a is None or tuple(a.shape) != tuple(shape):
            print(f"FAIL: param.{name}: missing or shape {None if a is None else a.shape} != {shape}")
            return 1
        params[name] = torch.tensor(a, dtype=f64, requires_grad=True)
    extra = sorted(k[6:] for k in tensors if k.startswith("param.") and k[6:] not in shapes)
    if extra:
        print(f"FAIL: tensors the reference does not have: {extra}")
        return 1
    batch = {
        "x": torch.tensor(tensors["batch.x"], dtype=f64),
        "target": torch.tensor(tensors["batch.target"], dtype=f64),
        "t": torch.tensor(tensors["batch.t"], dtype=f64),
        "labels": torch.tensor(tensors["batch.labels"], dtype=torch.long),
        "loss_weight": torch.tensor(tensors["batch.loss_weight"], dtype=f64),
        "pos": torch.tensor(tensors["batch.pos"], dtype=torch.long),
        "cu_seqlens": torch.tensor(tensors["batch.cu_seqlens"], dtype=torch.long),
    }
    if cfg["text_dim"] > 0:  # captions: kept rows and their offsets
        batch["text"] = torch.tensor(tensors["batch.text"], dtype=f64)
        batch["cu_text"] = torch.tensor(tensors["batch.cu_text"], dtype=torch.long)
    pred, loss = dit.forward(cfg, params, batch)
    loss.backward()

    rows = [("loss", rel(float(meta["loss"]), loss.item()), 1),
            ("pred", rel(tensors["pred"], pred.detach()), pred.numel())]
    for name in shapes:
        g = params[name].grad
        if g is None:
            g = torch.zeros_like(params[name])
        rows.append(("grad." + name, rel(tensors["grad." + name], g), g.numel()))
        if g.norm().item() == 0:
            rows[-1] = (rows[-1][0] + " (reference gradient is zero!)", float("inf"), g.numel())
    width = max(len(r[0]) for r in rows)
    print(f"C DiT vs PyTorch float64 reference: {len(shapes)} tensors, loss C {float(meta['loss']):.9g}"
          f" ref {loss.item():.9g}, tolerance {TOL:g}")
    print(f"{'tensor':<{width}}  {'numel':>7}  rel.err")
    bad = 0
    for name, e, n in rows:
        flag = "" if e <= TOL else "   <-- FAIL"
        bad += e > TOL
        print(f"{name:<{width}}  {n:>7}  {e:.3e}{flag}")
    worst = max(rows, key=lambda r: r[1])
    print(f"max relative error {worst[1]:.3e} ({worst[0]}); {'FAIL' if bad else 'PASS'}"
          f" ({bad} of {len(rows)} above {TOL:g})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
