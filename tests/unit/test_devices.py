"""GPU where present: encoders pick CUDA when their runtime sees a GPU, with a batch sized to its free memory."""

import pytest

from paperlake.vectors import encoders
from paperlake.vectors.encoders import gpu_batch_size, resolve_device


def test_auto_follows_the_runtime(monkeypatch):
    monkeypatch.setattr(encoders, "_cuda_available", lambda runtime: runtime == "onnx")
    assert resolve_device("auto", runtime="onnx") == "cuda" and resolve_device("auto", runtime="torch") == "cpu"
    assert resolve_device("cpu", runtime="onnx") == "cpu"
    with pytest.raises(ValueError, match="auto, cpu, cuda"):
        resolve_device("tpu")


def test_this_machine_has_no_gpu_so_auto_is_the_cpu_and_cuda_is_refused():
    assert resolve_device("auto", runtime="onnx") == "cpu"
    with pytest.raises(RuntimeError, match="PAPERLAKE_DEVICE=cuda, but this onnx runtime sees no GPU"):
        resolve_device("cuda", runtime="onnx")


def test_gpu_batch_from_free_memory():
    assert gpu_batch_size(64, free_bytes=16 * 2**30) == 128  # half of 16 GB at 64 MB an input
    assert gpu_batch_size(64, free_bytes=2 * 2**30) == 64  # never below the configured batch
    assert gpu_batch_size(64, free_bytes=2**40) == 1024  # nor above the ceiling
