"""The ONNX graphs of the text encoder: the fused float export of a local sentence-transformers model, and the
``onnx-int8`` rewrite of it with per-token activation scales. Selected by the encoder's ``backend`` (``onnx``,
``onnx-int8``; ``torch`` needs neither); :class:`paperlake.vectors.encoders.OnnxTextModel` runs the graph.

Graphs are built once per machine under ``config.model_cache_dir() / "onnx"`` and named by model id, a digest of the
weights and the scheme, so a model, weights or scheme change never reuses another's graph.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from paperlake.vectors.config import EncoderUnavailable

ONNX_EXPORT_VERSION = 1
# How ``onnx-int8`` quantises (_quantise_int8): part of its graph's file name and of its encoders' cache keys, so a
# new scheme never reuses another's graph or cached vectors. 1: dynamic per-tensor activations, FFN outputs float.
# 3: per-token activations for every projection, the attention as MultiHeadAttention (2, QKV in QAttention, was a
# trial that no release wrote). 4: as 3 with 7-bit weights (:data:`WEIGHT_STEPS`), the same on every CPU.
INT8_SCHEME = 4


def text_cache_key(model_id: str, backend: str, max_seq_length: int | None) -> str:
    """:attr:`TextEncoder.cache_key` from the configuration alone (no model loaded)."""
    backend = f"{backend}-{INT8_SCHEME}" if backend == "onnx-int8" else backend
    return f"{model_id}|{backend}|max_seq_length={max_seq_length or 'model'}"


def onnx_model_path(model_dir: str | Path, model_id: str, backend: str, onnx_dir: str | Path) -> Path:
    """The exported (and for ``onnx-int8`` quantised) graph of a local model, built on first use.

    Keyed by model id, a digest of the weight files and the backend, so a different model, weights or backend never
    reuses another's graph. Written to a temporary name and renamed, so concurrent processes can race safely.
    """
    model_dir = Path(model_dir)
    version = f"v{ONNX_EXPORT_VERSION}" + (f"-int8-{INT8_SCHEME}" if backend == "onnx-int8" else "")
    digest = hashlib.sha256(version.encode())
    for weights in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("pytorch_model*.bin")):
        digest.update(weights.name.encode())
        with open(weights, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)
    target = Path(onnx_dir) / f"{slug}-{digest.hexdigest()[:16]}-{backend}.onnx"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.stem}-", dir=target.parent))
    try:
        if backend == "onnx-int8":
            exported = _quantise_int8(onnx_model_path(model_dir, model_id, "onnx", onnx_dir), scratch / "int8.onnx")
        else:
            exported = _export_fused_onnx(model_dir, scratch)
        os.replace(exported, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _export_fused_onnx(model_dir: Path, scratch: Path) -> Path:
    """torch.onnx export of the transformer (last hidden state), then ONNX Runtime's BERT fusions."""
    import torch  # deferred: torch
    from onnxruntime.transformers.optimizer import optimize_model  # deferred: onnxruntime
    from transformers import AutoConfig, AutoModel  # deferred: transformers

    class LastHiddenState(torch.nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.body(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    config = AutoConfig.from_pretrained(model_dir)
    body = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    example = torch.ones((2, 8), dtype=torch.int64)
    raw = scratch / "raw.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    # the tracer's warnings (Python values in control flow) are about the model's code, which the export freezes
    # at these shapes on purpose: nothing a user can act on, so nothing to print
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
        torch.onnx.export(
            LastHiddenState(body),
            (example, example, torch.zeros_like(example)),
            str(raw),
            input_names=names,
            output_names=["last_hidden_state"],
            opset_version=17,
            dynamo=False,
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]},
        )
    fused = optimize_model(
        str(raw), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
    )
    path = scratch / "fused.onnx"
    fused.save_model_to_file(str(path))
    return path


def _quantise_int8(source: Path, target: Path) -> Path:
    """Int8 MiniLM with per-token activation scales (scheme ``INT8_SCHEME``).

    ONNX Runtime's dynamic quantisation gives each MatMul input one scale for the whole batch, so one token's
    outlier (after GELU, most of all) coarsens every other token's steps, and a text's vector depends on the texts
    batched with it: with every MatMul in int8 the cosine to float fell to 0.961 on sample cells, and keeping the FFN
    output projections float (scheme 1) still left 0.985. Here every projection with a constant weight (QKV,
    attention output, FFN in and out) quantises its input per token, symmetric, as uint8 around 128 (the VNNI u8·s8
    path), against per-output-channel int8 weights; the fused attention becomes its QKV projection and ONNX
    Runtime's MultiHeadAttention (the attention itself stays float). No scale depends on another token or text, so
    a text's vector is the same in any batch. Its speed and its cosine to float, measured in one run against
    float: benchmarks/README.md."""
    import onnx  # deferred: onnx
    from onnx import helper, numpy_helper  # deferred: onnx

    model = onnx.load(str(source))
    graph = model.graph
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset >= 18:  # ReduceMax takes its axes as an attribute up to opset 17 (the export's)
        raise EncoderUnavailable(f"{source}: int8 rewriting expects opset <= 17, the graph has {opset}")
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    weights = {i.name: i for i in graph.initializer}
    for node in [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]:
        _per_token_int8_matmul(graph, node, numpy_helper.to_array(weights[node.input[1]]))
    for node in [n for n in graph.node if n.op_type == "Attention"]:
        x, qkv_weight, qkv_bias, mask_index = node.input[:4]  # mask_index: each text's length (right padding)
        if qkv_weight not in weights or len(node.input) > 4:
            raise EncoderUnavailable(f"{source}: attention node {node.name} is not the fused BERT self-attention")
        heads = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "num_heads")
        weight = numpy_helper.to_array(weights[qkv_weight])
        p = "pt8" + node.name.replace("/", "_")
        graph.initializer.append(numpy_helper.from_array(np.array([weight.shape[1] // 3] * 3, np.int64), f"{p}_split"))
        project = helper.make_node("MatMul", [x, qkv_weight], [f"{p}_qkv"], name=f"{p}_project")
        split = helper.make_node(
            "Split", [f"{p}_qkv", f"{p}_split"], [f"{p}_q", f"{p}_k", f"{p}_v"], axis=-1, name=f"{p}_split"
        )
        attend = helper.make_node(
            "MultiHeadAttention",
            [f"{p}_q", f"{p}_k", f"{p}_v", qkv_bias, mask_index],
            list(node.output),
            num_heads=heads,
            domain="com.microsoft",
            name=f"{p}_attend",
        )
        index = list(graph.node).index(node)
        graph.node.remove(node)
        for offset, new in enumerate((project, split, attend)):
            graph.node.insert(index + offset, new)
        _per_token_int8_matmul(graph, project, weight)
    used = {name for n in graph.node for name in n.input}
    for initializer in [i for i in graph.initializer if i.name not in used]:  # the float weights replaced
        graph.initializer.remove(initializer)
    onnx.save(model, str(target))
    return target


# Weight steps per sign: 63 (7 bits), not 127. On x86 CPUs without VNNI (AVX2, AVX-512 before VNNI: AMD Zen 3, for
# one) ONNX Runtime's u8·s8 kernel adds pairs of uint8 x int8 products in int16 with saturation (VPMADDUBSW): with
# 127, two products of a large activation step (up to 255) overflow 32,767 and the sum is clipped, so the result
# depends on the CPU. With 63 a pair is at most 255 * 63 * 2 = 32,130: exact on every CPU. Measured on an AMD EPYC
# (Zen 3, no VNNI): a token with an outlier came out 4.7% off with 127, within int8 error with 63.
WEIGHT_STEPS = 63


def _per_token_int8_matmul(graph, node, weight: np.ndarray) -> None:
    """Replace ``Y = X @ W`` (X [..., K], constant W [K, N]) in place by: X as rows [M, K]; per row s = max|x|/127;
    x_q = round(x / s) + 128 (uint8); Y = (x_q - 128) @ W_q · w_scale · s, back to [..., N]. W_q is W per output
    channel in int8 (w_scale = max|w|/127). MatMulIntegerToFloat applies w_scale in the integer product's kernel."""
    from onnx import helper, numpy_helper  # deferred: onnx

    k, n = weight.shape
    w_scale = (np.maximum(np.abs(weight).max(axis=0), 1e-8) / WEIGHT_STEPS).astype(np.float32)
    w_q = np.clip(np.round(weight / w_scale), -WEIGHT_STEPS, WEIGHT_STEPS).astype(np.int8)
    p = "pt8" + node.name.replace("/", "_")
    constants = {
        "w_q": w_q,
        "w_scale": w_scale,
        "rows": np.array([-1, k], np.int64),
        "inv127": np.array(1 / 127.0, np.float32),
        "eps": np.array(1e-8, np.float32),
        "zero": np.array(128, np.uint8),
        "one": np.array(1.0, np.float32),
        "n": np.array([n], np.int64),
        "start": np.array([0], np.int64),
        "end": np.array([-1], np.int64),
        "axis1": np.array([1], np.int64),
    }
    graph.initializer.extend(numpy_helper.from_array(v, f"{p}_{name}") for name, v in constants.items())
    c = {name: f"{p}_{name}" for name in constants}
    x, y = node.input[0], node.output[0]
    t = {name: f"{p}_{name}_t" for name in ("x2", "abs", "amax", "s0", "s", "sshape", "zeros", "xq", "y0", "s2")}
    t.update({name: f"{p}_{name}_t" for name in ("y2", "xshape", "lead", "yshape")})
    nodes = [
        helper.make_node("Reshape", [x, c["rows"]], [t["x2"]]),
        helper.make_node("Abs", [t["x2"]], [t["abs"]]),
        helper.make_node("ReduceMax", [t["abs"]], [t["amax"]], axes=[1], keepdims=0),
        helper.make_node("Mul", [t["amax"], c["inv127"]], [t["s0"]]),
        helper.make_node("Max", [t["s0"], c["eps"]], [t["s"]]),
        helper.make_node("Shape", [t["s"]], [t["sshape"]]),
        helper.make_node(
            "ConstantOfShape", [t["sshape"]], [t["zeros"]], value=numpy_helper.from_array(np.array([128], np.uint8))
        ),
        helper.make_node("QuantizeLinear", [t["x2"], t["s"], t["zeros"]], [t["xq"]], axis=0),
        helper.make_node(
            "MatMulIntegerToFloat",
            [t["xq"], c["w_q"], c["one"], c["w_scale"], c["zero"]],
            [t["y0"]],
            domain="com.microsoft",
        ),
        helper.make_node("Unsqueeze", [t["s"], c["axis1"]], [t["s2"]]),
        helper.make_node("Mul", [t["y0"], t["s2"]], [t["y2"]]),
        helper.make_node("Shape", [x], [t["xshape"]]),
        helper.make_node("Slice", [t["xshape"], c["start"], c["end"]], [t["lead"]]),
        helper.make_node("Concat", [t["lead"], c["n"]], [t["yshape"]], axis=0),
        helper.make_node("Reshape", [t["y2"], t["yshape"]], [y]),
    ]
    for offset, new in enumerate(nodes):
        new.name = f"{p}_{offset}"
    index = list(graph.node).index(node)
    graph.node.remove(node)
    for offset, new in enumerate(nodes):
        graph.node.insert(index + offset, new)
