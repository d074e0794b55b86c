#!/usr/bin/env python3
"""The GPU check of issue 22: GPU memory through the C library, end to end, on a real GPU.

Run by run.sh (one command, under 5 minutes) on a machine with Python, torch with CUDA and
transformers, and the bundle `make gpu-bundle` builds (the mooncake binary, the C library, the
Python package); no Go and no network. It

  1. starts `mooncake master` and `mooncake worker` from the bundle's binary;
  2. process A puts from CUDA tensors (put_from, upsert_from, batch_put_from,
     batch_put_from_multi_buffers, 1 KiB to 64 MiB, odd offsets, registered buffers) and
     process B reads them into its own CUDA tensors (get_into, batch_get_into,
     batch_get_into_multi_buffers, get_into_ranges), byte-exact;
  3. drives the store as vLLM's store worker does: A registers layer-major paged KV tensors and
     stores blocks of them, one key per chunk of blocks with every layer's K and V blocks as
     parts; B loads them into other block ids of its own KV tensors;
  4. a small causal LM of `transformers` with random weights from a config: A prefills 1024
     tokens and stores the KV cache from GPU memory in 256-token chunks, B loads it into its GPU
     memory and decodes one token: the next-token logits equal A's;
  5. prints GPU -> store -> GPU GB/s beside a plain device-to-host plus host-to-device copy of
     the same bytes.

--cpu-dry-run runs steps 1-3 and 5 with host memory (ctypes buffers, no torch needed), and step
4 only where torch and transformers are installed: the test that keeps this script from rotting
(python/gpu_test.go) runs it so on a machine with no GPU. A dry run proves nothing of the GPU path.
"""

import argparse
import ctypes
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import traceback

MiB = 1 << 20
SIZES = [1 << 10, (1 << 10) + 3, 4096 + 1, MiB, 16 * MiB + 7, 64 * MiB]
OFFSETS = [0, 1, 3, 4097, 0, 5]


def log(*a):
    print(*a, flush=True)


# ---- memory backends: CUDA tensors, or host buffers for the dry run ----


class HostMem:
    """Host buffers (ctypes): the dry run's stand-in for CUDA tensors."""

    name = "host"

    def alloc(self, n):
        return ctypes.create_string_buffer(max(n, 1))

    def ptr(self, buf):
        return ctypes.addressof(buf)

    def fill(self, buf, off, n, seed):
        ctypes.memmove(self.ptr(buf) + off, random.Random(seed).randbytes(n), n)

    def equal(self, buf, off, n, seed):
        return ctypes.string_at(self.ptr(buf) + off, n) == random.Random(seed).randbytes(n)

    def segment_end(self, buf):
        return None

    def sync(self):
        pass

    def baseline(self, nbytes):
        """Seconds of a plain copy out and back of nbytes (memmove twice)."""
        a, b = self.alloc(nbytes), self.alloc(nbytes)
        t = time.perf_counter()
        ctypes.memmove(b, a, nbytes)
        ctypes.memmove(a, b, nbytes)
        return time.perf_counter() - t, "memmove out + back"


class CudaMem:
    """CUDA tensors of torch (uint8)."""

    name = "cuda"

    def __init__(self):
        import torch

        self.torch = torch
        self.dev = torch.device("cuda", 0)

    def alloc(self, n):
        return self.torch.zeros(max(n, 1), dtype=self.torch.uint8, device=self.dev)

    def ptr(self, t):
        return t.data_ptr()

    def pattern(self, n, seed):
        g = self.torch.Generator(device=self.dev).manual_seed(seed)
        return self.torch.randint(0, 256, (n,), dtype=self.torch.uint8, device=self.dev, generator=g)

    def fill(self, t, off, n, seed):
        t[off : off + n].copy_(self.pattern(n, seed))
        self.sync()

    def equal(self, t, off, n, seed):
        return bool(self.torch.equal(t[off : off + n], self.pattern(n, seed)))

    def segment_end(self, t):
        """The end of the caching allocator's segment (one cudaMalloc) holding t."""
        p = t.data_ptr()
        for s in self.torch.cuda.memory_snapshot():
            if s["address"] <= p < s["address"] + s["total_size"]:
                return s["address"] + s["total_size"]
        return None

    def sync(self):
        self.torch.cuda.synchronize()

    def baseline(self, nbytes):
        """Seconds of device -> pinned host -> device of nbytes, as torch copies them."""
        torch = self.torch
        d = self.alloc(nbytes)
        h = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        h.copy_(d), d.copy_(h)  # warm
        self.sync()
        t = time.perf_counter()
        h.copy_(d)
        d.copy_(h)
        self.sync()
        return time.perf_counter() - t, "torch D2H + H2D through pinned memory"


# ---- the store ----


def open_store(master):
    from mooncake.store import MooncakeDistributedStore

    s = MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "", 0, 256 * MiB, "tcp", "", master)
    if rc != 0:
        raise SystemExit(f"FAIL setup: {rc}")
    return s


class Checker:
    def __init__(self):
        self.failures = 0

    def check(self, ok, what):
        if not ok:
            self.failures += 1
            log(f"FAIL {what}")
        return ok

    def eq(self, got, want, what):
        return self.check(got == want, f"{what}: got {got}, want {want}")


# ---- step 2: round trips between two processes ----


def roundtrip_put(s, mem, c, keep):
    for i, (n, off) in enumerate(zip(SIZES, OFFSETS)):
        buf = mem.alloc(n + off)
        keep.append(buf)
        mem.fill(buf, off, n, 1000 + i)
        if i % 2:
            c.eq(s.register_buffer(mem.ptr(buf), n + off), 0, f"register_buffer {n}")
        c.eq(s.put_from(f"rt-{i}", mem.ptr(buf) + off, n), 0, f"put_from {n} at +{off}")
        c.eq(s.upsert_from(f"rt-{i}", mem.ptr(buf) + off, n), 0, f"upsert_from {n} at +{off}")
    bufs = [mem.alloc(300000 + 1) for _ in range(8)]
    keep.extend(bufs)
    for j, b in enumerate(bufs):
        mem.fill(b, 1, 300000 - j, 2000 + j)
    rcs = s.batch_put_from([f"bt-{j}" for j in range(8)], [mem.ptr(b) + 1 for b in bufs], [300000 - j for j in range(8)])
    c.eq(rcs, [0] * 8, "batch_put_from")
    rcs = s.batch_upsert_from([f"bt-{j}" for j in range(8)], [mem.ptr(b) + 1 for b in bufs], [300000 - j for j in range(8)])
    c.eq(rcs, [0] * 8, "batch_upsert_from")
    parts = [mem.alloc(70001) for _ in range(3)]
    keep.extend(parts)
    for j, p in enumerate(parts):
        mem.fill(p, 1, 70000, 3000 + j)
    rcs = s.batch_put_from_multi_buffers(["mb-0"], [[mem.ptr(p) + 1 for p in parts]], [[70000] * 3])
    c.eq(rcs, [0], "batch_put_from_multi_buffers")
    # Errors: a range running past its device allocation is INVALID_PARAMS, not a crash.
    end = mem.segment_end(bufs[0])
    if end is not None:
        rc = s.put_from("crossing", end - 100, 200)
        c.check(rc < 0, f"put_from across the end of a device allocation: {rc}")
        log(f"ok crossing range refused: {rc}")


def roundtrip_get(s, mem, c):
    for i, (n, off) in enumerate(zip(SIZES, OFFSETS)):
        buf = mem.alloc(n + off + 7)
        c.eq(s.get_into(f"rt-{i}", mem.ptr(buf) + off, n + 7), n, f"get_into {n} at +{off}")
        c.check(mem.equal(buf, off, n, 1000 + i), f"get_into bytes {n} at +{off}")
        host = ctypes.create_string_buffer(n)
        c.eq(s.get_into(f"rt-{i}", ctypes.addressof(host), n), n, f"get_into host {n}")
    outs = [mem.alloc(300000 + 3) for _ in range(8)]
    rcs = s.batch_get_into([f"bt-{j}" for j in range(8)], [mem.ptr(b) + 3 for b in outs], [300000] * 8)
    c.eq(rcs, [300000 - j for j in range(8)], "batch_get_into")
    for j, b in enumerate(outs):
        c.check(mem.equal(b, 3, 300000 - j, 2000 + j), f"batch_get_into bytes {j}")
    parts = [mem.alloc(70000 + 5) for _ in range(3)]
    rcs = s.batch_get_into_multi_buffers(["mb-0"], [[mem.ptr(p) + 5 for p in parts]], [[70000] * 3])
    c.eq(rcs, [210000], "batch_get_into_multi_buffers")
    for j, p in enumerate(parts):
        c.check(mem.equal(p, 5, 70000, 3000 + j), f"multi-buffer part {j}")
    reg = mem.alloc(4 * MiB)
    c.eq(s.register_buffer(mem.ptr(reg), 4 * MiB), 0, "register_buffer for ranges")
    got = s.get_into_ranges([mem.ptr(reg)], [["bt-0", "bt-1"]], [[[0], [MiB + 1]]], [[[0], [0]]], [[[300000], [299999]]])
    c.eq(got, [[[300000], [299999]]], "get_into_ranges")
    c.check(mem.equal(reg, 0, 300000, 2000), "range 0 bytes")
    c.check(mem.equal(reg, MiB + 1, 299999, 2001), "range 1 bytes")
    c.eq(s.unregister_buffer(mem.ptr(reg)), 0, "unregister_buffer")


# ---- step 3: vLLM's store worker ----

LAYERS, BLOCKS, BLOCK_TOKENS, KV_HEADS, HEAD_DIM, ELEM = 8, 128, 16, 4, 64, 2
BLOCK_BYTES = BLOCK_TOKENS * KV_HEADS * HEAD_DIM * ELEM  # one block of K (or V) of one layer
CHUNK_BLOCKS = 16  # 256 tokens per key


def kv_layout(mem, keep):
    """One tensor per layer, (2, BLOCKS, BLOCK_TOKENS, KV_HEADS, HEAD_DIM) fp16 as vLLM's flash
    attention backend lays out its paged cache: returns the base addresses."""
    layers = [mem.alloc(2 * BLOCKS * BLOCK_BYTES) for _ in range(LAYERS)]
    keep.extend(layers)
    return layers


def block_parts(mem, layers, block_ids):
    """The parts of one chunk key, as the connector gathers them: for each layer, the K then
    the V bytes of each block."""
    ptrs = []
    for t in layers:
        base = mem.ptr(t)
        for kv in range(2):
            for b in block_ids:
                ptrs.append(base + (kv * BLOCKS + b) * BLOCK_BYTES)
    return ptrs, [BLOCK_BYTES] * len(ptrs)


def chunk_keys(mem, layers, blocks):
    """A request's 4 chunk keys over its blocks, with each key's parts."""
    keys, all_ptrs, all_sizes = [], [], []
    for ch in range(4):
        ptrs, sizes = block_parts(mem, layers, blocks[ch * CHUNK_BLOCKS : (ch + 1) * CHUNK_BLOCKS])
        keys.append(f"vllm-req0-chunk{ch}")
        all_ptrs.append(ptrs)
        all_sizes.append(sizes)
    return keys, all_ptrs, all_sizes


def vllm_put(s, mem, c, keep):
    layers = kv_layout(mem, keep)
    for li, t in enumerate(layers):
        mem.fill(t, 0, 2 * BLOCKS * BLOCK_BYTES, 5000 + li)
        c.eq(s.register_buffer(mem.ptr(t), 2 * BLOCKS * BLOCK_BYTES), 0, f"register KV layer {li}")
    blocks = list(range(3, 3 + 4 * CHUNK_BLOCKS))  # a request's blocks: 4 chunks of 256 tokens
    keys, all_ptrs, all_sizes = chunk_keys(mem, layers, blocks)
    t = time.perf_counter()
    c.eq(s.batch_put_from_multi_buffers(keys, all_ptrs, all_sizes), [0] * 4, "store KV chunks")
    dt = time.perf_counter() - t
    mb = 4 * len(all_ptrs[0]) * BLOCK_BYTES / 1e6
    log(f"ok vLLM-style store: 4 chunks x {len(all_ptrs[0])} blocks of {BLOCK_BYTES} B in {dt:.4f}s ({mb / 1e3 / dt:.2f} GB/s)")
    return blocks


def vllm_get(s, mem, c, keep, src_blocks):
    layers = kv_layout(mem, keep)
    for li, t in enumerate(layers):
        c.eq(s.register_buffer(mem.ptr(t), 2 * BLOCKS * BLOCK_BYTES), 0, f"register KV layer {li}")
    dst_blocks = list(reversed(range(BLOCKS)))[: len(src_blocks)]  # other block ids
    keys, all_ptrs, all_sizes = chunk_keys(mem, layers, dst_blocks)
    chunk = 2 * LAYERS * CHUNK_BLOCKS * BLOCK_BYTES
    t = time.perf_counter()
    c.eq(s.batch_get_into_multi_buffers(keys, all_ptrs, all_sizes), [chunk] * 4, "load KV chunks")
    dt = time.perf_counter() - t
    log(f"ok vLLM-style load: 4 chunks in {dt:.4f}s ({4 * chunk / 1e9 / dt:.2f} GB/s)")
    # Each loaded block equals the source block of the same position in the request.
    ref = mem.alloc(2 * BLOCKS * BLOCK_BYTES)
    for li, t in enumerate(layers):
        mem.fill(ref, 0, 2 * BLOCKS * BLOCK_BYTES, 5000 + li)
        for kv in range(2):
            for sb, db in zip(src_blocks, dst_blocks):
                a = (kv * BLOCKS + sb) * BLOCK_BYTES
                b = (kv * BLOCKS + db) * BLOCK_BYTES
                if not c.check(same(mem, ref, a, t, b, BLOCK_BYTES), f"layer {li} kv {kv} block {sb} -> {db}"):
                    return
    log("ok vLLM-style load: every block byte-exact")


# ---- step 3c: a layer-wise ranged session (vLLM's layer-wise connector) ----

SESSION_KEYS = ["sess-chunk0", "sess-chunk1"]  # two keys of CHUNK_BLOCKS blocks, every layer


def layer_ranges(mem, t, li, blocks):
    """Layer li's ranges of the session keys: each key's object is layer-major, and within a
    layer its K blocks then its V blocks; the ranges point at t's blocks."""
    ptrs, sizes, offs = [], [], []
    for k in range(len(SESSION_KEYS)):
        p, z, o = [], [], []
        for kv in range(2):
            for j, b in enumerate(blocks[k * CHUNK_BLOCKS : (k + 1) * CHUNK_BLOCKS]):
                p.append(mem.ptr(t) + (kv * BLOCKS + b) * BLOCK_BYTES)
                z.append(BLOCK_BYTES)
                o.append(((li * 2 + kv) * CHUNK_BLOCKS + j) * BLOCK_BYTES)
        ptrs.append(p), sizes.append(z), offs.append(o)
    return ptrs, sizes, offs


def session_put(s, mem, c, keep):
    layers = kv_layout(mem, keep)
    for li, t in enumerate(layers):
        mem.fill(t, 0, 2 * BLOCKS * BLOCK_BYTES, 6000 + li)
    blocks = list(range(7, 7 + 2 * CHUNK_BLOCKS))
    per_key = 2 * LAYERS * CHUNK_BLOCKS * BLOCK_BYTES
    c.eq(s.batch_put_session_start(SESSION_KEYS, [per_key] * 2), [0, 0], "put session start")
    for li, t in enumerate(layers):  # one call per layer, as the engine finishes each
        got = s.batch_put_from_multi_buffer_ranges(SESSION_KEYS, *layer_ranges(mem, t, li, blocks))
        c.eq(got, [2 * CHUNK_BLOCKS * BLOCK_BYTES] * 2, f"put session layer {li}")
    c.eq(s.batch_put_session_end(SESSION_KEYS), [0, 0], "put session end")
    log(f"ok layer-wise put session: {LAYERS} layers of 2 keys from {mem.name} ranges")
    return blocks


def session_get(s, mem, c, keep, src_blocks):
    layers = kv_layout(mem, keep)
    dst_blocks = list(reversed(range(BLOCKS)))[: len(src_blocks)]
    c.eq(s.batch_get_session_start(SESSION_KEYS), [0, 0], "get session start")
    for li, t in enumerate(layers):
        got = s.batch_get_into_multi_buffer_ranges(SESSION_KEYS, *layer_ranges(mem, t, li, dst_blocks))
        c.eq(got, [2 * CHUNK_BLOCKS * BLOCK_BYTES] * 2, f"get session layer {li}")
    s.batch_get_session_end(SESSION_KEYS)
    ref = mem.alloc(2 * BLOCKS * BLOCK_BYTES)
    for li, t in enumerate(layers):
        mem.fill(ref, 0, 2 * BLOCKS * BLOCK_BYTES, 6000 + li)
        for kv in range(2):
            for sb, db in zip(src_blocks, dst_blocks):
                a, b = (kv * BLOCKS + sb) * BLOCK_BYTES, (kv * BLOCKS + db) * BLOCK_BYTES
                if not c.check(same(mem, ref, a, t, b, BLOCK_BYTES), f"session layer {li} kv {kv} block {sb} -> {db}"):
                    return
    log(f"ok layer-wise get session into {mem.name} ranges: every block byte-exact")


def same(mem, x, xo, y, yo, n):
    if isinstance(mem, CudaMem):
        return bool(mem.torch.equal(x[xo : xo + n], y[yo : yo + n]))
    return ctypes.string_at(mem.ptr(x) + xo, n) == ctypes.string_at(mem.ptr(y) + yo, n)


# ---- step 3b: the tensor helpers with CUDA tensors ----


def tensors(torch, dev):
    """The tensors of step 3b, made the same way in both processes (on dev)."""
    g = torch.Generator().manual_seed(11)
    a = torch.randn(3, 5, 7, generator=g).to(torch.bfloat16)
    b = torch.randint(0, 1000, (4, 9), generator=g, dtype=torch.int64)
    nc = torch.randn(6, 8, generator=g)
    return a.to(dev), b.to(dev), nc.to(dev).t()  # nc: not contiguous


def tensors_put(s, c, dev):
    import torch

    a, b, nc = tensors(torch, dev)
    c.eq(s.put_tensor("tn-a", a), 0, "put_tensor")
    c.eq(s.batch_put_tensor(["tn-b", "tn-nc"], [b, nc]), [0, 0], "batch_put_tensor")
    c.eq(s.upsert_tensor("tn-a", a * 2), 0, "upsert_tensor")
    c.eq(s.put_tensor_with_tp("tn-tp", b, tp_size=3, split_dim=1), 0, "put_tensor_with_tp")
    log(f"ok tensor helpers: put from {dev} tensors")


def tensors_get(s, c, dev):
    import torch

    a, b, nc = tensors(torch, dev)
    got = s.get_tensor("tn-a")
    c.check(got is not None and torch.equal(got, (a * 2).cpu()), "get_tensor after upsert_tensor")
    buf = torch.zeros(1 << 16, dtype=torch.uint8, device=dev)
    t = s.get_tensor_into("tn-b", buf.data_ptr(), buf.numel())
    c.check(t is not None and t.device == buf.device and torch.equal(t, b), f"get_tensor_into a {dev} buffer")
    bufs = [torch.zeros(1 << 12, dtype=torch.uint8, device=dev) for _ in range(2)]
    ts = s.batch_get_tensor_into(["tn-a", "tn-nc"], [x.data_ptr() for x in bufs], [x.numel() for x in bufs])
    c.check(len(ts) == 2 and ts[0] is not None and torch.equal(ts[0], a * 2), f"batch_get_tensor_into [0]: {ts[0]} {s.last_error()}")
    c.check(len(ts) == 2 and ts[1] is not None and torch.equal(ts[1], nc), "batch_get_tensor_into [1]")
    # Mooncake's get_tensor_into_cuda: the data (no header) straight into a destination tensor.
    dst = torch.full_like(b, -1)
    c.eq(s.get_tensor_into_cuda("tn-b", dst), b.numel() * 8, f"get_tensor_into_cuda a {dev} tensor")
    c.check(torch.equal(dst, b), "get_tensor_into_cuda bytes")
    dsts = [torch.zeros_like(a), torch.zeros(nc.shape, device=dev)]
    c.eq(s.batch_get_tensor_into_cuda(["tn-a", "tn-nc"], dsts), [a.numel() * 2, nc.numel() * 4], "batch_get_tensor_into_cuda")
    c.check(torch.equal(dsts[0], a * 2) and torch.equal(dsts[1], nc), "batch_get_tensor_into_cuda bytes")
    # What get_tensor_into left in the buffer is the stored layout: put it back from there.
    c.eq(s.put_tensor_from("tn-copy", buf.data_ptr(), 40 + b.numel() * 8), 0, f"put_tensor_from a {dev} buffer")
    got = s.get_tensor("tn-copy")
    c.check(got is not None and torch.equal(got, b.cpu()), "get_tensor of the put_tensor_from copy")
    for r, want in enumerate(b.chunk(3, 1)):
        got = s.get_tensor_with_tp("tn-tp", tp_rank=r, tp_size=3)
        c.check(got is not None and torch.equal(got, want.cpu()), f"get_tensor_with_tp shard {r}")
    log(f"ok tensor helpers: read into {dev} buffers, byte-exact")


# ---- step 4: a causal LM's KV cache through the store ----

PROMPT, CHUNK = 1024, 256


def lm_model():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    m = LlamaForCausalLM(cfg).eval()
    return m.to("cuda" if torch.cuda.is_available() else "cpu"), cfg


def layer_kv(cache, li):
    """Layer li's (key, value) of a transformers cache, across transformers versions."""
    if hasattr(cache, "layers"):
        return cache.layers[li].keys, cache.layers[li].values
    if hasattr(cache, "key_cache"):
        return cache.key_cache[li], cache.value_cache[li]
    return cache[li][0], cache[li][1]


def make_cache(kvs):
    from transformers import DynamicCache

    cache = DynamicCache()
    for li, (k, v) in enumerate(kvs):
        cache.update(k, v, li)
    return cache


def kv_buffers(kvs):
    """Per layer one contiguous (2, tokens, heads, dim) buffer, the paged layout's order."""
    import torch

    return [torch.stack([k[0].transpose(0, 1), v[0].transpose(0, 1)]).contiguous() for k, v in kvs]


def from_buffers(bufs):
    return [(b[0].transpose(0, 1).unsqueeze(0), b[1].transpose(0, 1).unsqueeze(0)) for b in bufs]


def chunk_parts(bufs):
    """Key c holds, for each layer, the K then the V rows of tokens [c*CHUNK, (c+1)*CHUNK)."""
    keys, ptrs, sizes = [], [], []
    for ch in range(PROMPT // CHUNK):
        p, z = [], []
        for b in bufs:
            row = b[0, 0].numel() * b.element_size()
            for kv in range(2):
                p.append(b[kv].data_ptr() + ch * CHUNK * row)
                z.append(CHUNK * row)
        keys.append(f"lm-chunk{ch}")
        ptrs.append(p)
        sizes.append(z)
    return keys, ptrs, sizes


def decode(model, cache, token):
    import torch

    ids = torch.tensor([[token]], device=model.device)
    pos = torch.tensor([[PROMPT]], device=model.device)
    with torch.no_grad():
        return model(input_ids=ids, position_ids=pos, past_key_values=cache, use_cache=True).logits[0, -1].float()


def lm_a(s, c, work):
    import torch

    model, cfg = lm_model()
    g = torch.Generator().manual_seed(7)
    prompt = torch.randint(0, cfg.vocab_size, (1, PROMPT), generator=g).to(model.device)
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
    token = int(out.logits[0, -1].argmax())
    bufs = kv_buffers([layer_kv(out.past_key_values, li) for li in range(cfg.num_hidden_layers)])
    keys, ptrs, sizes = chunk_parts(bufs)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
    c.eq(s.batch_put_from_multi_buffers(keys, ptrs, sizes), [0] * len(keys), "store the LM's KV chunks")
    # A decodes from a cache built the way B builds it: the same layout, the same kernels.
    logits = decode(model, make_cache(from_buffers(bufs)), token)
    torch.save({"token": token, "logits": logits.cpu()}, os.path.join(work, "lm_a.pt"))
    log(f"ok LM A: prefill {PROMPT} tokens, KV stored in {len(keys)} chunks from {model.device}")


def lm_b(s, c, work):
    import torch

    model, cfg = lm_model()
    a = torch.load(os.path.join(work, "lm_a.pt"))
    hd = cfg.hidden_size // cfg.num_attention_heads
    bufs = [torch.zeros(2, PROMPT, cfg.num_key_value_heads, hd, device=model.device) for _ in range(cfg.num_hidden_layers)]
    keys, ptrs, sizes = chunk_parts(bufs)
    got = s.batch_get_into_multi_buffers(keys, ptrs, sizes)
    c.eq(got, [sum(z) for z in sizes], "load the LM's KV chunks")
    logits = decode(model, make_cache(from_buffers(bufs)), a["token"]).cpu()
    diff = float((logits - a["logits"]).abs().max())
    c.check(torch.equal(logits, a["logits"]), f"B's next-token logits differ from A's (max |diff| {diff})")
    log(f"ok LM B: KV loaded into {model.device}, next-token logits equal A's (max |diff| {diff})")


# ---- step 5: bandwidth ----


def bench(s, mem, c, total):
    n = 8
    size = total // n
    bufs = [mem.alloc(size) for _ in range(n)]
    for j, b in enumerate(bufs):
        mem.fill(b, 0, size, 9000 + j)
    keys = [f"bw-{j}" for j in range(n)]
    ptrs = [mem.ptr(b) for b in bufs]
    best = None
    for r in range(3):
        s.remove_all()
        mem.sync()
        t0 = time.perf_counter()
        rcs = s.batch_put_from(keys, ptrs, [size] * n)
        t1 = time.perf_counter()
        got = s.batch_get_into(keys, ptrs, [size] * n)
        mem.sync()
        t2 = time.perf_counter()
        c.eq(rcs, [0] * n, "bench put")
        c.eq(got, [size] * n, "bench get")
        if best is None or t2 - t0 < best[0] + best[1]:
            best = (t1 - t0, t2 - t1)
    for j, b in enumerate(bufs):
        c.check(mem.equal(b, 0, size, 9000 + j), f"bench bytes {j}")
    base = min(mem.baseline(total)[0] for _ in range(3))
    how = mem.baseline(MiB)[1]
    gb = total / 1e9
    log(
        f"bandwidth {mem.name}: {n} x {size >> 20} MiB: put {gb / best[0]:.2f} GB/s, get {gb / best[1]:.2f} GB/s, "
        f"{mem.name} -> store -> {mem.name} {gb / (best[0] + best[1]):.2f} GB/s; "
        f"plain {how} {gb / base:.2f} GB/s (same bytes)"
    )


# ---- orchestration ----


def role(args):
    mem = HostMem() if args.cpu_dry_run else CudaMem()
    s = open_store(args.master)
    c = Checker()
    keep = []
    if args.role == "put":
        roundtrip_put(s, mem, c, keep)
        blocks = vllm_put(s, mem, c, keep)
        sblocks = session_put(s, mem, c, keep)
        with open(os.path.join(args.work, "blocks.json"), "w") as f:
            json.dump({"vllm": blocks, "session": sblocks}, f)
        if have_torch(args):
            guarded(c, "tensors A", tensors_put, s, c, "cuda" if isinstance(mem, CudaMem) else "cpu")
        if have_lm(args):
            guarded(c, "LM A", lm_a, s, c, args.work)
    elif args.role == "get":
        roundtrip_get(s, mem, c)
        with open(os.path.join(args.work, "blocks.json")) as f:
            blocks = json.load(f)
        vllm_get(s, mem, c, keep, blocks["vllm"])
        session_get(s, mem, c, keep, blocks["session"])
        if have_torch(args):
            guarded(c, "tensors B", tensors_get, s, c, "cuda" if isinstance(mem, CudaMem) else "cpu")
        if have_lm(args):
            guarded(c, "LM B", lm_b, s, c, args.work)
    else:
        bench(s, mem, c, (64 if args.cpu_dry_run else 512) * MiB)
        if not args.cpu_dry_run:
            bench(s, HostMem(), c, 512 * MiB)  # the same through host memory: the store's own speed
    s.close()
    if c.failures:
        raise SystemExit(f"FAIL {args.role}: {c.failures} checks failed")
    log(f"ok {args.role}")


def guarded(c, what, fn, *a):
    """Runs step 4 so that an error of transformers' API (it changes between versions) counts as
    a failed check with its traceback, and the steps after it still run."""
    try:
        fn(*a)
    except Exception:
        traceback.print_exc()
        c.check(False, f"{what} raised")


def have_torch(args):
    try:
        import torch  # noqa: F401
    except ImportError:
        if args.cpu_dry_run:
            log("skip tensor helpers: no torch in this dry run")
            return False
        raise
    return True


def have_lm(args):
    if not args.cpu_dry_run:
        return True
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        log("skip LM: no torch or transformers in this dry run")
        return False
    return True


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def start(cmd, name, logdir):
    """Starts a server and waits for its ready line on standard output."""
    err = open(os.path.join(logdir, name + ".log"), "w")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    deadline = time.time() + 60
    for line in p.stdout:
        if "ready" in line:
            return p
        if time.time() > deadline:
            break
    p.kill()
    raise SystemExit(f"FAIL {name} did not start: see {err.name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True, help="the folder `make gpu-bundle` builds")
    ap.add_argument("--cpu-dry-run", action="store_true", help="host memory, no GPU (proves nothing of the GPU path)")
    ap.add_argument("--role", choices=["put", "get", "bench"], help=argparse.SUPPRESS)
    ap.add_argument("--master", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    bundle = os.path.abspath(args.bundle)
    sys.path.insert(0, os.path.join(bundle, "python"))
    os.environ["MOONCAKE_STORE_LIB"] = os.path.join(bundle, "libmooncake_store.so")
    if args.role:
        return role(args)

    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="mooncake-gpu-") as work:
        bin = os.path.join(bundle, "mooncake")
        rpc, raft, data = free_port(), free_port(), free_port()
        master = f"127.0.0.1:{rpc}"
        procs = [
            start([bin, "master", "--id", "m1", "--data_dir", os.path.join(work, "master"), "--rpc_address", master,
                   "--raft_address", f"127.0.0.1:{raft}", "--metrics_port", "0"], "master", work),
        ]
        try:
            procs.append(start([bin, "worker", "--master_server_address", master, "--worker_address", f"127.0.0.1:{data}",
                                "--global_segment_size", "1GiB" if args.cpu_dry_run else "4GiB", "--metrics_port", "0"],
                               "worker", work))
            log(f"ok master {master} and worker 127.0.0.1:{data} started")
            base = [sys.executable, os.path.abspath(__file__), "--bundle", bundle, "--master", master, "--work", work]
            if args.cpu_dry_run:
                base.append("--cpu-dry-run")
            for r in ["put", "get", "bench"]:
                rc = subprocess.run(base + ["--role", r]).returncode
                if rc != 0:
                    for n in ["master", "worker"]:
                        with open(os.path.join(work, n + ".log")) as f:
                            log(f"--- {n} log (tail) ---\n" + f.read()[-3000:])
                    raise SystemExit(f"FAIL process {r} exited {rc}")
        finally:
            for p in reversed(procs):
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    log(f"ok all ({'cpu dry run: the GPU path is NOT checked' if args.cpu_dry_run else 'GPU'}) in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
