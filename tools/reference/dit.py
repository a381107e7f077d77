"""tools/reference/dit.py — the tessera DiT in PyTorch, written independently of the C code
from the formulas of docs/model.md and kernels/kernels.h, for the golden test (golden.py)
and the CPU benchmark. Parameters are a dict {name: tensor} with tessera's names and
(in, out) weight layout; any float dtype (golden.py uses float64).

Packed batch: x (L, P), t (C), labels (C) or None, pos (L, 3) int, cu_seqlens (C + 1),
target (L, P), loss_weight (C); with captions (text_dim > 0) also text (Lt, text_dim) and
cu_text (C + 1): clip c's caption is rows cu_text[c]..cu_text[c+1] of text. Attention loops
over clips (plain softmax); the cross-attention of a clip runs over its caption's keys and
the learned null token's, in one softmax.
"""
import configparser
import math

import torch


def parse_config(ini_text):
    """[model] section of a tessera config (config_to_ini text) as a dict of numbers."""
    cp = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    cp.read_string(ini_text)
    m = cp["model"]
    ints = ["hidden", "depth", "heads", "mlp_ratio", "pt", "ph", "pw", "channels", "freq_dim",
            "num_classes", "recompute"]
    cfg = {k: int(m[k]) for k in ints}
    for k in ["rope_theta", "ln_eps", "rms_eps"]:
        cfg[k] = float(m[k])
    for k in ["text_dim", "text_len"]:  # configs of models before captions lack them
        cfg[k] = int(m.get(k, "0"))
    return cfg


def tensor_shapes(cfg):
    """{name: shape} of every parameter, in tessera's order."""
    D, F = cfg["hidden"], cfg["mlp_ratio"] * cfg["hidden"]
    Dh = D // cfg["heads"]
    P = cfg["pt"] * cfg["ph"] * cfg["pw"] * cfg["channels"]
    s = {}

    def lin(name, i, o):
        s[name + ".weight"] = (i, o)
        s[name + ".bias"] = (o,)

    lin("x_embed", P, D)
    lin("t_embed.fc1", cfg["freq_dim"], D)
    lin("t_embed.fc2", D, D)
    if cfg["num_classes"] > 0:
        s["y_embed.weight"] = (cfg["num_classes"] + 1, D)
    text = cfg.get("text_dim", 0) > 0
    if text:
        lin("text_embed.fc1", cfg["text_dim"], D)
        lin("text_embed.fc2", D, D)
        s["text_null.weight"] = (D,)
    for i in range(cfg["depth"]):
        b = f"blocks.{i}."
        lin(b + "adaln", D, 6 * D)
        for n in "qkv":
            lin(b + n, D, D)
        s[b + "q_norm.weight"] = (Dh,)
        s[b + "k_norm.weight"] = (Dh,)
        lin(b + "proj", D, D)
        lin(b + "fc1", D, F)
        lin(b + "fc2", F, D)
        if text:
            for n in "qkv":
                lin(b + "cross." + n, D, D)
            s[b + "cross.q_norm.weight"] = (Dh,)
            s[b + "cross.k_norm.weight"] = (Dh,)
            lin(b + "cross.proj", D, D)
    lin("final.adaln", D, 2 * D)
    lin("final.linear", D, P)
    return s


def linear(p, name, x):
    return x @ p[name + ".weight"] + p[name + ".bias"]


def layernorm(x, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)


def rmsnorm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x * torch.sigmoid(x)


def timestep_embedding(t, dim, max_period=10000.0):
    half = dim // 2
    f = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float64) / half)
    a = t.to(torch.float64)[:, None] * f[None]
    e = torch.cat([torch.cos(a), torch.sin(a)], dim=1)
    if dim % 2:
        e = torch.cat([e, torch.zeros_like(e[:, :1])], dim=1)
    return e


def rope_angles(pos, Dh, theta):
    """(L, Dh/2) rotation angle of each adjacent pair (2p, 2p+1): the head dimension is split
    d_t = Dh - 2 d_hw (time), d_hw = 2 (Dh // 6) (rows), d_hw (columns); inside a group of
    width g the j-th pair has frequency theta^(-2j/g)."""
    d_hw = 2 * (Dh // 6)
    widths = [Dh - 2 * d_hw, d_hw, d_hw]
    cols = []
    for axis, g in enumerate(widths):
        j = torch.arange(g // 2, dtype=torch.float64)
        freq = theta ** (-2 * j / g)
        cols.append(pos[:, axis].to(torch.float64)[:, None] * freq[None])
    return torch.cat(cols, dim=1)


def rope(x, ang):
    """x (L, H, Dh), ang (L, Dh/2): (a, b) -> (a cos - b sin, a sin + b cos)."""
    c = torch.cos(ang)[:, None, :].to(x.dtype)
    s = torch.sin(ang)[:, None, :].to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)


def attention(q, k, v, cu, scale):
    """q, k, v (L, H, Dh); each clip attends to itself only."""
    outs = []
    for c in range(len(cu) - 1):
        s, e = int(cu[c]), int(cu[c + 1])
        qc, kc, vc = q[s:e].transpose(0, 1), k[s:e].transpose(0, 1), v[s:e].transpose(0, 1)
        w = torch.softmax(qc @ kc.transpose(1, 2) * scale, dim=-1)
        outs.append((w @ vc).transpose(0, 1))
    return torch.cat(outs, dim=0)


def cross_attention(q, k, v, k0, v0, cu, cu_text, scale):
    """q (L, H, Dh); k, v (Lt, H, Dh): the captions; k0, v0 (H, Dh): the null token. Clip c's
    queries attend to its caption rows and the null token, in one softmax."""
    outs = []
    for c in range(len(cu) - 1):
        s, e = int(cu[c]), int(cu[c + 1])
        ts, te = int(cu_text[c]), int(cu_text[c + 1])
        kc = torch.cat([k[ts:te], k0[None]], dim=0).transpose(0, 1)  # (H, n + 1, Dh)
        vc = torch.cat([v[ts:te], v0[None]], dim=0).transpose(0, 1)
        qc = q[s:e].transpose(0, 1)
        w = torch.softmax(qc @ kc.transpose(1, 2) * scale, dim=-1)
        outs.append((w @ vc).transpose(0, 1))
    return torch.cat(outs, dim=0)


def forward(cfg, p, batch):
    """Returns (pred (L, P), loss scalar) for the packed batch."""
    D, H = cfg["hidden"], cfg["heads"]
    Dh = D // H
    cu = batch["cu_seqlens"]
    lengths = (cu[1:] - cu[:-1]).long()
    clip_of = torch.repeat_interleave(torch.arange(len(lengths)), lengths)  # (L) clip of each token
    x = batch["x"]
    dtype = x.dtype
    L = x.shape[0]

    temb = timestep_embedding(batch["t"].to(torch.float64) * 1000.0, cfg["freq_dim"]).to(dtype)
    c = linear(p, "t_embed.fc2", silu(linear(p, "t_embed.fc1", temb)))
    if cfg["num_classes"] > 0:
        labels = batch.get("labels")
        if labels is None:
            labels = torch.full((len(lengths),), cfg["num_classes"], dtype=torch.long)
        c = c + p["y_embed.weight"][labels.long()]
    cs = silu(c)

    def modulate(y, shift, scale):
        return y * (1 + scale[clip_of]) + shift[clip_of]

    ang = rope_angles(batch["pos"], Dh, cfg["rope_theta"])
    text = cfg.get("text_dim", 0) > 0
    if text:  # the caption context and the null token, shared by every block
        ctx = linear(p, "text_embed.fc2", gelu_tanh(linear(p, "text_embed.fc1", batch["text"])))
        null = p["text_null.weight"][None]  # (1, D)
        Lt = ctx.shape[0]
    h = linear(p, "x_embed", x)
    for i in range(cfg["depth"]):
        b = f"blocks.{i}."
        sh1, sc1, g1, sh2, sc2, g2 = linear(p, b + "adaln", cs).chunk(6, dim=1)
        a = modulate(layernorm(h, cfg["ln_eps"]), sh1, sc1)
        q = linear(p, b + "q", a).view(L, H, Dh)
        k = linear(p, b + "k", a).view(L, H, Dh)
        v = linear(p, b + "v", a).view(L, H, Dh)
        q = rope(rmsnorm(q, p[b + "q_norm.weight"], cfg["rms_eps"]), ang)
        k = rope(rmsnorm(k, p[b + "k_norm.weight"], cfg["rms_eps"]), ang)
        att = attention(q, k, v, cu, 1.0 / math.sqrt(Dh)).reshape(L, D)
        h = h + g1[clip_of] * linear(p, b + "proj", att)
        if text:  # cross-attention: own LayerNorm and QK-norm, no RoPE, no gate
            n = layernorm(h, cfg["ln_eps"])
            xq = rmsnorm(linear(p, b + "cross.q", n).view(L, H, Dh), p[b + "cross.q_norm.weight"],
                         cfg["rms_eps"])
            xk = rmsnorm(linear(p, b + "cross.k", ctx).view(Lt, H, Dh),
                         p[b + "cross.k_norm.weight"], cfg["rms_eps"])
            xv = linear(p, b + "cross.v", ctx).view(Lt, H, Dh)
            k0 = rmsnorm(linear(p, b + "cross.k", null).view(H, Dh), p[b + "cross.k_norm.weight"],
                         cfg["rms_eps"])
            v0 = linear(p, b + "cross.v", null).view(H, Dh)
            xatt = cross_attention(xq, xk, xv, k0, v0, cu, batch["cu_text"], 1.0 / math.sqrt(Dh))
            h = h + linear(p, b + "cross.proj", xatt.reshape(L, D))
        m = modulate(layernorm(h, cfg["ln_eps"]), sh2, sc2)
        h = h + g2[clip_of] * linear(p, b + "fc2", gelu_tanh(linear(p, b + "fc1", m)))
    shift, scale = linear(p, "final.adaln", cs).chunk(2, dim=1)
    pred = linear(p, "final.linear", modulate(layernorm(h, cfg["ln_eps"]), shift, scale))
    loss = None
    if batch.get("target") is not None:
        se = ((pred - batch["target"]) ** 2).sum(dim=1)  # (L)
        per_clip = torch.zeros(len(lengths), dtype=se.dtype).index_add(0, clip_of, se)
        loss = (batch["loss_weight"].to(se.dtype) * per_clip).sum()
    return pred, loss
