"""Direction tests for model.conv (a ResNet's depth, image size, frames, width and classes): more
of each is more work per sample, so the step takes longer; a wider network or more classes also
sends more gradient bytes.  tests/test_controls.py collects ``COVERED``; the closed forms are in
tests/test_convnet.py."""
from __future__ import annotations

from explorer.scenario import load
from explorer.simulate import simulate

from conftest import ROOT

RN = ROOT / "scenarios" / "resnet50-cloud-dp.yaml"


def _times(key: str, values) -> list[float]:
    return [simulate(load(RN, {f"model.conv.{key}": v})).iteration_time_s for v in values]


def _dp_bytes(key: str, values) -> list[float]:
    over = {"communication.compression.kind": "none"}
    return [simulate(load(RN, {**over, f"model.conv.{key}": v})).comm_bytes_per_gpu["dp"] for v in values]


def test_deeper_resnets_take_longer():
    """depth 18 < 34 < 50 < 101 < 152 in step time (1.8 to 11.5 GMACs per image)."""
    times = _times("depth", (18, 34, 50, 101, 152))
    assert times == sorted(times) and len(set(times)) == 5


def test_larger_images_take_longer():
    """image_size 160 < 224 < 288: the feature maps grow with the square of the side."""
    times = _times("image_size", (160, 224, 288))
    assert times[0] < times[1] < times[2]


def test_more_frames_take_longer():
    """frames 1 < 4 < 8: every feature map is that many frames deep."""
    times = _times("frames", (1, 4, 8))
    assert times[0] < times[1] < times[2]


def test_a_wider_network_takes_longer_and_sends_more():
    """width 32 < 64 < 96: channels (and parameters, quadratically) grow."""
    times = _times("width", (32, 64, 96))
    sent = _dp_bytes("width", (32, 64, 96))
    assert times[0] < times[1] < times[2] and sent[0] < sent[1] < sent[2]


def test_more_classes_add_classifier_work_and_bytes():
    """classes 10 < 1000 < 21841 (CIFAR, ImageNet-1k, ImageNet-21k): the classifier grows, and with it
    the work and the gradient (uncompressed: PowerSGD's buckets re-cut with the parameter count, which
    moves their readiness by more than the classifier's few microseconds)."""
    over = {"communication.compression.kind": "none"}
    times = [simulate(load(RN, {**over, "model.conv.classes": v})).iteration_time_s
             for v in (10, 1000, 21841)]
    sent = _dp_bytes("classes", (10, 1000, 21841))
    assert times[0] < times[1] < times[2] and sent[0] < sent[1] < sent[2]


COVERED = {
    "model.conv.depth": "test_deeper_resnets_take_longer",
    "model.conv.image_size": "test_larger_images_take_longer",
    "model.conv.frames": "test_more_frames_take_longer",
    "model.conv.width": "test_a_wider_network_takes_longer_and_sends_more",
    "model.conv.classes": "test_more_classes_add_classifier_work_and_bytes",
}
